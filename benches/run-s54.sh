#!/usr/bin/env bash
# Session 54's device calls, written in session 53 (outputs under $OUT/<call>).
#   A: the zoo's transposed convolutions that read below 0.8x swapped in session 53's zoo
#      (issue 22's per-layer floor), kernel by kernel against torch (benches/layer.py):
#      the 3-D U-Net's ups.1 training step, planar, 1.0 ms of backward where its
#      channels_last one takes 0.2 (0.42-0.47x in both precisions); its ups.2 (planar
#      training 0.63-1.04x) and ups.0 (bfloat16 channels_last forward 0.71-0.78x); the 2-D
#      U-Net's ups.3 channels_last float32 training step (0.62-0.78x). Then the same steps
#      with the graph memory limit at its default and at 2 GiB (graph_limit_probe.py): is
#      ups.1's planar backward slow because graph_bytes (706 MB) refuses it a graph?
#      (It is: with 2 GiB, ups.1 reads 1.60x float32 and 2.07x bfloat16 against 0.47x, and
#      the 2-D U-Net's ups.3 channels_last step 1.38x against 0.82x.)
#   B: 150's tighter graph bounds (_GraphedBackward's partials, _BackwardReplay's copies):
#      every CUDA test file (the new bound test among them), then A's probe again.
#      (B: every test passed but the new one on the 18 calls whose backward is a
#      _BackwardReplay: the test read its owner's class name wrong, "_BackwardReplay" not
#      ending in "Backward". Its logs went with $OUT/P.)
#   C: the bound test again, the zoo's 3-D U-Net (whose graphs 150 changes), the 17 cases'
#      float32 training table.
#   D: (C: the bound test failed on the two large channels_last layers by 128 MiB, and on
#      six small bfloat16 calls by 0.3-7 KB; every other call within its bound) what those
#      backwards allocate beyond their bound (graph_memory_probe.py); the zoo's 2-D U-Net,
#      the 17 cases' bfloat16 training table.
#   E: (D: torch's own sum behind the bias gradient, cl.channel_sums, staged 128-132 MiB of
#      partial sums) with ops.SUM_STAGING_BYTES counted in every column-route backward's
#      bound: the graph and replay tests, the bound test among them.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, summary, layer, gpu, all_tests, table, probe, zoo_model
U3D0="ConvTranspose3d(512, 512, 2, stride=2)"
U3D1="ConvTranspose3d(256, 256, 2, stride=2)"
U3D2="ConvTranspose3d(128, 128, 2, stride=2)"
U2D3="ConvTranspose2d(128, 64, 2, stride=2)"
case "$1" in
A) gpu
  { layer "$U3D1" --input 2,256,16,16,16 --backward
    layer "$U3D1" --input 2,256,16,16,16 --backward --dtype bfloat16
    layer "$U3D1" --input 2,256,16,16,16 --backward --channels-last
    layer "$U3D2" --input 2,128,32,32,32 --backward
    layer "$U3D0" --input 2,512,8,8,8 --channels-last --dtype bfloat16
    layer "$U2D3" --input 8,128,128,128 --backward --channels-last; } | tee $O/layers.txt
  probe 150 limit graph_limit_probe.py ;;
B) gpu
  all_tests; probe 150 limit graph_limit_probe.py ;;
C) gpu
  t bounds tests/test_cuda_graphs.py -k "no_more_memory" -rA; count $O/bounds.log; tail -3 $O/bounds.log
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  zoo_model unet3d 290
  TB=120 table bench-train --backward --repeats 10 ;;
D) gpu
  probe 120 memory graph_memory_probe.py
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  zoo_model unet2d 280
  TB=120 table bench-train-bf16 --backward --repeats 10 --dtype bfloat16 ;;
E) gpu
  TT=400 t graphs tests/test_cuda_graphs.py tests/test_cuda_replay.py -rf; count $O/graphs.log
  tail -2 $O/graphs.log ;;
esac
