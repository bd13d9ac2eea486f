#!/usr/bin/env bash
# Session 63's device calls (outputs under $OUT/<call>), written in session 62, whose
# device calls all ran on an H100 (results/s62).
#   T: every CUDA test file on session 62's final code. Its changes since its own T (which
#      ran with BOXES_DOWN_H on, all passed): the workspace count of a channels_last output
#      gradient read as it lies, and the CUDA memory tests counting requested bytes
#      (tests/helpers.requested_during); the channels_last float32 backward test's third
#      form, "planar-shared-rows" (fused.SHARED_ROWS forced on). None of them ran on a GPU.
#   S: the decision on fused.SHARED_ROWS (cl_wgrad_probe.py: the channels_last float32
#      weight gradient alone and in the step, rows / planar / planar with shared rows):
#      the moved forms reading the shared operand's channels_last rows rather than a
#      planar copy of it. If it wins, set it on, then F. The same run re-measures the rows
#      form against the planar one now that the boxes walk down H
#      (CHANNELS_LAST_PLANAR_PRODUCTS was set with them along W).
#   Budget (30 minutes, starts included): T about 330 s, S about 300, G about 600, Z1 and
#   Z2 about 500 each; take T and S first, then G, then the zoo.
#   F: after a change of default: test_cuda_fused, and the float32 training table in both
#      formats.
#   G: the tables on the H200 for the issues' notes: forward (both formats, float32 and
#      bfloat16) and training (float32 both formats; bfloat16 both formats).
#   Z1, Z2: the zoo, every model (the issues' model table).
source benches/run-lib.sh "$1"   # $O, and count, t, summary, layer, gpu, all_tests, table, ...
case "$1" in
T) gpu
  all_tests ;;
S) gpu
  node
  probe 560 cl-wgrad cl_wgrad_probe.py ;;
F) gpu
  node
  TT=300 t fused tests/test_cuda_fused.py; count $O/fused.log; tail -1 $O/fused.log
  TB=250 table train-f32-layouts --layouts --backward ;;
G) gpu
  node
  TB=120 table fwd-f32-layouts --layouts
  TB=120 table fwd-bf16-layouts --layouts --dtype bfloat16
  TB=170 table train-f32-layouts --layouts --backward
  TB=170 table train-bf16-layouts --layouts --backward --dtype bfloat16 ;;
Z1) gpu
  node
  zoo_model dcgan 100; zoo_model vae-decoder 150; zoo_model unet2d 250 ;;
Z2) gpu
  node
  zoo_model hifigan 180; zoo_model fcn 120; zoo_model depthwise 120; zoo_model unet3d 150 ;;
esac
