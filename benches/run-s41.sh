#!/usr/bin/env bash
# Session 41's device calls (outputs under $OUT/<call>; logs kept in benches/results/s41/).
# Modes of run-s35.sh (P: every CUDA test in parallel processes; G: the tables; Z: the zoo,
# $MODELS) run through it.
#   A: every CUDA test file, after session 40's last changes (_triton._program_tile never
#      compiled on a GPU); then 2d-64to128 channels_last kernel by kernel (layer.py), to
#      place the time outside the fused kernel.
#   R: fused forwards above 2^26 output elements as CUDA graphs, against launched directly.
#   T: after change 126, every CUDA test file and the forward tables.  U: the training tables,
#      and two stride-1 training steps kernel by kernel.
#   Z2, then Z's unet2d (run-s35.sh, in the same call): the zoo's depthwise decoder, HiFi-GAN
#      and 2-D U-Net whole (session 40's D had cut the last two short).
#   B: the four tables.  Z1, Z2, Z3: the zoo in three parts.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer
gpu() { nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $O/gpu.txt; }
zoo() { MODELS="$1" TZ=${TZ:-190} bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/; rm -rf $OUT/Z; }
case "$1" in
A)
  gpu
  timeout 200 python3 -m pytest -m cuda -p no:cacheprovider -q -x tests/test_cuda_fused.py -k two_row > $O/two-row.log 2>&1; tail -3 $O/two-row.log
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P
  for o in "" "--dtype bfloat16"; do
    layer "ConvTranspose2d(64, 128, (3, 5))" --input 64,64,128,256 --channels-last $o | tee -a $O/layer.log; done ;;
R) gpu   # fused forwards graphed above 2^26 outputs, against launched (fused_graph_probe.py)
  for o in "" "--dtype bfloat16"; do
    timeout 200 python3 benches/fused_graph_probe.py $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/graph.log; done ;;
T) gpu   # after 126: every CUDA test file, then the forward tables
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P
  timeout 70 python3 -m gemmconv bench --full --channels-last > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 80 python3 -m gemmconv bench --full > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log ;;
U) gpu   # the training tables; two stride-1 steps kernel by kernel (where the step's time goes)
  timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 140 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log
  layer "ConvTranspose2d(64, 128, (3, 5))" --input 64,64,128,256 --backward | tee -a $O/layer.log
  layer "ConvTranspose2d(32, 32, 3)" --input 8,32,512,1024 --backward | tee -a $O/layer.log ;;
B) gpu; bash benches/run-s35.sh G | tee $O/G.txt; cp $OUT/G/*.log $O/; rm -rf $OUT/G ;;
Z1) gpu; zoo "${MODELS:-dcgan vae fcn32s}" ;;
Z2) gpu; zoo "${MODELS:-depthwise hifigan}" ;;
Z3) gpu; zoo "${MODELS:-unet2d unet3d}" ;;
esac
