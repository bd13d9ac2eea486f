#!/usr/bin/env bash
# Session 36's device calls (outputs under $OUT/<call>; logs kept in benches/results/s36/).
# Modes of run-s35.sh (P: every CUDA test in parallel processes; G: the tables; Z: the zoo,
# $MODELS) run through it.
#   A: P (the review's mends: one check_against_float64 for the depthwise and fused tables,
#      one bias-gradient helper, plans from meta tensors), then whether a graph's replay waits
#      for the GPU, then where the VAE decoder's float32 step spends its host time.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
case "$1" in
A)
  bash benches/run-s35.sh P | tee $O/P.txt
  timeout 60 python3 benches/replay_block_probe.py 2>&1 | tee $O/replay-block.log
  timeout 150 python3 benches/host_profile.py vae-decoder float32 NCHW > $O/host-vae.log 2>&1
  head -40 $O/host-vae.log ;;
*)
  bash benches/run-s35.sh "$@" ;;
esac
