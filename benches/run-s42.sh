#!/usr/bin/env bash
# Session 42's device calls (outputs under $OUT/<call>; logs kept in benches/results/s42/).
# Modes of run-s35.sh (P: every CUDA test in parallel processes; G: the tables; Z: the zoo,
# $MODELS) run through it.
#   A: the two-row kernel's tiles on 2d-64to128 (two_rows_probe.py, NARROW: 64 output
#      channels a program), float32 channels_last and planar, bfloat16 channels_last; then
#      test_cuda_fused's two-row tests after implicit_gemm_rows lost its unused argument.
#   B: after change 127 (two rows at most 64 output channels a program): the probe again (its
#      stages, and the planar bfloat16 tile), then every CUDA test file.
#   C: the four tables.
#   E: D again after the two-row order was restored (each tap's matrix loaded after the
#      older taps' products) and three rows taken where a tile holds 32 output channels.
#   H: the two-row kernel's text A/B (rows_ab_probe.py), float32 planar and channels_last.
#   I: three rows only on columns of up to 3 taps: the 3-D cases' bfloat16 steps again.
#   J: the row kernel's text A/B on 3d-3x5x7's bfloat16 step.
#   Z1: the zoo's DCGAN, VAE decoder and FCN-32s (owed since change 126).
#   F: every CUDA test file, the forward tables.  G: the training tables.
#   D: the kernel of three rows a program (implicit_gemm_rows' ROWS): test_cuda_fused's row
#      tests (two and three rows), then the probe's three-row tiles against the cost model's
#      two-row tile on the five stride-1 2-D cases, both dtypes and layouts.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer
gpu() { nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $O/gpu.txt; }
zoo() { MODELS="$1" TZ=${TZ:-190} bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/; rm -rf $OUT/Z; }
probe() { timeout 150 python3 benches/two_rows_probe.py "$@" 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/probe.log; }
case "$1" in
A)
  gpu
  probe 2d-64to128; probe 2d-64to128 --planar; probe 2d-64to128 --dtype bfloat16
  timeout 200 python3 -m pytest -m cuda -p no:cacheprovider -q tests/test_cuda_fused.py -k "two_row or rows" > $O/two-row.log 2>&1; tail -3 $O/two-row.log ;;
B) gpu
  probe 2d-64to128; probe 2d-64to128 --planar; probe 2d-64to128 --dtype bfloat16
  probe 2d-64to128 --dtype bfloat16 --planar
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P ;;
D|E) gpu
  timeout 200 python3 -m pytest -m cuda -p no:cacheprovider -q tests/test_cuda_fused.py -k "row_kernel" > $O/rows.log 2>&1; tail -3 $O/rows.log
  for o in "" "--dtype bfloat16" "--planar" "--dtype bfloat16 --planar"; do
    timeout 110 python3 benches/two_rows_probe.py --three $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/probe.log; done ;;
H) gpu
  for o in "--planar" "" "--dtype bfloat16 --planar"; do
    timeout 150 python3 benches/rows_ab_probe.py $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/ab.log; done ;;
F) gpu
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P
  timeout 70 python3 -m gemmconv bench --full --channels-last > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 80 python3 -m gemmconv bench --full > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log ;;
G) gpu   # (and the forward tables again: F's read unrelated 3-D and strided cases 15-50% slower than C)
  timeout 70 python3 -m gemmconv bench --full --channels-last > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 80 python3 -m gemmconv bench --full > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log
  timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 140 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log ;;
I) gpu   # three rows only on columns of up to 3 taps: the 3-D training steps again
  timeout 150 python3 -m gemmconv bench --case 3d --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A8 "^case" $O/bench-train-bf16.log
  timeout 100 python3 -m pytest -m cuda -p no:cacheprovider -q tests/test_cuda_fused.py -k "row_kernel and 3d" > $O/rows.log 2>&1; tail -2 $O/rows.log ;;
J) gpu   # the row kernel's text A/B on 3d-3x5x7's bfloat16 step (rows_step_ab.py)
  timeout 150 python3 benches/rows_step_ab.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/ab.log
  timeout 100 python3 benches/rows_step_ab.py 2d-3x7-512 --dtype float32 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/ab.log ;;
Z1) gpu; zoo "${MODELS:-dcgan vae fcn32s}" ;;
C) gpu
  timeout 70 python3 -m gemmconv bench --full --channels-last > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 80 python3 -m gemmconv bench --full > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log
  timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 140 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log ;;
esac
