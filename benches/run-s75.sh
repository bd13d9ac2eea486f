#!/usr/bin/env bash
# The next session's device calls (written in session 74, after its last GPU run).
#   P (about 200 s): fused.convolution against the column route and torch on the VAE
#      decoder's six 3x3 convolutions (benches/conv_fused_probe.py), float32 and bfloat16,
#      planar and channels_last: does a stride-1 convolution's forward want the fused
#      kernel where its columns' traffic bounds the column route (the 64x64 and 128x128
#      layers at 0.24-0.72x in session 74's zoo)?
#   R (about 200 s): the same layers' training steps with the weight gradient as ops.py
#      runs it (eagerly) and by the transposed convolution's backward replay, patched in by
#      benches/conv_wgrad_replay_probe.py alone (0.23-0.58x in session 74's V).
#   Z1 (about 550 s): the zoo models not run on this code: unet2d, depthwise, fcn, hifigan.
#   Z3 (about 300 s): dcgan and unet3d.
#   C (one call, up to $LIMIT s, by default 580; session 75, when machines were scarce):
#      P and R in two of their four precisions and layouts (the routes they time are off
#      by default: fused.CONVOLUTION_MIN_COLUMNS, ops.CONV_WEIGHT_GRAD_REPLAYED), then
#      test_cuda_graphs and test_cuda_reuse (whose tests turn them on), then P's other two.
#   M (about 200 s, the least of C): P and R in float32 planar, and test_cuda_graphs'
#      convolution tests.
source benches/run-lib.sh "$1"
case "$1" in
P) gpu
  node
  for d in float32 bfloat16; do for l in planar channels_last; do
    probe 80 conv-fused-$d-$l conv_fused_probe.py $d $l
  done; done ;;
R) gpu
  node
  for d in float32 bfloat16; do for l in planar channels_last; do
    probe 60 conv-wgrad-$d-$l conv_wgrad_replay_probe.py $d $l
  done; done ;;
C) gpu
  node
  for dl in "float32 planar" "bfloat16 channels_last"; do
    probe 80 conv-fused-${dl/ /-} conv_fused_probe.py $dl
    probe 60 conv-wgrad-${dl/ /-} conv_wgrad_replay_probe.py $dl
  done
  TC=150 sharded_tests "graphs:8:tests/test_cuda_graphs.py" "reuse:6:tests/test_cuda_reuse.py"
  for dl in "float32 channels_last" "bfloat16 planar"; do
    [ $(left ${LIMIT:-580}) -gt 60 ] && probe 80 conv-fused-${dl/ /-} conv_fused_probe.py $dl
  done ;;
M) gpu
  node
  probe 60 conv-fused-float32-planar conv_fused_probe.py float32 planar
  probe 50 conv-wgrad-float32-planar conv_wgrad_replay_probe.py float32 planar
  TC=$(left ${LIMIT:-200}) sharded_tests "graphs:8:tests/test_cuda_graphs.py:convolution" ;;
Z1) gpu
  node
  zoo_model unet2d 200; zoo_model depthwise 100; zoo_model fcn 130; zoo_model hifigan 120 ;;
Z3) gpu
  node
  zoo_model dcgan 120; zoo_model unet3d 200 ;;
esac
