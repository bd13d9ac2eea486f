#!/usr/bin/env bash
# Session 69's second script (written after run-s69.sh's F could not start for an hour):
#   W: the float32 channels_last weight gradient on TF32 mma.sync (mma_wgrad.cu): its edges
#      against float64 and under memcheck, then timed against torch's and gemmconv's on the
#      three cases whose float32 channels_last training loses (about 60 s).
#   F: run-s69.sh's F with the forward probe's ablations, ncu on one form only (about 3 min).
source benches/run-lib.sh "$1"
case "$1" in
W) gpu
  probe 150 wgrad mma_wgrad_probe.py
  timeout 90 compute-sanitizer --tool memcheck python3 benches/mma_wgrad_probe.py --edges 2>&1 | tail -8 | tee $O/memcheck.log ;;
F) gpu
  probe 200 forward wgmma_forward_probe.py
  timeout 120 compute-sanitizer --tool memcheck python3 benches/wgmma_forward_probe.py --edges 2>&1 | tail -15 | tee $O/memcheck.log
  timeout 60 ncu --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis -k regex:forward_k3 --launch-skip 2 --launch-count 1 \
    python3 benches/wgmma_forward_probe.py --profile 4,2,1,1 > $O/ncu-4,2,1,1.log 2>&1
  grep -E "Duration|Throughput|Busy|Stall|Issued|Eligible|Hit Rate" $O/ncu-4,2,1,1.log | head -40 ;;
WF) gpu   # (the timings first, while device time lasts; then both under memcheck)
  probe 150 wgrad mma_wgrad_probe.py
  probe 200 forward wgmma_forward_probe.py
  timeout 90 compute-sanitizer --tool memcheck python3 benches/mma_wgrad_probe.py --edges 2>&1 | tail -8 | tee $O/wgrad-memcheck.log
  timeout 120 compute-sanitizer --tool memcheck python3 benches/wgmma_forward_probe.py --edges 2>&1 | tail -15 | tee $O/forward-memcheck.log ;;
esac
# R: col2im.cu's tf32_weight_gradient through gemmconv's own launch (edges,
#    determinism, timings, the training step that takes it), about 60 s; then its edges
#    under memcheck.
case "$1" in R) gpu
  probe 200 rows rows_wgrad_probe.py
  timeout 100 compute-sanitizer --tool memcheck python3 -c "import sys; sys.path.insert(0, 'benches'); import torch, rows_wgrad_probe as r; r.edges(torch.Generator('cuda').manual_seed(1))" 2>&1 | tail -4 | tee $O/memcheck.log ;;
esac
