#!/usr/bin/env bash
# Session 69's third script: the float32 channels_last weight gradient's "mma" form, now a
# route (fused.float32_weight_form). M: its CUDA tests (test_cuda_fused -k on_mma, 12),
# then the float32 training rows of the cases it takes (2d-1024, 2d-3x7-512) NCHW and
# channels_last, then test_cuda_fused's float32 channels_last forward+backward cases.
source benches/run-lib.sh "$1"
case "$1" in
M) gpu
  TT=150 t mma tests/test_cuda_fused.py -k on_mma; count $O/mma.log | tail -5
  TB=150 table train-f32 --layouts --backward --case 2d-1024 --case 2d-3x7-512 --case 2d-64to128
  TT=150 t fused-cl tests/test_cuda_fused.py -k "matches_float64 and channels_last and float32"; count $O/fused-cl.log | tail -5 ;;
esac
# T: the CUDA tests beyond test_cuda_fused that reach the mma form (bench cases 2d-1024 and
#    2d-3x7-512 scaled down, float32), 44 tests.
case "$1" in T) gpu
  TT=170 t rest tests/test_cuda_channels_last.py tests/test_cuda_graphs.py tests/test_cuda_replay.py tests/test_cuda.py -k "(2d-1024 or 2d-3x7-512) and not bfloat16 and not float16 and not ieee"
  count $O/rest.log | tail -8 ;;
esac
