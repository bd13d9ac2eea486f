#!/usr/bin/env bash
# Session 72's device calls (session 71 wrote A; session 72 widened it to all three
# balanced forms):
#   A: tf32_weight_gradient in balanced warps (_cuda.WGRAD_BALANCED: 3x3 in 12 warps of
#      three W taps, 2d-64to128's 3x5 of two output tiles in 8 of five, 3x7 in 14 of two
#      tiles; built offline, off): its CUDA tests against the default form's bits, the
#      kernel alone in both forms on the three cases (rows_wgrad_ncu.py, one process each,
#      in turns; checksums equal), mma.sync's own rate at each form's tiles and warps
#      (mma_rate_probe.py), the channels_last steps in both (cl128_probe.py); then,
#      in what is left of the call's 560 s, test_cuda_depthwise but for its bfloat16 tests
#      (949, not run on session 70's code) and the float32 training table with the layouts.
#   S: A's first half (its tests, the kernel alone and the steps, about 300 s), where little
#      device time is left; T: its tests and the kernel alone (about 150 s).
source benches/run-lib.sh "$1"
case "$1" in
A|S|T) gpu
  node
  timeout 120 python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_fused.py \
    -k "balanced or on_mma" > $O/balanced-tests.log 2>&1; count $O/balanced-tests.log
  for c in 2d-1024 2d-3x7-512 2d-64to128; do for t in 0 1 0 1; do   # (two samples each, in turns)
    echo "balanced $t: $(timeout 40 python3 benches/rows_wgrad_ncu.py $c $t 2>&1 | tail -1)"
  done; done | tee $O/wgrad-forms.log
  probe 40 mma-rate mma_rate_probe.py
  [ "$1" = T ] && exit
  probe 100 step cl128_probe.py 2d-1024 2d-3x7-512 2d-64to128
  probe 100 step-balanced cl128_probe.py --balanced 2d-1024 2d-3x7-512 2d-64to128
  [ "$1" = S ] && exit
  [ $(left 560) -gt 80 ] && TC=$(( $(left 560) < 210 ? $(left 560) - 20 : 190 )) \
    sharded_tests "depthwise:6:tests/test_cuda_depthwise.py:not bfloat16"
  [ $(left 560) -gt 100 ] && TB=$(( $(left 560) < 200 ? $(left 560) - 10 : 200 )) \
    table train-f32-layouts --layouts --backward ;;
esac
