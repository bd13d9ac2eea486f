#!/usr/bin/env bash
# Session 21's last H200 call, after the last CUDA-side change: the cuda-marked tests, the
# 17-case forward table and the model zoo, each bounded so that the call fits 10 minutes.
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=/tmp/o; mkdir -p $O
timeout 280 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -1 $O/tests.log
timeout 75 python3 -m gemmconv bench --full --png $O/f.png > $O/bench-fwd.log 2>/dev/null; grep geometric $O/bench-fwd.log
timeout 225 python3 -m gemmconv bench --models --png $O/m.png --json $O/models.json > $O/models.log 2>/dev/null; grep "geometric mean" $O/models.log
tar czf $OUT/final.tgz -C $O .
