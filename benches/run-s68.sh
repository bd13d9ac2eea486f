#!/usr/bin/env bash
# Session 68's device calls, written in session 67. No code changed in session 67, so the
# CUDA code is still the one every CUDA test file passed in session 66 (5,273 passed, 0
# failed, on an H100). Session 67 ran the zoo and the four tables on an H100 (results/s67);
# no H200 has come since session 59, and issue 21 asks for the zoo on one. If the card is
# an H200, run the same three calls again first (run-s67.sh Z1, Z2, G: about 320, 365 and
# 550 s); then, or on an H100:
#   O: what session 67 did not run (about 400 s):
#      - first, wgmma_shift_probe.py (about 10 s, built in session 67, never run): whether
#        a wgmma A operand can start s rows into a 128-byte-swizzled shared tile, with or
#        without the descriptor's base offset. If it can, one box serves every W tap of a
#        forward in CUDA C++ (the lever Triton and Gluon refuse; NOTES, session 67);
#      - the three 1-D cases in each table that the layouts tables leave out (last run in
#        session 65, on an H100; bfloat16 training: session 56);
#      - DCGAN's two float32 channels_last layers that still read under 0.8x swapped in the
#        zoo's training step (layers 6 and 9: 0.75x and 0.70x), kernel by kernel against
#        cuDNN's (benches/layer.py), for the next lever on them; and DCGAN's layers
#        forward on the column routes against the fused route (small_fused_probe.py: its
#        float32 channels_last layers 6 and 9 read 0.79x and 0.87x on the fused route).
# A (session 68's first call): on an H200, Z1; on any other card, O.
if [ "$1" = A ]; then
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then set -- Z1; else set -- O; fi
  echo "run-s68.sh A: $1"
fi
case "$1" in Z1|Z2|G) exec bash benches/run-s67.sh "$1" ;; esac   # (it sets up its own folder)
source benches/run-lib.sh "$1"
case "$1" in
O) gpu
  node
  probe 60 wgmma-shift wgmma_shift_probe.py
  TB=60 table fwd-1d --case 1d- ; TB=60 table fwd-1d-bf16 --case 1d- --dtype bfloat16
  TB=90 table train-1d --case 1d- --backward
  TB=90 table train-1d-bf16 --case 1d- --backward --dtype bfloat16
  layer "ConvTranspose2d(256, 128, 4, 2, 1, bias=False)" --input 128,256,8,8 --backward --channels-last
  layer "ConvTranspose2d(128, 64, 4, 2, 1, bias=False)" --input 128,128,16,16 --backward --channels-last
  probe 150 small small_fused_probe.py dcgan ;;
esac
# F (written in session 68, after O): benches/wgmma_forward.cu, the CUDA C++ forward that
# loads one box for every W tap, against float64 and timed against torch and gemmconv
# (about 90 s; its forms: FORMS in the probe); then its small shapes under compute-sanitizer's memcheck.
case "$1" in
F) gpu
  probe 200 forward wgmma_forward_probe.py
  timeout 120 compute-sanitizer --tool memcheck python3 benches/wgmma_forward_probe.py --edges 2>&1 | tail -15 | tee $O/memcheck.log ;;
esac
# F2: F's probe alone (session 68's device time ran short after refused starts).
case "$1" in
F2) gpu
  probe 150 forward wgmma_forward_probe.py ;;
esac
