#!/usr/bin/env bash
# Session 56's device calls, written in session 55 (outputs under $OUT/<call>).
#   A: every CUDA test file on session 55's final code (151, autocast through its cache, ran
#      the autocast, graphs and replay tests only), then the bfloat16 training table.
#   B: the two forward tables in one call (session 55 read NCHW and channels_last on two
#      machines), then the VAE decoder's bfloat16 channels_last forward one layer swapped at
#      a time (its layers win alone at 1.23-1.55x, the model with them swapped reads 0.95x).
#   C: the 3-D U-Net and HiFi-GAN, whose with-a-sample columns 151 changes under autocast.
#   D: FCN-32s and the depthwise decoder, the same.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, summary, layer, gpu, all_tests, table, probe, zoo_model
case "$1" in
A) gpu
  all_tests; TB=200 table bench-train-bf16 --backward --repeats 10 --dtype bfloat16 ;;
B) gpu
  TB=150 table bench-fwd; TB=150 table bench-fwd-cl --channels-last
  probe 150 in-model in_model_probe.py 12 vae-decoder:bf16-autocast:channels_last:forward ;;
C) gpu
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  zoo_model unet3d 300; zoo_model hifigan 250 ;;
D) gpu
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  zoo_model fcn32s 200; zoo_model depthwise 200 ;;
esac
