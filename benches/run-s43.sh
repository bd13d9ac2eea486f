#!/usr/bin/env bash
# Session 43's device calls (outputs under $OUT/<call>; logs kept in benches/results/s43/).
#   A: the strided backward on the fused kernels (fused.strided_backward), then a route
#      (commit 3678d2a): test_cuda_fused (its new strided tests, and every older one:
#      0ce5b38 had broken its call counter), in two processes; then
#      strided_backward_probe.py (git history, 3678d2a) on DCGAN and the VAE decoder.
#   A2: the probe again, "off" forced off, with ours's kernels per layer.
#   D: phase_planes as a Triton kernel: test_cuda_fused's strided tests; planes_probe.py
#      (the strided backward piece by piece against the column routes and cuDNN).
#   E: the float32 weight gradient moving the input's copies (fused.moves_input):
#      test_cuda_fused's backward tests; moved_input_probe.py on the stride-1 2-D cases;
#      the float32 training table.
#   B: every CUDA test file (run-s35.sh P); the training tables.
#   F: every CUDA test file on the final code (after 130 and the review).
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu
case "$1" in
A) gpu
  TT=330 t strided tests/test_cuda_fused.py -k "strided" &
  TT=330 t fused tests/test_cuda_fused.py -k "not strided" &
  timeout 320 python3 benches/strided_backward_probe.py dcgan vae 2>&1 | grep -v "Warn\|_warn_once" | tee $O/probe.log
  wait; for f in $O/strided.log $O/fused.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -1 $f; done ;;
A2) gpu   # the probe again, its "off" forced off (A's was the cost model's rule: on too), with ours's kernels
  timeout 400 python3 benches/strided_backward_probe.py dcgan vae 2>&1 | grep -v "Warn\|_warn_once" | tee $O/probe.log ;;
D) gpu
  TT=200 t strided tests/test_cuda_fused.py -k "strided" &
  timeout 300 python3 benches/planes_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/probe.log
  wait; grep -E "^(FAILED|ERROR)" $O/strided.log | head; tail -1 $O/strided.log ;;
E) gpu
  TT=300 t backward tests/test_cuda_fused.py -k "backward or weight_gradient or moving" &
  timeout 240 python3 benches/moved_input_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/probe.log
  wait; grep -E "^(FAILED|ERROR)" $O/backward.log | head; tail -1 $O/backward.log
  timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log ;;
B) gpu
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P
  timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 140 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log ;;
F) gpu
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P ;;
esac
