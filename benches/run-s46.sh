#!/usr/bin/env bash
# Session 46's device calls (outputs under $OUT/<call>; logs kept in benches/results/s46/).
#   A: row tiles of 64 channels where a box of 128 would be one run along W ("same"
#      padding), for the layouts and dtypes change 134 left alone (two_rows_probe.py
#      --sweep 64): bfloat16 planar, float32 and bfloat16 channels_last; then the bfloat16
#      training steps of two stride-1 cases kernel by kernel (layer.py --backward).
#   B: the 16-bit weight gradient with 1 to 4 taps a program sharing the input's box
#      (wgrad_taps_probe.py), bfloat16, the table's stride-1 cases.
#   C: after 135 and 136: every CUDA test file (run-s35.sh P), then the bfloat16 training
#      table.
#   D: the forward tables (NCHW, channels_last), the float32 training table, and the
#      bfloat16 training table's 2-D cases again (C's 2d-512x1024 and strided 2-D rows read
#      slower than session 44's).
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu
case "$1" in
A) gpu
  for o in "--dtype bfloat16 --planar" "" "--dtype bfloat16"; do
    timeout 150 python3 benches/two_rows_probe.py --sweep 64 $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/sweep.log; done
  { layer "ConvTranspose2d(64, 128, (3, 5))" --input 64,64,128,256 --backward --dtype bfloat16
    layer "ConvTranspose2d(64, 64, (3, 7))" --input 8,64,512,512 --backward --dtype bfloat16; } | tee $O/layers.log ;;
B) gpu
  timeout 400 python3 benches/wgrad_taps_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/taps.log ;;
C) gpu
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P
  timeout 170 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log ;;
D) gpu
  timeout 90 python3 -m gemmconv bench --full > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log
  timeout 90 python3 -m gemmconv bench --full --channels-last > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 170 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 100 python3 -m gemmconv bench --case 2d- --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16-2d.log 2>&1; grep -A10 "^case" $O/bench-train-bf16-2d.log ;;
esac
