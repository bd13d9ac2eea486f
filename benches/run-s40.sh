#!/usr/bin/env bash
# Session 40's device calls (outputs under $OUT/<call>; logs kept in benches/results/s40/).
# Modes of run-s35.sh (P: every CUDA test in parallel processes; G: the tables; Z: the zoo,
# $MODELS) run through it.
#   A: every CUDA test file on session 39's code (changes 122, 123 never ran on an H200).
#   B: the four tables (forward NCHW and channels_last, training float32 and bfloat16).
#   C, D: the zoo, in two halves.
#   F: the two-row forward kernel against the one-row kernel and cuDNN (two_rows_probe.py; named rows_probe.py when F and G ran it).
#   G: the two-row kernel in float32 by default: two_rows_probe.py in bfloat16; test_cuda_fused,
#      _channels_last, _graphs; the float32 tables (forward both layouts, training).
#   H: the two-row kernel in 16-bit types too: every CUDA test; the small strided cases that
#      read slower in G than in B (untouched by it), session 39's code against now, in turns.
#   E: B's forward 2d-3x7-512 read 4.608 ms (s38's H100: 2.818): session 39's start
#      (scratch/base, carried) against now, its table row and its kernels; then C's zoo.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer
case "$1" in
A)
  nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $O/gpu.txt
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P ;;
B)
  nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $O/gpu.txt
  bash benches/run-s35.sh G | tee $O/G.txt; cp $OUT/G/*.log $O/; rm -rf $OUT/G ;;
C)
  nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
  MODELS="${MODELS:-dcgan vae hifigan fcn32s}" bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/; rm -rf $OUT/Z ;;
D)
  nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
  MODELS="${MODELS:-depthwise unet2d unet3d}" bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/; rm -rf $OUT/Z ;;
E)
  nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
  for i in 1 2; do for code in scratch/base .; do
    echo "== $code" | tee -a $O/case.log
    PYTHONPATH=$code timeout 60 python3 -m gemmconv bench --case 2d-3x7-512 2>&1 | grep -A3 "^case" | tail -1 | tee -a $O/case.log
  done; done
  for code in scratch/base .; do
    echo "== $code" >> $O/layer.log
    PYTHONPATH=$code timeout 60 python3 benches/layer.py "ConvTranspose2d(64, 64, (3, 7))" --input 8,64,512,512 2>&1 | grep -v "Warn\|_warn_once" | head -30 >> $O/layer.log
  done; cat $O/layer.log
  MODELS="${MODELS:-dcgan vae fcn32s}" bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/; rm -rf $OUT/Z ;;
F)
  nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
  for o in "" "--dtype bfloat16" "--planar"; do
    timeout 170 python3 benches/two_rows_probe.py $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/rows.log; done ;;
G)
  nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
  for o in "--dtype bfloat16" "--dtype bfloat16 --planar"; do
    timeout 150 python3 benches/two_rows_probe.py $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/rows.log; done
  TT=300 t fused tests/test_cuda_fused.py &
  TT=300 t cl tests/test_cuda_channels_last.py &
  TT=300 t graphs tests/test_cuda_graphs.py &
  summary
  timeout 60 python3 -m gemmconv bench --full --channels-last > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 70 python3 -m gemmconv bench --full > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log
  timeout 120 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  rm -f $O/all.txt ;;
H)
  nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P
  for i in 1 2; do for code in scratch/base .; do for cl in "" --channels-last; do
    echo "== $code $cl" >> $O/small.log
    PYTHONPATH=$code timeout 60 python3 -m gemmconv bench --case stride5-dil2 --case strided-grouped --case 3d-stride2-dil2 $cl 2>&1 | grep -A6 "^case" | grep "^[23]d" >> $O/small.log
  done; done; done; cat $O/small.log ;;
esac
