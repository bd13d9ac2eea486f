#!/usr/bin/env bash
# Session 58's device calls, written in session 57 (outputs under $OUT/<call>).
#   A: every CUDA test file on session 57's final code (155, 156 and the review's test
#      helpers in test_cuda_fused ran only in part on a GPU), then the bfloat16 training
#      steps in both formats in turns over the 14 cases (session 57 F's was cut off at 130 s).
#   B: whether the fused backward should take channels_last float32 and 3-D calls
#      (cl_fused_backward_probe.py), then DCGAN (155 moves its channels_last training steps).
#   C (rewritten in session 58 after B): change 157's tests and tables.
#   D: the VAE decoder and the 2-D U-Net, the same.
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
C) gpu   # 157 (channels_last 16-bit 3-D and float32 2-D backwards fused): its tests, its tables, 2d-1024's float32 kernels
  node
  t fused tests/test_cuda_fused.py -k "channels_last_stride_one or allocates or backward" &
  t cl tests/test_cuda_channels_last.py &
  t graphs tests/test_cuda_graphs.py tests/test_cuda_replay.py &
  summary
  TB=130 table train-f32-layouts --layouts --backward --case 2d-1024 --case 2d-3x7 --case 2d-64to128 --case 2d-512x1024
  TB=110 table train-bf16-3d-layouts --layouts --backward --dtype bfloat16 --case 3d-3x5x7 --case 3d-64cube --case 3d-32to64 --case 3d-96cube
  for f in "" --channels-last; do layer "ConvTranspose2d(64, 64, 3)" --input 8,64,1024,1024 --backward $f; done ;;
D) gpu
  node
  zoo_model vae-decoder 170; zoo_model unet2d 250 ;;
esac
