#!/usr/bin/env bash
# Session 33's device calls (outputs under $OUT/<call>; logs kept in benches/results/s33/).
#   P: the graph and replay CUDA tests (their helpers moved after session 32's last GPU run),
#      then where convert(model) loses on the zoo (zoo_probe.py).
#   T: CUDA tests ($TESTS, all by default).  G: the tables.  Z: the zoo ($MODELS).
#   R: the CUDA test files T's 400 s did not reach (test_cuda_fused, test_cuda_reuse), then G.
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
case "$1" in
P)
  timeout ${TT:-200} python3 -m pytest -q -m cuda -p no:cacheprovider ${TESTS:-tests/test_cuda_graphs.py tests/test_cuda_replay.py} > $O/tests.log 2>&1; tail -4 $O/tests.log
  timeout ${TP:-300} python3 benches/zoo_probe.py $PROBE > $O/probe.log 2>&1; cat $O/probe.log ;;
T)
  timeout ${TT:-400} python3 -m pytest -q -m cuda -p no:cacheprovider ${TESTS:-tests} > $O/tests.log 2>&1; tail -15 $O/tests.log ;;
G)
  timeout 120 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 60 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 140 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16.json > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log
  timeout 70 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log ;;
R)   # the CUDA test files T did not reach, then the tables, channels_last first
  timeout ${TT:-200} python3 -m pytest -q -m cuda -p no:cacheprovider tests/test_cuda_fused.py tests/test_cuda_reuse.py > $O/tests.log 2>&1; tail -3 $O/tests.log
  timeout 60 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 70 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log
  timeout 120 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 130 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16.json > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log ;;
Z)
  timeout ${TZ:-470} python3 -m gemmconv bench --models $MODELS > $O/models.log 2>&1; grep -A60 "^model " $O/models.log ;;
esac
