#!/usr/bin/env bash
# Session 39's device calls (outputs under $OUT/<call>; logs kept in benches/results/s39/).
# Modes of run-s35.sh (P: every CUDA test in parallel processes; G: the tables; Z: the zoo,
# $MODELS) run through it.
#   A: does the copy engine load boxes whose innermost start is off 16 bytes
#      (tma_offset_probe.py, each start in a process of its own; never run since session 29
#      lost its context)? Where it does, the float32 weight gradient from one unmoved copy
#      against the moved copies (wgrad_shifted_probe.py --unaligned).
#   B: copies of one model timed as the bench times them (copies_probe.py: torch's model
#      against deep copies of itself, with and without gemmconv's among them, with and
#      without the garbage collector); the bfloat16 training steps of the cases furthest
#      below the 1.8x target, kernel by kernel (layer.py --backward).
#   C: session 38's timer against session 39's (10 ms samples in measure.sample_order) on
#      copies of DCGAN's channels_last steps (copies_probe.py); then every CUDA test file in
#      parallel processes (run-s35.sh P).
#   D: the zoo's host-bound models (DCGAN, the VAE decoder) under session 39's timer.
#   E: the fused backward's bias gradient from its copy: bias_probe.py (before / now, torch
#      alongside); the fused, graph, replay and reuse CUDA tests; the training tables.
#   F: folded_rows by the interleaved im2col: test_cuda_fused and test_cuda; the bfloat16
#      steps of 3d-3x5x7 (folded) and 2d-3x7-512 kernel by kernel.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer
case "$1" in
A)
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  timeout 200 python3 benches/tma_offset_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/tma.log
  u=; grep -q "every start loads" $O/tma.log && u=--unaligned
  timeout 300 python3 benches/wgrad_shifted_probe.py $u 2>&1 | grep -v "Warn\|_warn_once" | tee $O/wgrad.log ;;
B)
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  for v in "dcgan float32 channels_last train" "dcgan bf16-autocast channels_last train" "dcgan float32 NCHW train"; do
    timeout 150 python3 benches/copies_probe.py $v 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/copies.log; done
  {
    layer "ConvTranspose2d(64, 64, (3, 7))" --input 8,64,512,512 --backward --dtype bfloat16
    layer "ConvTranspose2d(64, 128, (3, 5))" --input 64,64,128,256 --backward --dtype bfloat16
    layer "ConvTranspose3d(32, 16, (3, 5, 7))" --input 16,32,16,32,64 --backward --dtype bfloat16
  } > $O/backward.log; cat $O/backward.log ;;
C)
  for v in "dcgan float32 channels_last train" "dcgan bf16-autocast channels_last train"; do
    timeout 150 python3 benches/copies_probe.py $v 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/copies.log; done
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P ;;
D)
  MODELS="dcgan vae" TZ=200 bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/; rm -rf $OUT/Z ;;
E)
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  timeout 150 python3 benches/bias_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/bias.log
  TT=200 t fused tests/test_cuda_fused.py &
  TT=200 t graphs tests/test_cuda_graphs.py tests/test_cuda_replay.py &
  TT=200 t reuse tests/test_cuda_reuse.py &
  summary
  timeout 120 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A21 "^case" $O/bench-train.log
  timeout 120 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A21 "^case" $O/bench-train-bf16.log ;;
F)
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  TT=280 t fused tests/test_cuda_fused.py &
  TT=300 t cuda tests/test_cuda.py &
  summary
  {
    layer "ConvTranspose3d(32, 16, (3, 5, 7))" --input 16,32,16,32,64 --backward --dtype bfloat16
    layer "ConvTranspose2d(64, 64, (3, 7))" --input 8,64,512,512 --backward --dtype bfloat16
  } > $O/backward.log; cat $O/backward.log ;;
*) bash benches/run-s35.sh "$@" ;;
esac
