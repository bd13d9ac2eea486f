#!/usr/bin/env bash
# Session 36's device calls (outputs under $OUT/<call>; logs kept in benches/results/s36/).
# Modes of run-s35.sh (P: every CUDA test in parallel processes; G: the tables; Z: the zoo,
# $MODELS) run through it.
#   A: P (the review's mends: one check_against_float64 for the depthwise and fused tables,
#      one bias-gradient helper, plans from meta tensors), then whether a graph's replay waits
#      for the GPU, then where the VAE decoder's float32 step spends its host time.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary
case "$1" in
A)
  bash benches/run-s35.sh P | tee $O/P.txt
  timeout 60 python3 benches/replay_block_probe.py 2>&1 | tee $O/replay-block.log
  timeout 150 python3 benches/host_profile.py vae-decoder float32 NCHW > $O/host-vae.log 2>&1
  head -40 $O/host-vae.log ;;
B)   # the zoo's timed turns: graphs replayed or captured, and with graphs off; then the zoo's DCGAN and VAE decoder (convert's margin)
  timeout 300 python3 benches/graph_churn_probe.py vae-decoder:train:float32:NCHW vae-decoder:forward:float32:channels_last \
    dcgan:forward:bf16-autocast:channels_last hifigan:train:bf16-autocast:NCHW unet2d:train:bf16-autocast:channels_last 2>&1 | grep -v Warn | tee $O/churn.log
  MODELS="vae dcgan" bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/ ;;
C)   # why mixed and converted models time slower than their parts; then the tables
  timeout 240 python3 benches/mixed_probe.py dcgan:forward:float32:NCHW vae-decoder:train:float32:NCHW 2>&1 | grep -v Warn > $O/mixed.log
  grep -v "^  \|^---\|^layer\|^gemmconv.convert" $O/mixed.log | grep -v "^[0-9]" | tail -20
  bash benches/run-s35.sh G | tee $O/G.txt; cp $OUT/G/*.log $O/ ;;
D)   # traces of steps back to back: the GPU's idle gaps and what the host did meanwhile
  for c in vae-decoder:train:float32:NCHW dcgan:train:float32:NCHW; do
    d=$O/${c//:/-}; mkdir -p $d; OUT=$d timeout 200 python3 benches/trace_probe.py $c 2>&1 | grep -v Warn
    python3 benches/trace_gaps.py $d/trace-torch.json $d/trace-every.json | tee $d/gaps.txt
    gzip $d/*.json
  done ;;
E)   # the planar backward of many positions a sample graphed (ops._GraphedBackward): the CUDA tests of the backward and graphs
  t cuda tests/test_cuda.py &
  t graphs tests/test_cuda_graphs.py &
  t replay tests/test_cuda_replay.py &
  t reuse tests/test_cuda_reuse.py &
  t cl tests/test_cuda_channels_last.py &
  summary ;;
F)   # the zoo's models with such layers
  MODELS="vae unet2d hifigan" bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/ ;;
H)   # what _GraphedBackward saves a step (graphed against kernel by kernel, in turns); the training tables after it
  timeout 260 python3 benches/graphed_backward_probe.py vae-decoder:train:float32:NCHW vae-decoder:train:bf16-autocast:NCHW \
    unet2d:train:float32:NCHW hifigan:train:float32:NCHW 2>&1 | grep -v Warn | tee $O/graphed.log
  timeout 120 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 130 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log ;;
I)   # after GRAPHED_BACKWARD_MAX_COLUMNS: the training tables, then the graph and replay tests
  timeout 200 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 160 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log
  t graphs tests/test_cuda_graphs.py &
  t replay tests/test_cuda_replay.py &
  summary ;;
J)   # the zoo's other models
  MODELS="dcgan unet3d depthwise" TZ=190 bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/ ;;
K)   # one configuration in four fresh processes: how far it moves, and the layout trials' choices
  for i in 1 2 3 4; do timeout 100 python3 benches/mixed_probe.py dcgan:forward:float32:NCHW 2>&1 | grep -v Warn > $O/mixed-$i.log
    grep "turns\|layout trials" $O/mixed-$i.log; done ;;
M)   # the final commit's shared float64 check: test_cuda_depthwise and test_cuda_fused
  depthwise_tests
  t fused tests/test_cuda_fused.py &
  summary ;;
N)   # D without Python frames: the VAE decoder's float32 step's gaps, named by op
  c=vae-decoder:train:float32:NCHW; d=$O/${c//:/-}; mkdir -p $d
  OUT=$d timeout 200 python3 benches/trace_probe.py $c --no-stack 2>&1 | grep -v Warn
  python3 benches/trace_gaps.py $d/trace-torch.json $d/trace-every.json | tee $d/gaps.txt; gzip $d/*.json ;;
R)   # after the review's _new_gradients: the backward replays' CUDA tests (depthwise, graphs, replay)
  depthwise_tests
  t graphs tests/test_cuda_graphs.py &
  t replay tests/test_cuda_replay.py &
  summary ;;
*)
  bash benches/run-s35.sh "$@" ;;
esac
