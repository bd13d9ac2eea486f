#!/usr/bin/env bash
# Session 72's device calls (session 71 wrote A; session 72 widened it to the two-tile form):
#   A: tf32_weight_gradient spread over more warps (_cuda.WGRAD_SPREAD: warps of three W
#      taps, 3x3 in 12; warps of two tiles of A, 3x7 in 14; built offline, off): its CUDA
#      tests against the default form's bits, the kernel alone in both forms on the cases
#      they take (rows_wgrad_ncu.py, one process each, in turns; checksums equal), the
#      channels_last steps in both (cl128_probe.py); then test_cuda_depthwise but for its
#      bfloat16 tests (949, not run on session 70's code); then the float32 training table
#      with the layouts, in what is left of the call (about 560 s in all; no carry needed).
#   S: A's first half (its tests, the kernel alone and the steps, about 250 s), where little
#      device time is left.
source benches/run-lib.sh "$1"
case "$1" in
A|S) gpu
  node
  timeout 120 python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_fused.py \
    -k "spread or on_mma" > $O/spread-tests.log 2>&1; count $O/spread-tests.log
  for c in 2d-1024 2d-3x7-512; do for t in 0 1 0 1; do   # (in turns: two samples of each)
    echo "spread $t: $(timeout 60 python3 benches/rows_wgrad_ncu.py $c $t 2>&1 | tail -1)"
  done; done | tee $O/wgrad-forms.log
  probe 90 step cl128_probe.py 2d-1024 2d-3x7-512
  probe 90 step-spread cl128_probe.py --spread 2d-1024 2d-3x7-512
  [ "$1" = S ] && exit
  TC=190 sharded_tests "depthwise:6:tests/test_cuda_depthwise.py:not bfloat16"
  TB=$(( $(left 560) < 200 ? $(left 560) : 200 )) table train-f32-layouts --layouts --backward ;;
esac
