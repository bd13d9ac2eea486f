#!/usr/bin/env bash
# Session 45's device calls (outputs under $OUT/<call>; logs kept in benches/results/s45/).
#   A: the zoo's bound (bound_probe.py: torch, convert(model), the transposed convolutions
#      free), every model and configuration.
#   B: host time of DCGAN's and the VAE decoder's steps and layers, torch / ours / free,
#      and cProfile of ours (host_floor_probe.py).
#   C: layers' and DCGAN's steps with autograd's device threads on and off (thread_probe.py).
#   D: the VAE decoder and DCGAN through the CLI with --layers --bound (per-layer reports).
#   E: three-row tiles on 32 channels, 3 to 7 taps along W (two_rows_probe.py --sweep),
#      float32 planar and channels_last, bfloat16 planar.
#   F: after change 134 (three float32 planar rows on 64 positions, 4 warps, where the box
#      would be one run of 128 along W): the sweep again, float32 planar, at 32 channels and
#      at 64 (two rows); then every CUDA test file (run-s35.sh P).
#   G: after 134 took two rows of 64 channels too (3 stages): test_cuda_fused, then the
#      NCHW forward and float32 training tables.
#   I: the final code (134 replaces only a tile the rule would take): test_cuda_fused's row
#      kernel tests and the forward/backward tests of the stride-1 2-D cases.
#   H (not run): the channels_last forward and bfloat16 training tables, and bound_probe.py on the
#      zoo's host-bound models.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu
case "$1" in
A) gpu
  timeout 540 python3 benches/bound_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/bound.log ;;
B) gpu
  timeout 560 python3 benches/host_floor_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/host.log ;;
C) gpu
  timeout 560 python3 benches/thread_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/threads.log ;;
D) gpu
  for m in vae dcgan; do
    timeout 280 python3 -m gemmconv bench --models --model $m --layers --bound --png $O/$m.png > $O/$m.log 2>&1
    grep -A12 "^model " $O/$m.log; done ;;
E) gpu
  for o in "--planar" "" "--dtype bfloat16 --planar"; do
    timeout 180 python3 benches/two_rows_probe.py --sweep $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/sweep.log; done ;;
F) gpu
  for c in 32 64; do
    timeout 150 python3 benches/two_rows_probe.py --sweep $c --planar 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/sweep.log; done
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P ;;
G) gpu
  timeout 300 python3 -m pytest -m cuda -p no:cacheprovider -q tests/test_cuda_fused.py > $O/fused.log 2>&1; tail -2 $O/fused.log
  timeout 90 python3 -m gemmconv bench --full > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log
  timeout 150 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log ;;
H) gpu
  timeout 80 python3 -m gemmconv bench --full --channels-last > $O/bench-fwd-cl.log 2>&1; grep -A17 "^case" $O/bench-fwd-cl.log
  timeout 150 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log
  timeout 200 python3 benches/bound_probe.py dcgan vae unet2d 2>&1 | grep -v "Warn\|_warn_once" | tee $O/bound.log ;;
I) gpu
  timeout 250 python3 -m pytest -m cuda -p no:cacheprovider -q tests/test_cuda_fused.py -k "row or 2d" > $O/fused.log 2>&1; tail -2 $O/fused.log ;;
esac
