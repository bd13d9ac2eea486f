#!/usr/bin/env bash
# Session 55's device calls, written in session 54 (outputs under $OUT/<call>).
#   A: every CUDA test file on session 54's final code (its E ran test_cuda_graphs and
#      test_cuda_replay alone; a grouped wide layer joined WIDE_LAYERS after E); the
#      capture test's configuration in four processes of its own (capture_probe.py:
#      which parameters' gradients differ, which choices were made during the capture).
#   B (after A, whose capture trials read the eager step 6e-6 from a second eager step):
#      the capture probe twice as before and three times with torch's convolutions
#      deterministic; the 17 cases' float32 training table (session 54's C ran out of its
#      120 s compiling) and forward table.
#   C (after B: with cuDNN deterministic the capture, the eager step and a second eager step
#      agreed bit for bit): the capture test, now asserting that, on its eight
#      configurations; the channels_last forward table; the two U-Nets' bfloat16
#      channels_last forwards with each layer swapped alone (in_model_probe.py: their ups.0
#      and ups.1 read under 0.8x in convert's in-model timing, faster alone); DCGAN.
#   D: autocast through its cache (the C++ extension's autocast_cast): the CUDA tests that
#      run under autocast, then DCGAN and the VAE decoder, whose bfloat16 channels_last
#      layers convert's report read under 0.8x.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, summary, layer, gpu, all_tests, table, probe, zoo_model
case "$1" in
A) gpu
  all_tests; probe 180 capture capture_probe.py 4 vae-decoder planar ;;
B) gpu
  probe 90 capture capture_probe.py 2 vae-decoder planar
  DETERMINISTIC=1 probe 120 capture-deterministic capture_probe.py 3 vae-decoder planar
  TB=200 table bench-train --backward --repeats 10
  TB=100 table bench-fwd ;;
C) gpu
  TT=150 t captured tests/test_cuda_graphs.py -k captured_whole; count $O/captured.log; tail -1 $O/captured.log
  TB=130 table bench-fwd-cl --channels-last
  probe 100 in-model in_model_probe.py 12 unet2d:bf16-autocast:channels_last:forward \
    unet3d:bf16-autocast:channels_last:forward
  zoo_model dcgan 150 ;;
D) gpu   # (after C: convert's own timings run inside the caller's autocast region, where
  # torch's layers cast their weights once and ours, until this change, every call)
  TT=300 t reuse tests/test_cuda_reuse.py &
  TT=300 t cl-autocast tests/test_cuda_channels_last.py -k autocast &
  TT=300 t dw-autocast tests/test_cuda_depthwise.py -k autocast &
  summary
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  zoo_model dcgan 150; zoo_model vae-decoder 150 ;;
E) gpu   # (after D: the cast-counting test counted ids of C++ nodes' Python objects let go)
  TT=200 t reuse-autocast tests/test_cuda_reuse.py -k autocast; count $O/reuse-autocast.log
  tail -1 $O/reuse-autocast.log; grep -E "^E  " $O/reuse-autocast.log | head
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  zoo_model unet2d 300 ;;
F) gpu   # the graphs' and steady calls' tests on the rebuilt extension (autocast_cast added)
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  TT=300 t graphs tests/test_cuda_graphs.py &
  TT=300 t replay tests/test_cuda_replay.py &
  TT=300 t dw-zoo tests/test_cuda_depthwise.py -k zoos_depthwise &
  summary ;;
esac
