#!/usr/bin/env bash
# Session 48's device calls (outputs under $OUT/<call>; logs kept in benches/results/s48/).
#   A: how the timer's samples of one and the same host-bound model spread, sample by
#      sample (sample_trace_probe.py: torch's zoo model, three deep copies, ours; 36
#      repeats), medians against paired speedups.
#   B: where convert(model) loses on the zoo's small-layer models (zoo_profile.py: paired
#      step times, the host's time with the GPU busy, kernels by name, torch against ours),
#      then the host's time per layer and cProfile of the VAE decoder's float32
#      channels_last step (host_floor_probe.py).
#   C: does a converted model's step wait on the GPU? (runtime_probe.py: CUDA runtime calls
#      a step, the GPU's busy time, device threads on and off).
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu, all_tests, table
case "$1" in
A) gpu
  OUT=$O timeout 400 python3 benches/sample_trace_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/traces.log ;;
B) gpu
  timeout 300 python3 benches/zoo_profile.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/zoo_profile.log
  timeout 200 python3 benches/host_floor_probe.py vae:float32:channels_last dcgan:float32:channels_last 2>&1 | grep -v "Warn\|_warn_once" | tee $O/host.log ;;
C) gpu
  timeout 300 python3 benches/runtime_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/runtime.log ;;
esac
