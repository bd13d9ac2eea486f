#!/usr/bin/env bash
# Session 53's device calls (outputs under $OUT/<call>; logs kept in benches/results/s53/).
# Session 52's F and G (run-s52.sh) ran first in this session, on the same code.
#   A: the zoo's HiFi-GAN and 3-D U-Net on 147/148's code.
#   B: the 17 cases' forward tables, NCHW and channels_last.
#   C: why the zoo read the 2-D U-Net's bfloat16 channels_last forward at 0.97x where
#      convert(sample=)'s own timing read 1.04x (zoo_turns_probe.py).
#   D: C read that U-Net's converted step alone at 3.82 ms against torch's 3.23: each model
#      alone, with its launches, host time and kernels (zoo_turns_probe.py --alone).
#   E: the 17 cases' training tables, float32 and bfloat16.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, summary, layer, gpu, all_tests, table, probe, zoo_model
case "$1" in
A) gpu
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  zoo_model hifigan 240; zoo_model unet3d 330 ;;
B) gpu
  TB=100 table bench-fwd; TB=110 table bench-fwd-cl --channels-last ;;
C) gpu
  probe 200 turns zoo_turns_probe.py 15 unet2d:bf16-autocast:channels_last:forward \
    unet2d:bf16-autocast:NCHW:forward unet2d:float32:channels_last:forward ;;
D) gpu
  probe 200 alone zoo_turns_probe.py 15 --alone unet2d:bf16-autocast:channels_last:forward \
    unet2d:bf16-autocast:NCHW:forward unet2d:bf16-autocast:channels_last:train \
    dcgan:float32:channels_last:train vae:float32:channels_last:train ;;
E) gpu
  TB=120 table bench-train --backward --repeats 10
  TB=120 table bench-train-bf16 --backward --dtype bfloat16 --repeats 10 ;;
esac
