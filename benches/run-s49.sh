#!/usr/bin/env bash
# Session 49's device calls (outputs under $OUT/<call>; logs kept in benches/results/s49/).
#   A: why our small layers' steps take longer on a running GPU than their host time with
#      the GPU busy (live_probe.py: tiny graphs, DCGAN's layer, DCGAN's and the VAE
#      decoder's channels_last steps; the collector and device threads off).
#   B: does a graph's launch, or a step, cost more with many graphs kept? (live_probe.py
#      --crowded: 0, 100, 400, 1000 other graphs)
#   C: a small layer's step phase by phase (step_phases_probe.py).
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu, all_tests, table, probe, zoo_model
case "$1" in
A) gpu
  probe 500 live live_probe.py ;;
B) gpu
  probe 500 crowded live_probe.py --crowded ;;
C) gpu
  probe 300 phases step_phases_probe.py ;;
esac
