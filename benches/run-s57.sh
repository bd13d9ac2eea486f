#!/usr/bin/env bash
# Session 57's device calls, written in session 56 (outputs under $OUT/<call>).
#   A: 154 (the channels_last backward's dense grouped products in the ungrouped column
#      order) ran on no GPU: the channels_last, replay, graphs and grouped test_cuda tests,
#      then the grouped cases' training steps in both layouts (session 56's G, before 154:
#      channels_last 2.25x / 2.52x / 3.01x against planar 2.93x / 2.54x / 2.77x).
#   B: the float32 training table, and the forward's two memory formats in turns
#      (bench --layouts, new in session 56: issue 21's channels_last target, read without the
#      drift between two tables).
#   C: the 3-D U-Net and HiFi-GAN, whose with-a-sample columns 151 changes under autocast.
#   D: FCN-32s and the depthwise decoder, the same.
#   E (written after A): how many runs of channels a thread of the channels-innermost im2col
#      and col2im should take (A: after 154, 3d-strided-grouped's channels_last training
#      step 2.535 -> 2.986 ms; its output gradient's im2col 0.702 ms against 0.415 planar),
#      then B's bench --layouts.
#   F: E's rule on the H200: the channels_last and graphs tests, the bfloat16 runs a thread,
#      the grouped cases' and the bfloat16 training steps in both formats in turns; FCN-32s.
#   G, H: F's rule mended (the stride decides), its tests and tables; the 3-D U-Net, HiFi-GAN.
#   I: 156's tests, and the bfloat16 training steps of the stride-1 2-D cases in both formats.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, summary, layer, gpu, all_tests, table, probe, zoo_model, node
case "$1" in
A) gpu
  node
  t cl tests/test_cuda_channels_last.py & t replay tests/test_cuda_replay.py &
  t graphs tests/test_cuda_graphs.py & t cuda tests/test_cuda.py -k "group" &
  summary
  G3="--case 3d-strided-grouped --case 3d-stride2-grouped --case 2d-strided-grouped"
  TB=90 table train-grouped $G3 --backward; TB=90 table train-grouped-cl $G3 --backward --channels-last
  for cl in "" --channels-last; do
    layer "ConvTranspose3d(32, 32, (3, 5, 7), stride=2, padding=(1, 2, 3), output_padding=1, groups=4)" --input 8,32,12,24,48 --backward $cl
  done > $O/layers.log; cat $O/layers.log ;;
B) gpu
  TB=200 table bench-train --backward
  timeout 300 python3 -m gemmconv bench --full --layouts > $O/layouts.log 2>&1; grep -A20 "^case" $O/layouts.log ;;
C) gpu
  node
  zoo_model unet3d 300; zoo_model hifigan 250 ;;
D) gpu
  node
  zoo_model fcn32s 200; zoo_model depthwise 200 ;;
E) gpu
  probe 200 runs interleaved_runs_probe.py
  timeout 300 python3 -m gemmconv bench --full --layouts > $O/layouts.log 2>&1; grep -A20 "^case" $O/layouts.log ;;
F) gpu   # (after E: im2col's runs a thread, _cuda.interleaved_runs)
  node
  t cl tests/test_cuda_channels_last.py & t graphs tests/test_cuda_graphs.py & summary
  DTYPE=bfloat16 probe 100 runs-bf16 interleaved_runs_probe.py 3d-strided-grouped \
    2d-strided-grouped 2d-3x7-512 3d-64cube
  TB=100 table train-grouped-layouts --layouts --backward --case grouped
  TB=130 table train-bf16-layouts --layouts --backward --dtype bfloat16
  zoo_model fcn32s 170 ;;
G) gpu   # (after F: a strided kernel's im2col two runs a thread, stride 1 four)
  node
  t cl tests/test_cuda_channels_last.py; summary
  layer "ConvTranspose3d(32, 32, (3, 5, 7), stride=2, padding=(1, 2, 3), output_padding=1, groups=4)" \
    --input 8,32,12,24,48 --backward --channels-last > $O/layers.log; cat $O/layers.log
  TB=80 table train-grouped-layouts --layouts --backward --case grouped
  TB=80 table train-bf16-layouts --layouts --backward --dtype bfloat16 --case grouped --case 2d-3x7-512
  zoo_model unet3d 280 ;;
H) gpu
  node
  zoo_model hifigan 250 ;;
I) gpu   # (after H: 156, a channels_last 16-bit 2-D stride-1 backward on the fused kernels)
  node
  TT=150 t fused tests/test_cuda_fused.py -k "channels_last_stride_one or planar_stride_one" &
  TT=150 t cl tests/test_cuda_channels_last.py -k "bfloat16" & summary
  TB=90 table train-bf16-layouts --layouts --backward --dtype bfloat16 --case 2d-1024 \
    --case 2d-3x7 --case 2d-64to128 --case 2d-512x1024 ;;
esac
