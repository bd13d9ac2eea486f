#!/usr/bin/env bash
# Session 67's device calls, written in session 66, rearranged in session 67 after its first
# calls were refused (391 s of the budget lost by 15:05). No CUDA code changed after session
# 66's last GPU run (TF: test_cuda_fused on 74a4e75, 632 passed; T's six other files, 4,641),
# so no test run comes first. The zoo first: issue 21 asks for it on an H200, and it last
# ran in session 63, on an H100.
#   Z1: dcgan, vae-decoder, unet2d (run-s64.sh's Z1, about 300 s).
#   Z2: depthwise, fcn, hifigan (about 400 s).
#   G: unet3d, then the tables not timed since session 65 (bfloat16 training, the two
#      forwards), then float32 training (about 550 s; the 1-D cases left to run-s68.sh O).
source benches/run-lib.sh "$1"
case "$1" in
Z1) exec bash benches/run-s64.sh Z1 ;;
Z2) gpu
  node
  zoo_model depthwise 120; zoo_model fcn 200; zoo_model hifigan 180 ;;
G) gpu
  node
  zoo_model unet3d 200
  TB=170 table train-bf16-layouts --layouts --backward --dtype bfloat16
  TB=120 table fwd-bf16-layouts --layouts --dtype bfloat16
  TB=120 table fwd-f32-layouts --layouts
  TB=170 table train-f32-layouts --layouts --backward ;;
esac
