#!/usr/bin/env bash
# Session 28's device calls (outputs under benches/results/s28/<call>).
#   P: session 27's CPU-only changes on a GPU first: the float32 weight-gradient probe
#      (copies, kernel, tiles, taps a program), every fused-route CUDA test (the chunked
#      backward's included), the 17 cases' float32 training table.
#   T: every CUDA test (after the float32 weight gradient's taps a program).
#   F1: the float32 weight-gradient probe again (taps a program by fused.taps_a_program against
#       1-4), the 17 cases' float32 training, forward NCHW and channels_last.
#   F2: the 17 cases' bfloat16 training, then the zoo.
#   G: the forward kernel's tile for float32 inputs rounded beforehand (fwd_tile_probe.py:
#      128 x 128 now against 64 x 128 and others), then the fused route's CUDA tests on it
#      (they passed their 110 s limit at 60%, none failed; G2 ran the file again with 170 s).
#   G2: the same tests, whole (a command of its own, not a letter here:
#       pytest -q -m cuda tests/test_cuda_fused.py, 170 s limit).
# Prepared for the next session (changes 92-93 ran no whole suite, change 93 no GPU at all):
#   T first (every CUDA test), then
#   N: whether the copy engine loads boxes that start off 16 bytes (tma_offset_probe.py), the
#      float32 weight gradient without the input's rounded copy (wgrad_shifted_probe.py, with
#      --unaligned where the first probe says yes), the 17 cases' float32 training and
#      forward; then F2 (bfloat16 training, the zoo, with change 94's convert).
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader
case "$1" in
P)
  timeout 120 python3 benches/wgrad_shifted_probe.py > $O/probe.log 2>&1; grep "|" $O/probe.log
  timeout 200 python3 -m pytest -q -m cuda tests/test_cuda_fused.py -p no:cacheprovider > $O/tests.log 2>&1; tail -15 $O/tests.log
  timeout 220 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; cat $O/bench-train.log | tail -25 ;;
T)
  timeout 590 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -15 $O/tests.log ;;
F1)
  timeout 110 python3 benches/wgrad_shifted_probe.py > $O/probe.log 2>&1; grep "|" $O/probe.log
  timeout 200 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log
  timeout 90 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log
  timeout 90 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log ;;
F2)
  timeout 130 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16.json > $O/bench-train-bf16.log 2>&1; grep geometric $O/bench-train-bf16.log
  timeout 420 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log ;;
G)
  timeout 90 python3 benches/fwd_tile_probe.py > $O/probe.log 2>&1; cat $O/probe.log
  timeout 110 python3 -m pytest -q -m cuda tests/test_cuda_fused.py -p no:cacheprovider > $O/tests.log 2>&1; tail -4 $O/tests.log ;;
N)
  timeout 60 python3 benches/tma_offset_probe.py > $O/tma.log 2>&1; tail -3 $O/tma.log
  grep -q "every start loads its box" $O/tma.log && unaligned=--unaligned
  timeout 130 python3 benches/wgrad_shifted_probe.py $unaligned > $O/probe.log 2>&1; grep "|" $O/probe.log
  timeout 200 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log
  timeout 90 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log ;;
esac
