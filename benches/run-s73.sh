#!/usr/bin/env bash
# Session 73's device calls.
#   B: the balanced weight-gradient forms on by default (_cuda.WGRAD_BALANCED): every CUDA
#      test that reaches tf32_weight_gradient (test_cuda_fused whole, test_cuda_channels_last's
#      float32 tests) in 12 processes, then the float32 training table with the layouts in
#      what is left of the call's 480 s.
#   C: B's tests alone, each process cut at 200 s (about 260 s), where little device time is left.
source benches/run-lib.sh "$1"
case "$1" in
B|C) gpu
  node
  TC=$([ "$1" = C ] && echo 200 || echo 230) sharded_tests "fused:8:tests/test_cuda_fused.py" \
    "cl:4:tests/test_cuda_channels_last.py:float32"
  [ "$1" = B ] && [ $(left 480) -gt 120 ] && TB=$(( $(left 480) - 10 )) table train-f32-layouts --layouts --backward ;;
esac
