#!/usr/bin/env bash
# Session 23's H200 calls.
#   A: the tile-orientation probe (benches/fused_layouts.py at commit 6b677e7; results/s23/layouts.log).
#   B: after planar stride-1 2-D calls joined the fused route through channels_innermost:
#      the copy's probe, the fused route's tests, the forward tables in both layouts.
#   C: a fused backward for stride-1 planar calls, probed (benches/fused_backward.py and
#      fused.weight_gradient at commit 08d2c99; removed after it: results/s23/C/backward.log).
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=/tmp/o-$1; rm -rf $O; mkdir -p $O
case "$1" in
B)
  timeout 120 python3 benches/transpose_probe.py > $O/transpose.log 2>&1; cat $O/transpose.log
  timeout 200 python3 -m pytest -q -m cuda tests/test_cuda_fused.py -p no:cacheprovider > $O/tests-fused.log 2>&1; tail -3 $O/tests-fused.log
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log
  timeout 80 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log ;;
C)
  timeout 500 python3 benches/fused_backward.py > $O/backward.log 2>&1; cat $O/backward.log ;;
esac
tar czf $OUT/s23-$1.tgz -C $O .
