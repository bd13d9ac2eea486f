#!/usr/bin/env bash
# Session 71's device calls. Machines were scarce again (no start from 02:10 to 02:55), so A
# is run-s70.sh N cut to what decides most, the CUDA tests first:
#   A: the CUDA tests session 70's A did not reach (test_cuda_fused, _graphs, _replay,
#      _reuse, and test_cuda_depthwise but for its bfloat16 tests) in sixteen processes,
#      about 300 s; mma.sync's own rate (mma_rate_probe.py, about 20 s); the mma weight
#      gradient alone before and after the box rows' walk (carry scratch; make
#      scratch/prewalk first: `git archive b095122^ gemmconv | tar -x -C scratch/prewalk`);
#      the float32 training rows of the three cases it takes, both layouts.
#   S: A cut to under 300 s: mma.sync's rate, then the tests (fused in eight processes).
#   B: the whole float32 training table in both layouts (the only table session 70's
#      kernel changes), then, on an H200 only, the zoo's DCGAN (its float32 channels_last
#      layers are the ones under 0.8x).
#   DW: if set, A runs the depthwise tests too (their kernels ran in bfloat16 on session
#   69's launches in session 70). BUDGET: A's seconds (575 unless given: run's timeout less a few seconds).
source benches/run-lib.sh "$1"
BUDGET=${BUDGET:-575}
case "$1" in
A) gpu
  node
  TC=${TC:-300} sharded_tests fused:6:tests/test_cuda_fused.py "graphs:4:tests/test_cuda_graphs.py tests/test_cuda_replay.py" \
    reuse:2:tests/test_cuda_reuse.py ${DW:+"depthwise:4:tests/test_cuda_depthwise.py:not bfloat16"}
  probe 40 mma-rate mma_rate_probe.py
  BUILDS="scratch/prewalk ." wgrad_builds
  TB=$(( $(left $BUDGET) < 150 ? $(left $BUDGET) : 150 )) table train-f32 --layouts --backward \
    --case 2d-1024 --case 2d-3x7-512 --case 2d-64to128 ;;
S) gpu   # A cut to under 300 s, when little device time is left: the rate, then the tests
  node
  probe 40 mma-rate mma_rate_probe.py
  TC=${TC:-200} sharded_tests fused:8:tests/test_cuda_fused.py "graphs:4:tests/test_cuda_graphs.py tests/test_cuda_replay.py" \
    reuse:2:tests/test_cuda_reuse.py ;;
B) gpu
  node
  TB=230 table train-f32-layouts --layouts --backward
  if grep -q H200 $O/gpu.txt; then zoo_model dcgan 120; fi ;;
W) gpu   # (run inline on the warm machine after S, with 221 s left; the 2d-3x7-512 row alone after)
  node
  BUILDS="scratch/prewalk ." wgrad_builds
  TB=$(( 150 - SECONDS )) table train-f32 --layouts --backward --case 2d-1024 --case 2d-64to128 ;;
n)   # ncu's three sections on the kernel (2d-1024), in the last 80 s of the budget
  timeout 75 ncu --section SpeedOfLight --section WarpStateStats --section Occupancy -k regex:tf32_weight_gradient \
    --launch-skip 2 --launch-count 1 python3 benches/rows_wgrad_ncu.py 2d-1024 > $O/ncu.log 2>&1 ;;
esac
