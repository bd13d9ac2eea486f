#!/usr/bin/env bash
# Session 47's device calls (outputs under $OUT/<call>; logs kept in benches/results/s47/).
#   A: the fused forward's row kernel with persistent programs (Config.persistent: 1 or 2 a
#      multiprocessor, each looping over tiles with its loops of taps flattened into one),
#      against a program a tile, on the cost model's tiles (two_rows_probe.py --persistent):
#      the five 2-D stride-1 cases, bfloat16 and float32, planar and channels_last.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu
case "$1" in
A) gpu
  for o in "--dtype bfloat16 --planar" "--dtype bfloat16" "--planar" ""; do
    timeout 140 python3 benches/two_rows_probe.py --persistent $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/persistent.log; done ;;
esac
