#!/usr/bin/env bash
# Session 37's device calls (outputs under $OUT/<call>; logs kept in benches/results/s37/).
# Modes of run-s35.sh (P: every CUDA test in parallel processes; G: the tables; Z: the zoo,
# $MODELS) run through it.
#   A: whether our layers make their neighbours' host time dearer (context_probe.py).
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary
case "$1" in
A)
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  timeout 400 python3 benches/context_probe.py vae-decoder:forward:float32:channels_last \
    vae-decoder:train:float32:NCHW dcgan:forward:float32:NCHW 2>&1 | grep -v Warn | tee $O/context.log ;;
*) bash benches/run-s35.sh "$@" ;;
esac
