#!/usr/bin/env bash
# Written in session 71 for the next session's first call (about 450 s; no carry needed):
#   A: tf32_weight_gradient in warps of three W taps (_cuda.WGRAD_WARP_TAPS 3, built in
#      session 71 after its device time ran out): its CUDA test against the default form's
#      bits, the kernel alone in both forms (rows_wgrad_ncu.py, one process each, the
#      checksums equal), 2d-1024's channels_last step in both (cl128_probe.py); then
#      test_cuda_depthwise but for its bfloat16 tests (949, not run on session 70's code);
#      then the float32 training table with the layouts.
source benches/run-lib.sh "$1"
case "$1" in
A) gpu
  node
  timeout 120 python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_fused.py \
    -k "warps_of_three or on_mma" > $O/warp-taps-tests.log 2>&1; count $O/warp-taps-tests.log
  for c in 2d-1024; do for t in 1 3 1 3; do   # (in turns: two samples of each)
    echo "taps $t: $(timeout 60 python3 benches/rows_wgrad_ncu.py $c $t 2>&1 | tail -1)"
  done; done | tee $O/wgrad-forms.log
  probe 60 step-1 cl128_probe.py 2d-1024; probe 60 step-3 cl128_probe.py --warp-taps 3 2d-1024
  TC=200 sharded_tests "depthwise:6:tests/test_cuda_depthwise.py:not bfloat16"
  TB=$(( $(left 560) < 200 ? $(left 560) : 200 )) table train-f32-layouts --layouts --backward ;;
esac
