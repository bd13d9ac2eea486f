#!/usr/bin/env bash
# Session 47's device calls (outputs under $OUT/<call>; logs kept in benches/results/s47/).
#   A (ran on commit e2140c8, since reverted): the fused forward's row kernel with
#      persistent programs (1 or 2 a multiprocessor, each looping over tiles with its loops
#      of taps flattened into one, tl.range(flatten=True)) against a program a tile, on the
#      cost model's tiles: `two_rows_probe.py --persistent`, the five 2-D stride-1 cases,
#      bfloat16 and float32, planar and channels_last.
#   B: planar row tiles whose box pads the grid least with runs of 64 or 32 bytes along W,
#      against the chosen runs of 128 (two_rows_probe.py --run), bfloat16 and float32.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu
case "$1" in
A) gpu
  for o in "--dtype bfloat16 --planar" "--dtype bfloat16" "--planar" ""; do
    timeout 140 python3 benches/two_rows_probe.py --persistent $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/persistent.log; done ;;
B) gpu
  for o in "--dtype bfloat16 --run 64" "--dtype bfloat16 --run 32" "--run 64" "--dtype bfloat16 --run 64 --sweep 64"; do
    timeout 100 python3 benches/two_rows_probe.py --planar $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/runs.log; done ;;
esac
