#!/usr/bin/env bash
# Session 79's device calls. Nothing since run-s78.sh F has run on a GPU: the review's
# rename in ops._backward (33ff4a3) and test_cuda_graphs' fused-layer parameters (77a160a).
#   A (up to 580 s, first): test_cuda_graphs whole, then the four tables (the 17 cases'
#      2-D and 3-D rows, both layouts, forward and training step, float32 and bfloat16),
#      then the full 17-case table in float32 as time allows.
#   B (up to 580 s; after A): the zoo's models on the defaults, convert with and without a
#      sample, every layer type (the first H200 zoo since session 73).
source benches/run-lib.sh "$1"
case "$1" in
A) gpu
  node
  TC=150 sharded_tests "graphs:7:tests/test_cuda_graphs.py"
  four_tables
  [ $(left ${LIMIT:-580}) -gt 100 ] && TB=$(( $(left ${LIMIT:-580}) - 5 )) table full-f32 ;;
B) gpu
  node
  zoo_models ${LIMIT:-580} vae-decoder fcn32s depthwise dcgan hifigan unet2d unet3d ;;
esac
