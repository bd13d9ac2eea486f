#!/usr/bin/env bash
# Session 78's device calls, prepared on the CPU: no device machine was lent in session 78.
# They test and time sessions 77 and 78's changes, none of which has run on a GPU since
# run-s77.sh B: the graphed convolution backward's fallback fix (21b62f8) and the step
# test's pin; the fused convolution's ceiling on the reduction (fused.CONVOLUTION_MAX_REDUCTION,
# drawn from other sessions' runs; replaced after D); pointwise calls' GEMMs on their input where it lies
# (ops._columns_in_place, channels_last.backward), with cases.CONV_LAYERS' unet-head-1x1.
#   C (about 330 s, first): test_cuda_graphs whole, the steady tests, test_cuda_reuse whole,
#      test_cuda's and test_cuda_channels_last's float64 matches (the case table's 1x1
#      transposed calls among them), im2col route, convolution, module and layout tests;
#      then the step probe in two precisions and layouts, then the VAE decoder's zoo.
#   D (up to 480 s; after C): benches/unet_conv_probe.py in four precisions and layouts: the
#      2-D U-Net's convolutions by the column route, by the fused one and by the defaults,
#      forward and training step, against torch: the ceiling's check, and the 1x1 head's
#      column route without its im2col against the fused kernel (0.45x of torch planar,
#      2.44x channels_last, in session 77's S).
#   E (up to 580 s; after D): the four tables (the 17 cases' 14 2-D and 3-D ones, both
#      layouts), then the zoo's models without --layers as time allows, on the defaults.
#   After C (H100: 2 of test_cuda_graphs' 384 failed: the weight gradient's backward replay
#   of the pointwise channels_last layer read a workspace its plan no longer holds) and D
#   (H100: the fused kernel lost every layer of 512-1024 output channels, won every one of
#   64-256; the planar 1x1 head ran faster on the column route now):
#   F (about 480 s): test_cuda_graphs, test_cuda_replay's steady tests and test_cuda_reuse's
#      convolution tests on the mended replay and fused.CONVOLUTION_MAX_OUT_CHANNELS (in
#      place of the reduction's ceiling) with the planar pointwise rule; unet_conv_probe.py
#      in four precisions and layouts on them; the zoo's 2-D U-Net, VAE decoder and FCN-32s.
#   After F (H100: 4 of test_cuda_graphs' 384 failed, the fused convolution's graph tests
#   expecting the kernel on the planar pointwise layer, which the cost model keeps off it;
#   those tests now leave it out): next session, test_cuda_graphs first, then E (its models
#   reordered: F ran the 2-D U-Net).
source benches/run-lib.sh "$1"
case "$1" in
C) gpu
  node
  TC=170 sharded_tests "graphs:7:tests/test_cuda_graphs.py" \
    "replay:2:tests/test_cuda_replay.py:steady_convolution or steady_training or like_its_last" \
    "reuse:3:tests/test_cuda_reuse.py" \
    "cuda:3:tests/test_cuda.py:matches_float64 or im2col_route or conv and not transpose or module or layouts" \
    "cl:2:tests/test_cuda_channels_last.py:matches_float64 or im2col_route or module"
  conv_step_probes
  [ $(left ${LIMIT:-330}) -gt 60 ] && zoo_model vae-decoder $(( $(left ${LIMIT:-330}) - 5 )) ;;
D) gpu
  unet_conv_probes 115 ;;
F) gpu
  node
  TC=150 sharded_tests "graphs:7:tests/test_cuda_graphs.py" \
    "replay:2:tests/test_cuda_replay.py:steady_convolution or steady_training or like_its_last" \
    "reuse:3:tests/test_cuda_reuse.py:conv and not transpose"
  unet_conv_probes 60 "^(torch|conv  *(256|512|1024)->|conv  *64->  *2 )"
  zoo_models ${LIMIT:-480} unet2d vae-decoder fcn32s ;;
E) gpu
  node
  four_tables
  zoo_models ${LIMIT:-580} vae-decoder fcn32s depthwise dcgan hifigan unet2d ;;
esac
