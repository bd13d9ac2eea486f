#!/usr/bin/env bash
# Session 59's device calls (outputs under $OUT/<call>).
#   A: change 158 first seen on a GPU: its CUDA test, then cl_wgrad_probe (the float32
#      channels_last weight gradient, rows against moved copies, kernel and training step),
#      and the float32 training steps of the stride-1 2-D cases in both formats in turns.
#   B: the CUDA tests of the three float32 channels_last weight-gradient forms, then
#      cl_wgrad_probe again, now with the third form (the planar form on one planar copy of
#      the operand it reads as it lies).
#   C: every CUDA test file on the session's final code, then the float32 layouts table.
source benches/run-lib.sh "$1"   # $O, and count, t, summary, layer, gpu, all_tests, table, ...
layouts() { TB=130 table train-f32-layouts --layouts --backward --case 2d-1024 --case 2d-3x7 --case 2d-64to128 --case 2d-512x1024; }
case "$1" in
A) gpu
  node
  timeout 120 python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_fused.py \
    -k "weight_gradient_of_channels_last_rows_from_moved_copies" > $O/tests.log 2>&1; count $O/tests.log
  probe 170 cl-wgrad cl_wgrad_probe.py
  layouts ;;
B) gpu
  node
  timeout 150 python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_fused.py \
    -k "channels_last_rows_from_moved_copies or in_each_weight_form" > $O/tests.log 2>&1; count $O/tests.log
  probe 240 cl-wgrad cl_wgrad_probe.py ;;
C) gpu
  node
  all_tests
  layouts ;;
esac
# D and E ran as one-line commands (run's limit cut C's table; the machine was still warm):
#   D: source benches/run-lib.sh D; gpu; node; the layouts table as C's; TB=230 table train-f32 --backward
#   E: the four small cases of the float32 training table, this code against session 58's
#      final package (git archive 956bbf3 gemmconv, unpacked in _old/, untracked), in turns:
#      for r in 1 2; do table new$r --backward --case ...; (cd _old && python3 -m gemmconv bench ...); done
