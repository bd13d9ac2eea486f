#!/usr/bin/env bash
# Session 69's device calls, written in session 68. No gemmconv code changed in sessions 67
# and 68, so the CUDA code is still the one every CUDA test file passed in session 66
# (5,273 passed, 0 failed, on an H100); no test run comes first.
#   F: benches/wgmma_forward.cu's forms after session 68's offline mends (every chain of
#      wgmmas whole in SASS: wgmma_sass_check.py), right against float64 and timed against
#      torch and gemmconv's Triton route on 2d-1024, 2d-3x7-512 and 2d-64to128 (about
#      90 s), then the edges under memcheck (about 40 s). Session 68's first forms ran at
#      175-311 TFLOP/s against the Triton route's 401-427 (results/s68/F). Then ncu on
#      2d-1024 in F's best form and in two of the new ones (about 90 s): what bounds them.
#   A: on an H200, the zoo's first call (run-s67.sh Z1); on an H100, nothing more: the
#      zoo and the tables ran on H100s in sessions 63-67 on the same code.
case "$1" in A) if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash benches/run-s67.sh Z1; else echo "not an H200: nothing to run"; exit 0; fi ;; esac
case "$1" in Z1|Z2|G) exec bash benches/run-s67.sh "$1" ;; esac   # (it sets up its own folder)
source benches/run-lib.sh "$1"
case "$1" in
F) gpu
  probe 200 forward wgmma_forward_probe.py
  timeout 120 compute-sanitizer --tool memcheck python3 benches/wgmma_forward_probe.py --edges 2>&1 | tail -15 | tee $O/memcheck.log
  for form in 4,2,0,1 3,4,1,1 4,2,1,2; do
    timeout 60 ncu --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
      --section MemoryWorkloadAnalysis -k regex:forward_k3 --launch-skip 2 --launch-count 1 \
      python3 benches/wgmma_forward_probe.py --profile $form > $O/ncu-$form.log 2>&1
    grep -E "Duration|Throughput|Busy|Stall|Issued|Eligible|Hit Rate" $O/ncu-$form.log | head -40
  done ;;
esac
