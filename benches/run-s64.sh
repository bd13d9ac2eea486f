#!/usr/bin/env bash
# Session 64's device calls (outputs under $OUT/<call>), written in session 63, whose
# device calls all ran on an H100 (results/s63) before its one CUDA change:
#   T: every CUDA test file. New since session 63's T (all passed on 38d4b86): the grouped
#      direct kernel (depthwise.GROUPED_MAX_INPUTS, _triton.grouped_transposed), which
#      grouped forwards of 2-8 input channels a group now take on CUDA in 16- and 32-bit
#      floats: cases.GROUPED in test_cuda_depthwise, and every grouped case of the other
#      files' tables; SHARED_ROWS removed (the weight gradient's PTX is 70f1030's).
#   P: grouped_probe.py (the direct kernel against the column routes, and its program
#      size), then fused3d_cl_probe.py (the 3-D channels_last forward forced onto the fused
#      route: bfloat16 3d-64cube and 3d-96cube, 96 and 48 bytes of output channels, under
#      WIDE_3D_BYTES, ran channels_last 0.55 and 0.66 of their NCHW speedups in session 63).
#   G: the four tables (forward and training, float32 and bfloat16, both formats), then the
#      three 1-D cases, which the tables of both formats leave out (last run in session 59).
#   K: kernel by kernel (benches/layer.py), where channels_last lags NCHW most: the bfloat16
#      channels_last training steps of 2d-1024 and 2d-512x1024 (1.15x and 1.13x against
#      NCHW's 1.78x and 1.79x in session 63: our backward about 3.8 ms against cuDNN's 3.2
#      on 2d-1024, our forward 1.5 against 2.9), and 3d-3x5x7's bfloat16 channels_last
#      forward (0.92x, the column routes).
#   Z1, Z2: the zoo (fcn and unet3d with room for their last variant, cut in session 63).
#   Budget (30 minutes, starts included): T about 340 s, P about 250, G about 550, K about
#   90, Z1 about 300, Z2 about 650; T, P, G and K first.
source benches/run-lib.sh "$1"   # $O, and count, t, summary, layer, gpu, all_tests, table, ...
case "$1" in
T) gpu
  all_tests ;;
P) gpu
  node
  probe 300 grouped grouped_probe.py
  probe 250 fused3d fused3d_cl_probe.py ;;
G) gpu
  node
  TB=120 table fwd-f32-layouts --layouts
  TB=120 table fwd-bf16-layouts --layouts --dtype bfloat16
  TB=170 table train-f32-layouts --layouts --backward
  TB=170 table train-bf16-layouts --layouts --backward --dtype bfloat16
  TB=60 table fwd-1d --case 1d- ; TB=60 table fwd-1d-bf16 --case 1d- --dtype bfloat16
  TB=90 table train-1d --case 1d- --backward ;;
K) gpu
  node
  layer "ConvTranspose2d(64, 64, 3)" --input 8,64,1024,1024 --backward --channels-last --dtype bfloat16
  layer "ConvTranspose2d(32, 32, 3)" --input 8,32,512,1024 --backward --channels-last --dtype bfloat16
  layer "ConvTranspose3d(32, 16, (3, 5, 7))" --input 16,32,16,32,64 --channels-last --dtype bfloat16 ;;
R) gpu   # (added in session 64, after T, P, G and K: the grouped kernel's vector form)
  node
  probe 110 grouped-vec grouped_probe.py --no-sizes
  TT=150
  grouped_tests "not matches_float64"
  summary ;;
Z1) gpu
  node
  zoo_model dcgan 120; zoo_model vae-decoder 200; zoo_model unet2d 230 ;;
Z2) gpu
  node
  zoo_model depthwise 120; zoo_model fcn 200; zoo_model unet3d 200; zoo_model hifigan 180 ;;
esac
