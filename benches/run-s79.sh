#!/usr/bin/env bash
# Session 79's device calls. Nothing since run-s78.sh F has run on a GPU: the review's
# rename in ops._backward (33ff4a3) and test_cuda_graphs' fused-layer parameters (77a160a).
#   A (up to 580 s, first): test_cuda_graphs whole; benches/zoo_tile_probe.py on DCGAN's
#      strided layers (the fused forward's tiles against cuDNN); then the four tables (the
#      17 cases' 2-D and 3-D rows, both layouts, forward and training step, float32 and
#      bfloat16), each while its time is left.
#   B (up to 580 s; after A): the zoo's models on the defaults, convert with and without a
#      sample, every layer type (ran on an H100: results/s79/B).
source benches/run-lib.sh "$1"
case "$1" in
A) gpu
  node
  TC=150 sharded_tests "graphs:7:tests/test_cuda_graphs.py"
  probe 200 zoo-tile zoo_tile_probe.py dcgan --layers 1,2,3
  for spec in "train-f32-layouts 150 --backward" "train-bf16-layouts 150 --backward --dtype bfloat16" \
              "fwd-f32-layouts 90" "fwd-bf16-layouts 90 --dtype bfloat16"; do
    set -- $spec
    [ $(left ${LIMIT:-580}) -gt $(( $2 / 2 )) ] || break
    log=$1 secs=$(( $2 < $(left ${LIMIT:-580}) ? $2 : $(left ${LIMIT:-580}) )); shift 2
    TB=$secs table $log --layouts "$@"
  done ;;
B) gpu
  node
  zoo_models ${LIMIT:-580} vae-decoder fcn32s depthwise dcgan hifigan unet2d unet3d ;;
esac
