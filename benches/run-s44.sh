#!/usr/bin/env bash
# Session 44's device calls (outputs under $OUT/<call>; logs kept in benches/results/s44/).
#   A: the fused backward as a CUDA graph (change 131) and ties moving the input (132):
#      test_cuda_graphs, test_cuda_replay and test_cuda_fused's backward tests, in three
#      processes; then fused_graph_probe.py (graphed against launched, in turns).
#   B: the tables, training (float32, bfloat16) and forward (channels_last, NCHW).
#   F: every CUDA test file on the final code (run-s35.sh P).
#   P: layer_host_profile.py on DCGAN's second up-conv, bfloat16 and float32: where our
#      step's host time goes, beside torch's module's.
#   G: after_graph_probe.py (torch's launches right after a graph's launch).
#   M: graphs.paused() in the bench's memory column: test_cuda_graphs, then the bfloat16
#      training table and the NCHW forward one.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu
tables() {   # the training tables, or the forward ones: tables train|forward
  if [ "$1" = train ]; then
    timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
    timeout 140 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log
  else
    timeout 60 python3 -m gemmconv bench --full --channels-last > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
    timeout 70 python3 -m gemmconv bench --full > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log
  fi
}
case "$1" in
A) gpu
  TT=240 t graphs tests/test_cuda_graphs.py &
  TT=240 t replay tests/test_cuda_replay.py &
  TT=240 t fused tests/test_cuda_fused.py -k "backward or weight_gradient or moving or bytes" &
  summary
  timeout 280 python3 benches/fused_graph_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/probe.log ;;
B) gpu; tables train; tables forward ;;
F) gpu
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P ;;
P) gpu
  for d in bfloat16 float32; do timeout 150 python3 benches/layer_host_profile.py $d dcgan 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/profile.log; done ;;
G) gpu; timeout 200 python3 benches/after_graph_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/probe.log ;;
M) gpu
  TT=200 t graphs tests/test_cuda_graphs.py; count $O/graphs.log; tail -1 $O/graphs.log
  timeout 140 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log
  timeout 70 python3 -m gemmconv bench --full > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log ;;
esac
