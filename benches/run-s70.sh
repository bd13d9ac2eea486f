#!/usr/bin/env bash
# Session 70's device calls. No GPU ran after session 69's `_cuda._launch` refactor (every
# kernel launch goes through it), and tf32_weight_gradient changed this session, so A runs
# every CUDA test file after two short timings.
#   A: tf32_weight_gradient timed by build (about 90 s); 2d-64to128's float32 channels_last
#      step with and without the fused backward (cl128_probe.py, about 60 s); every CUDA
#      test file (run-s35.sh P, about 380 s).
#   B: ncu on the kernel (2d-1024); the float32 training table, layouts.
#   G: the other three tables (bfloat16 training, the two forwards), layouts.
source benches/run-lib.sh "$1"
case "$1" in
A) gpu
  node
  wgrad_builds
  probe 90 cl128 cl128_probe.py; probe 90 cl128-rows512 cl128_probe.py --rows 512
  all_tests; cat $O/P.txt | tail -25 ;;
B) gpu
  node
  wgrad_ncu 2d-1024
  [ $(left) -gt 90 ] && TB=$(left) table train-f32-layouts --layouts --backward ;;
G) gpu
  node
  TB=200 table train-bf16-layouts --layouts --backward --dtype bfloat16
  TB=150 table fwd-bf16-layouts --layouts --dtype bfloat16
  [ $(left) -gt 60 ] && TB=$(left) table fwd-f32-layouts --layouts ;;
esac
# C: after A ran out of time inside run-s35.sh P (test_cuda, _channels_last and the
#    depthwise bfloat16 tests passed there; the rest did not come back): test_cuda_fused,
#    _graphs, _replay and _reuse in twelve processes of node ids (`pytest --co`, dealt
#    round-robin), each cut at $TC seconds; counts into $O/counts.txt, logs in one tar.
# N: next session's first call (about 560 s; carry scratch): C; mma.sync's own rate
#    (mma_rate_probe.py, the weight-gradient kernel's ceiling); the kernel by build (the
#    box rows' walk); the float32 training rows of the three cases the mma weight gradient
#    takes, both layouts; ncu on the kernel as time allows.
REST=(fused:6:tests/test_cuda_fused.py "graphs:4:tests/test_cuda_graphs.py tests/test_cuda_replay.py"
      reuse:2:tests/test_cuda_reuse.py)
case "$1" in
C) gpu
  sharded_tests "${REST[@]}" ;;
N) gpu
  node
  sharded_tests "${REST[@]}"
  probe 60 mma-rate mma_rate_probe.py
  BUILDS="scratch/prewalk ." wgrad_builds
  TB=150 table train-f32 --layouts --backward --case 2d-1024 --case 2d-3x7-512 --case 2d-64to128
  [ $(left) -gt 100 ] && wgrad_ncu 2d-1024 ;;
esac
