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
# ncu on tf32_weight_gradient's third launch of benches/rows_wgrad_ncu.py: wgrad_ncu CASE
wgrad_ncu() {
  timeout 150 ncu --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy \
    --section MemoryWorkloadAnalysis --section SourceCounters -k regex:tf32_weight_gradient \
    --launch-skip 2 --launch-count 1 python3 benches/rows_wgrad_ncu.py $1 > $O/ncu-$1.log 2>&1
  grep -E "Duration|Throughput|Busy|Stall|Issued|Eligible|Hit Rate|Pipe|Occupancy|Warp Cycles" $O/ncu-$1.log | head -60
}
# tf32_weight_gradient alone on the cases its form takes, by build: $BUILDS (folders holding
# a copy of the package, carried in scratch/; "." the tree's). In A: session 69's
# (scratch/base), the output gradient rounded once in shared memory (scratch/round), and
# the tree's (also A's pairs by float2). In N: before the division-free walk of the box
# rows and the tree's; make the first here before the call (scratch/ is not tracked):
# mkdir -p scratch/prewalk && git archive b095122^ gemmconv | tar -x -C scratch/prewalk
wgrad_builds() {
  for code in ${BUILDS:-scratch/base scratch/round .}; do for c in 2d-1024 2d-3x7-512 2d-64to128; do
    echo "$code $(PYTHONPATH=$code timeout 60 python3 benches/rows_wgrad_ncu.py $c 2>&1 | tail -1)"
  done; done | tee $O/wgrad-builds.log
}
left() { echo $(( ${1:-570} - SECONDS )); }   # seconds left of the call's budget
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
rest_tests() {
  shard() {   # shard NAME PROCESSES FILES...: the files' node ids into /tmp/NAME0..
    name=$1 n=$2; shift 2
    python3 -m pytest --co -q -m cuda -p no:cacheprovider "$@" 2>/dev/null | grep "::" |
      awk -v n=$n -v f=/tmp/$name '{print > (f (NR - 1) % n ".ids")}'
  }
  shard fused 6 tests/test_cuda_fused.py
  shard graphs 4 tests/test_cuda_graphs.py tests/test_cuda_replay.py
  shard reuse 2 tests/test_cuda_reuse.py
  for f in /tmp/*.ids; do
    timeout ${TC:-260} python3 -m pytest -v -m cuda -p no:cacheprovider $(cat $f) > ${f%.ids}.log 2>&1 &
  done
  wait
  (cd /tmp && cat fused*.log graphs*.log reuse*.log > all.txt
   { count all.txt; for f in fused*.log graphs*.log reuse*.log; do echo "$f: $(tail -1 $f)"; done; } | tee $O/counts.txt
   tar -czf $O/logs.tgz fused*.log graphs*.log reuse*.log)
}
case "$1" in
C) gpu
  rest_tests ;;
N) gpu
  node
  rest_tests
  probe 60 mma-rate mma_rate_probe.py
  BUILDS="scratch/prewalk ." wgrad_builds
  TB=150 table train-f32 --layouts --backward --case 2d-1024 --case 2d-3x7-512 --case 2d-64to128
  [ $(left) -gt 100 ] && wgrad_ncu 2d-1024 ;;
esac
