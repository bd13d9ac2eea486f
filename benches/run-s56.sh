#!/usr/bin/env bash
# Session 56's device calls, written in session 55 (outputs under $OUT/<call>).
#   A: every CUDA test file on session 55's final code (151, autocast through its cache, ran
#      the autocast, graphs and replay tests only), then the bfloat16 training table.
#   B: the channels_last forwards under 0.9 of their NCHW speedup in session 55, kernel by
#      kernel in both layouts (layer.py), then the two forward tables in one call (session
#      55 read NCHW and channels_last on two machines).
#   C: 152 (a grouped channels_last forward replayed over its block-diagonal weight): the
#      replay, graphs and channels_last test files, cl_gap_probe on the grouped cases, and
#      both forward tables.
#   D: 153 (the dense grouped product's columns in an ungrouped layer's order): the
#      channels_last and replay tests, the grouped layers kernel by kernel, both forward tables.
#   (E, F: the zoo's other models, not run: moved to run-s57.sh C and D.)
#   G: after 153, the graphs tests and the rest of the replay tests; the grouped cases'
#      training steps in both layouts.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, summary, layer, gpu, all_tests, table, probe, zoo_model
case "$1" in
A) gpu
  all_tests; TB=200 table bench-train-bf16 --backward --repeats 10 --dtype bfloat16 ;;
B) gpu
  for cl in "" --channels-last; do
    layer "ConvTranspose3d(32, 16, (3, 5, 7))" --input 16,32,16,32,64 $cl
    layer "ConvTranspose3d(32, 32, (3, 5, 7), stride=2, padding=(1, 2, 3), output_padding=1, groups=4)" --input 8,32,12,24,48 $cl
    layer "ConvTranspose3d(32, 32, 3, stride=2, padding=1, groups=4)" --input 4,32,32,64,128 $cl
    layer "ConvTranspose3d(48, 24, 3)" --input 8,48,96,96,96 $cl
    layer "ConvTranspose2d(64, 128, (3, 5))" --input 64,64,128,256 $cl
  done > $O/layers.log; cat $O/layers.log
  TB=150 table bench-fwd; TB=150 table bench-fwd-cl --channels-last ;;
C) gpu
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  t replay tests/test_cuda_replay.py & t cl tests/test_cuda_channels_last.py &
  t graphs tests/test_cuda_graphs.py &
  summary
  probe 60 cl-gap cl_gap_probe.py 3d-strided-grouped 3d-stride2-grouped
  TB=150 table bench-fwd-cl --channels-last; TB=150 table bench-fwd ;;
D) gpu
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  t replay tests/test_cuda_replay.py -k "forward or block_diagonal or padded" &
  t cl tests/test_cuda_channels_last.py & t cuda tests/test_cuda.py -k "group" &
  summary
  for cl in "" --channels-last; do
    layer "ConvTranspose3d(32, 32, (3, 5, 7), stride=2, padding=(1, 2, 3), output_padding=1, groups=4)" --input 8,32,12,24,48 $cl
    layer "ConvTranspose3d(32, 32, 3, stride=2, padding=1, groups=4)" --input 4,32,32,64,128 $cl
  done > $O/layers.log; cat $O/layers.log
  TB=150 table bench-fwd-cl --channels-last; TB=150 table bench-fwd ;;
G) gpu
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  t replay tests/test_cuda_replay.py -k "not (forward or block_diagonal or padded)" &
  t graphs tests/test_cuda_graphs.py &
  summary
  G3="--case 3d-strided-grouped --case 3d-stride2-grouped --case 2d-strided-grouped"
  TB=90 table train-grouped $G3 --backward; TB=90 table train-grouped-cl $G3 --backward --channels-last ;;
esac
