#!/usr/bin/env bash
# Session 69's second script (written after run-s69.sh's F could not start for an hour):
#   W: the float32 channels_last weight gradient on TF32 mma.sync (mma_wgrad.cu): its edges
#      against float64 and under memcheck, then timed against torch's and gemmconv's on the
#      three cases whose float32 channels_last training loses (about 60 s).
#   F: run-s69.sh's F, with the forward probe's ablations (about 4 min).
source benches/run-lib.sh "$1"
case "$1" in
W) gpu
  probe 150 wgrad mma_wgrad_probe.py
  timeout 90 compute-sanitizer --tool memcheck python3 benches/mma_wgrad_probe.py --edges 2>&1 | tail -8 | tee $O/memcheck.log ;;
WF) bash benches/run-s69b.sh W; bash benches/run-s69.sh F ;;
esac
