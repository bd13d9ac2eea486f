#!/usr/bin/env bash
# Session 65's device calls (outputs under $OUT/<call>). R, T and G are run-s64.sh's, run
# first thing (results/s65): R timed the grouped kernel's vector form on channels_last
# (won four of the six calls, lost 2d-strided-grouped), T and G on the code of session 64's
# end. Then:
#   R2: the grouped kernel with its groups and channel blocks innermost in launch order,
#       GROUPED_CHANNELS_LAST on: grouped_probe.py --no-sizes, then every CUDA test of a
#       grouped case, in six processes (about 250 s).
#   F: float32 3-D training steps with the fused backward (fused.FLOAT32_BACKWARD_DIMS), each
#      case's channels_last and planar step against the cost model's (about 150 s).
case "$1" in
R2) source benches/run-lib.sh "$1"
  gpu
  node
  probe 130 grouped-order grouped_probe.py --no-sizes
  TT=200
  grouped_tests "grouped and not matches_float64"
  t others tests/test_cuda.py tests/test_cuda_channels_last.py tests/test_cuda_graphs.py \
    tests/test_cuda_replay.py -k grouped &
  summary ;;
F) source benches/run-lib.sh "$1"
  gpu
  node
  probe 200 f32-3d f32_backward_probe.py ;;
*) exec bash benches/run-s64.sh "$@" ;;
esac
