#!/usr/bin/env bash
# Session 39's device calls (outputs under $OUT/<call>; logs kept in benches/results/s39/).
# Modes of run-s35.sh (P: every CUDA test in parallel processes; G: the tables; Z: the zoo,
# $MODELS) run through it.
#   A: does the copy engine load boxes whose innermost start is off 16 bytes
#      (tma_offset_probe.py, each start in a process of its own; never run since session 29
#      lost its context)? Where it does, the float32 weight gradient from one unmoved copy
#      against the moved copies (wgrad_shifted_probe.py --unaligned).
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary
case "$1" in
A)
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  timeout 200 python3 benches/tma_offset_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/tma.log
  u=; grep -q "every start loads" $O/tma.log && u=--unaligned
  timeout 300 python3 benches/wgrad_shifted_probe.py $u 2>&1 | grep -v "Warn\|_warn_once" | tee $O/wgrad.log ;;
*) bash benches/run-s35.sh "$@" ;;
esac
