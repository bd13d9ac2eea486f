#!/usr/bin/env bash
# Session 58's device calls, written in session 57 (outputs under $OUT/<call>).
#   A: every CUDA test file on session 57's final code (155, 156 and the review's test
#      helpers in test_cuda_fused ran only in part on a GPU), then the bfloat16 training
#      steps in both formats in turns over the 14 cases (session 57 F's was cut off at 130 s).
#   B: whether the fused backward should take channels_last float32 and 3-D calls
#      (cl_fused_backward_probe.py), then DCGAN (155 moves its channels_last training steps).
#   C: the VAE decoder and the 2-D U-Net, the same.
source benches/run-lib.sh "$1"   # $O, and count, t, summary, layer, gpu, all_tests, table, ...
case "$1" in
A) gpu
  node
  all_tests
  TB=250 table train-bf16-layouts --layouts --backward --dtype bfloat16 ;;
B) gpu
  node
  probe 330 cl-fused-backward cl_fused_backward_probe.py
  zoo_model dcgan 200 ;;
C) gpu
  node
  zoo_model vae-decoder 250; zoo_model unet2d 300 ;;
esac
