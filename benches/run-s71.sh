#!/usr/bin/env bash
# Session 71's device calls, after run-s70.sh N (the CUDA test files session 70's A could
# not finish, mma.sync's rate, the kernel by build, the three mma cases' training rows).
#   B: the depthwise tests of the precisions session 70's A did not reach (float32 IEEE and
#      TF32, float16, the rest: about 180 s in four processes), then the whole float32
#      training table in both layouts (the only table session 70's kernel changes), then,
#      on an H200 only, the zoo's DCGAN (its float32 channels_last layers are the ones
#      under 0.8x).
source benches/run-lib.sh "$1"
case "$1" in
B) gpu
  node
  t dw-ieee tests/test_cuda_depthwise.py -k "float32-ieee" &
  t dw-tf32 tests/test_cuda_depthwise.py -k "float32-tf32" &
  t dw-f16 tests/test_cuda_depthwise.py -k "float16 and not bfloat16" &
  t dw-rest tests/test_cuda_depthwise.py -k "not matches_float64" &
  summary > $O/counts.txt; cat $O/counts.txt   # (summary's wait must run in this shell)
  (cd $O && tar -czf dw-logs.tgz dw-*.log && rm -f dw-*.log all.txt)
  TB=230 table train-f32-layouts --layouts --backward
  if grep -q H200 $O/gpu.txt; then zoo_model dcgan 120; fi ;;
esac
