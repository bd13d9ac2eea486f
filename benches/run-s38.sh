#!/usr/bin/env bash
# Session 38's device calls (outputs under $OUT/<call>; logs kept in benches/results/s38/).
# Modes of run-s35.sh (P: every CUDA test in parallel processes; G: the tables; Z: the zoo,
# $MODELS) run through it.
#   A: per-kernel times of the cases that lose most against torch's channels_last or in
#      training (layer.py), torch against ours, both layouts.
#   B: the channels_last forward by padded rows: its CUDA tests (test_cuda_channels_last), and
#      rows_probe.py (against the split and fused routes, torch alongside).
#   C: cuBLASLt's candidates timed (gemm.ALGORITHM_TRIALS): trial_probe.py on the 17 cases,
#      then rows_probe.py on the 3-D cases with the trials.
#   D: the padded rows' k products as one call each: rows_probe.py; then every CUDA test
#      file in parallel processes (run-s35.sh P).
#   E: after the padded rows' rule (3-D, at most 3 taps, columns of whole 32-byte sectors):
#      test_cuda_channels_last, then the tables (run-s35.sh G).
#   F: the zoo's U-Nets (their large products take cuBLASLt's trials).
#   G: the trials from 2^30 FLOPs on the zoo's small layers (trial_layers_probe.py).
#   H: after the review's mends (explain, the replay's route check): the channels_last,
#      replay and graph CUDA tests.
#   I: the two layer probes after their shared helper (layer_step_probe.layer_steps).
#   J, K: the rest of the zoo on the final code (J: DCGAN, VAE decoder, HiFi-GAN; K: FCN-32s,
#      the depthwise decoder). Both ran on an H200.
#   L: the tables on the same H200 (run-s35.sh G; the call ran that line inline).
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer
case "$1" in
A)
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  for cl in "" --channels-last; do
    layer "ConvTranspose3d(32, 16, (3, 5, 7))" --input 16,32,16,32,64 $cl
    layer "ConvTranspose3d(48, 24, 3)" --input 8,48,96,96,96 $cl
    layer "ConvTranspose2d(64, 128, (3, 5))" --input 64,64,128,256 $cl
    layer "ConvTranspose2d(64, 64, (3, 7))" --input 8,64,512,512 $cl
  done > $O/forward.log
  cat $O/forward.log
  {
    layer "ConvTranspose2d(64, 128, (3, 5))" --input 64,64,128,256 --backward
    layer "ConvTranspose2d(64, 64, 3)" --input 8,64,1024,1024 --backward
    layer "ConvTranspose2d(256, 128, 4, 2, 1)" --input 128,256,8,8 --backward --channels-last --dtype bfloat16
    layer "ConvTranspose3d(32, 16, (3, 5, 7))" --input 16,32,16,32,64 --backward --channels-last
  } > $O/backward.log
  cat $O/backward.log ;;
B)   # the probe first, alone on the GPU; then the tests
  timeout 330 python3 benches/rows_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/rows.log
  TT=230 t cl tests/test_cuda_channels_last.py
  summary ;;
C)
  timeout 420 python3 benches/trial_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/trial.log
  timeout 150 python3 benches/rows_probe.py 3d-96cube 3d-3x5x7 3d-64cube 2>&1 | grep -v "Warn\|_warn_once" | tee $O/rows.log ;;
D)
  timeout 200 python3 benches/rows_probe.py 3d-96cube 3d-3x5x7 3d-64cube 2>&1 | grep -v "Warn\|_warn_once" | tee $O/rows.log
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P ;;
E)
  TT=200 t cl tests/test_cuda_channels_last.py; count $O/cl.log; tail -1 $O/cl.log
  bash benches/run-s35.sh G | tee $O/G.txt; cp $OUT/G/*.log $O/; rm -rf $OUT/G ;;
F)
  MODELS="unet3d unet2d" TZ=250 bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/; rm -rf $OUT/Z ;;
G)
  for c in "dcgan float32 CL" "dcgan bfloat16 CL" "dcgan float32 NCHW" "vae float32 CL" "vae bfloat16 NCHW"; do
    timeout 100 python3 benches/trial_layers_probe.py $c 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/layers.log; done ;;
H)
  t cl tests/test_cuda_channels_last.py &
  t replay tests/test_cuda_replay.py &
  t graphs tests/test_cuda_graphs.py &
  summary ;;
I)
  timeout 100 python3 benches/layer_step_probe.py dcgan float32 CL 2>&1 | grep -v "Warn\|_warn_once" | tee $O/probes.log
  timeout 100 python3 benches/trial_layers_probe.py dcgan float32 CL 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/probes.log ;;
J)
  MODELS="dcgan vae hifigan" TZ=180 bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/; rm -rf $OUT/Z ;;
K)
  MODELS="fcn32s depthwise" TZ=220 bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/; rm -rf $OUT/Z ;;
L)
  bash benches/run-s35.sh G > $O/G.txt 2>&1; cp $OUT/G/*.log $O/; rm -rf $OUT/G ;;
*) bash benches/run-s35.sh "$@" ;;
esac
