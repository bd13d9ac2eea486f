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
#   C: the channels_last forward table, then two of the zoo's models session 54 did not
#      rerun.
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
  TB=130 table bench-fwd-cl --channels-last
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  zoo_model dcgan 150; zoo_model vae-decoder 150 ;;
esac
