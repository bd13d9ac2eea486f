#!/usr/bin/env bash
# Session 61's device calls (outputs under $OUT/<call>): written in session 59 for session 60,
# which was lent no device, and T added there.
#   T: every CUDA test file: session 60 changed fused.py (fused.moved_operand, the one rule
#      for the float32 weight gradient's moved operand; shifted_copies refuses layouts it
#      would copy) and ran only the CPU tests on it.
#   A: the zoo models whose float32 channels_last training steps 159 may move (the planar
#      form of the weight gradient now takes channels_last stride-1 2-D calls of at least
#      16,384 taps' products a position): the VAE decoder and the 2-D U-Net; DCGAN's
#      layer 6, kernel by kernel, both formats (0.78x in session 58 B's float32
#      channels_last forward).
#   B: the bfloat16 training table in both formats (3d-3x5x7's channels_last step: 0.97x
#      in session 58 C, 1.17x in B), then 2d-64to128's float32 channels_last backward kernel
#      by kernel (0.97x on the column routes; 0.88x fused in session 59 B).
#   P: (session 61, ran on an H100) the float32 weight gradient's ways of feeding the tensor
#      cores (benches/wgrad_forms_probe.py, removed with the forms after it: see commit
#      36fe18c); T right after it. Then U: test_cuda_fused again, on the code with those
#      forms removed (what the budget left allowed).
source benches/run-lib.sh "$1"   # $O, and count, t, summary, layer, gpu, all_tests, table, ...
case "$1" in
P) gpu
  probe 500 wgrad-forms wgrad_forms_probe.py ;;
T) gpu
  all_tests ;;
U) gpu
  TT=${TT:-270} t fused tests/test_cuda_fused.py; count $O/fused.log; tail -1 $O/fused.log ;;
A) gpu
  node
  zoo_model vae-decoder 170; zoo_model unet2d 250
  for f in "" --channels-last; do
    layer "ConvTranspose2d(256, 128, 4, stride=2, padding=1, bias=False)" --input 128,256,8,8 $f
  done ;;
B) gpu
  node
  TB=250 table train-bf16-layouts --layouts --backward --dtype bfloat16
  for f in "" --channels-last; do layer "ConvTranspose2d(64, 128, (3, 5))" --input 64,64,128,256 --backward $f; done ;;
esac
