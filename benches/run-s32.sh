#!/usr/bin/env bash
# Session 32's device calls (outputs under benches/results/s32/<call>).
#   A: the CUDA graphs of replayed calls (gemmconv.graphs): their GPU tests and the replay
#      tests, then the zoo's small layers per call with graphs and without, torch beside
#      (graph_probe.py).
#   Z: the zoo (convert(model) etc.) for the models named in $MODELS (all by default), with
#      graphs (GRAPHS unset) or without (GRAPHS=0: limit 0).
#   G: the tables on the final code. T: CUDA tests ($TESTS, all by default).
#   B: (for the next session) the training and channels_last tables with graphs and
#      without (GRAPHS=0), alternating, on one machine.
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader
zoo() {   # zoo LOG [ARGS]: the model bench, graphs off where GRAPHS=0
  timeout ${TZ:-280} python3 -c "
import sys, gemmconv.graphs as g, gemmconv.__main__ as m
if '${GRAPHS:-}' == '0': g.set_graph_memory_limit(0)
sys.exit(m.main(sys.argv[1:]))" bench --models "${@:2}" > $1 2>&1
}
case "$1" in
A)
  timeout 200 python3 -m pytest -q -m cuda -p no:cacheprovider tests/test_cuda_graphs.py tests/test_cuda_replay.py > $O/tests.log 2>&1; tail -15 $O/tests.log
  timeout 300 python3 benches/graph_probe.py > $O/probe.log 2>&1; cat $O/probe.log ;;
Z)
  for v in ${V:-on off}; do
    G=; [ $v = off ] && G=0
    GRAPHS=$G zoo $O/models-$v.log $MODELS; echo "== graphs $v"; grep -A30 "^model " $O/models-$v.log
  done ;;
G)
  timeout 120 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 60 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 140 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16.json > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log
  timeout 70 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log ;;
B)
  for v in ${V:-on off on off}; do
    G=; [ $v = off ] && G=0
    echo "== graphs $v"
    for t in "--backward --repeats 10" "--backward --dtype bfloat16 --repeats 10" "--channels-last"; do
      timeout 150 python3 -c "
import sys, gemmconv.graphs as g, gemmconv.__main__ as m
if '$G' == '0': g.set_graph_memory_limit(0)
sys.exit(m.main(sys.argv[1:]))" bench --full $t 2>&1 | grep "^geometric"
    done
  done 2>&1 | tee $O/ab.log ;;
T)
  timeout ${TT:-400} python3 -m pytest -q -m cuda -p no:cacheprovider ${TESTS:-tests} > $O/tests.log 2>&1; tail -15 $O/tests.log ;;
esac
