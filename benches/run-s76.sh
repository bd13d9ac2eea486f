#!/usr/bin/env bash
# Session 76's device calls, after C (run-s75.sh) timed the fused convolution forward and
# the replayed weight gradient and this session turned both on (fused.CONVOLUTION_MIN_COLUMNS
# = 2^23, ops.CONV_WEIGHT_GRAD_REPLAYED).
#   E (about 560 s): the CUDA tests reaching convolutions on those defaults (test_cuda_graphs,
#      test_cuda's convolution, module and bad-input tests), R's other two precisions and layouts, then the zoo's
#      models with convolutions not yet run on them: hifigan (1-D), unet3d (3-D).
#   H (about 120 s): where a small convolution's training step goes (host or kernels):
#      benches/conv_step_profile.py in float32 planar and bfloat16 channels_last.
#   K (about 240 s, the last of this session's budget): P in two precisions and layouts
#      (the RGB layer now fused), the CUDA tests reaching convolutions on the defaults as
#      they stand (the fused floor on, the replayed weight gradient off), H in bfloat16
#      channels_last, then the VAE decoder's zoo as time allows.
#   N (about 330 s; for session 77, after K): the whole convolution backward as one graph
#      (ops._ConvBackwardReplay, built after K, off: ops.GRAPHED_CONV_BACKWARD) and the
#      convolution modules' steady calls (ops._SteadyConvolution, off:
#      ops.STEADY_CONVOLUTIONS): their tests, the other convolution graph tests and the
#      transposed modules' steady tests (the steady path is shared now), then
#      conv_wgrad_replay_probe.py (with the graphed backward) in four precisions and layouts,
#      and what its backward holds against its graph's bound (conv_backward_bytes_probe.py).
#   S (about 400 s, after N passes): the zoo's VAE decoder and U-Net (their 3x3
#      convolutions) with both switches on, patched in for this process alone, then with
#      the defaults, side by side in one call.
#   F (about 450 s): the zoo's fcn and depthwise, then the four tables as far as time goes.
source benches/run-lib.sh "$1"
case "$1" in
E) gpu
  node
  TC=150 sharded_tests "graphs:8:tests/test_cuda_graphs.py" "cuda:1:tests/test_cuda.py:no_receiving_rows or layouts_and_modules or bad_input_on_cuda"
  for dl in "float32 channels_last" "bfloat16 planar"; do
    probe 60 conv-wgrad-${dl/ /-} conv_wgrad_replay_probe.py $dl
  done
  zoo_model hifigan 110; zoo_model unet3d 170 ;;
H) gpu
  node
  probe 70 step-float32-planar conv_step_profile.py float32 planar
  probe 70 step-bfloat16-channels_last conv_step_profile.py bfloat16 channels_last ;;
K) gpu
  node
  probe 50 conv-fused-bfloat16-channels_last conv_fused_probe.py bfloat16 channels_last
  probe 50 conv-fused-float32-planar conv_fused_probe.py float32 planar
  TC=$(( $(left ${LIMIT:-240}) - 70 )) sharded_tests "graphs:5:tests/test_cuda_graphs.py:convolution" \
    "reuse:6:tests/test_cuda_reuse.py" "cuda:1:tests/test_cuda.py:no_receiving_rows or layouts_and_modules"
  probe 45 step-bfloat16-channels_last conv_step_profile.py bfloat16 channels_last
  [ $(left ${LIMIT:-240}) -gt 70 ] && zoo_model vae-decoder $(( $(left ${LIMIT:-240}) - 5 )) ;;
N) gpu
  node
  conv_replay_checks ;;
S) gpu
  node
  switched vae-decoder 80; zoo_model vae-decoder 80
  switched unet2d 120; zoo_model unet2d 120 ;;
F) gpu
  node
  zoo_model fcn 120; zoo_model depthwise 90
  TB=$(( $(left ${LIMIT:-450}) - 10 )) table train-f32-layouts --layouts --backward ;;
esac
