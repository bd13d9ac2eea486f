#!/usr/bin/env bash
# Session 59's device calls, written in session 58 (outputs under $OUT/<call>).
#   A: every CUDA test file on session 58's final code (158's kernel forms: shifted_rows
#      reading channels_last rows, the weight gradient's input tile as A; they touch the
#      planar float32 forms too), then cl_wgrad_probe: the float32 channels_last weight
#      gradient, rows against moved copies, kernel and training step.
#   B: the float32 training steps of the stride-1 2-D cases in both formats in turns, and
#      the 17-case float32 NCHW training table (158 changed the planar float32 kernels'
#      source: no regression?).
#   C: the depthwise decoder (not rerun since 155), and DCGAN's layer 6 (0.78x in session 58
#      B's float32 channels_last forward) kernel by kernel: its kernels against its gaps.
source benches/run-lib.sh "$1"   # $O, and count, t, summary, layer, gpu, all_tests, table, ...
case "$1" in
A) gpu
  node
  all_tests
  probe 150 cl-wgrad cl_wgrad_probe.py ;;
B) gpu
  node
  TB=130 table train-f32-layouts --layouts --backward --case 2d-1024 --case 2d-3x7 --case 2d-64to128 --case 2d-512x1024
  TB=250 table train-f32 --backward ;;
C) gpu
  node
  zoo_model depthwise 200
  for f in "" --channels-last; do
    layer "ConvTranspose2d(256, 128, 4, stride=2, padding=1, bias=False)" --input 128,256,8,8 $f
  done ;;
esac
