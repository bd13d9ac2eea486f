#!/usr/bin/env bash
# Session 48's device calls (outputs under $OUT/<call>; logs kept in benches/results/s48/).
#   A: how the timer's samples of one and the same host-bound model spread, sample by
#      sample (sample_trace_probe.py: torch's zoo model, three deep copies, ours; 36
#      repeats), medians against paired speedups.
#   B: where convert(model) loses on the zoo's small-layer models (zoo_profile.py: paired
#      step times, the host's time with the GPU busy, kernels by name, torch against ours),
#      then the host's time per layer and cProfile of the VAE decoder's float32
#      channels_last step (host_floor_probe.py).
#   C: does a converted model's step wait on the GPU? (runtime_probe.py: CUDA runtime calls
#      a step, the GPU's busy time, device threads on and off).
#   D, E: the model zoo (bench --models, both convert modes and every layer type, with the
#      paired speedups and the copy of torch's model), a model per process: D the small
#      models and the 2-D U-Net, E HiFi-GAN and the 3-D U-Net.
#   F: do our graphs hit while the zoo times five variants in turns? (graph_hits_probe.py)
#   G: F again with the five in turns, pairs, again, and the collector off.
#   H: where a small layer's backward spends the host's time (backward_host_probe.py).
#   I: why our channels_last forward of a small layer costs the host more than the planar
#      one (forward_host_probe.py).
#   J: does alternating a layer's forward and backward graphs cost the host? (graph_step_probe.py)
#   K: bfloat16 training steps of the table's slowest 3-D and strided rows, kernel by kernel
#      (layer.py --backward).
#   L: the zoo's rows D did not reach in its time (zoo_rows.py): the VAE decoder's bfloat16
#      channels_last step, FCN-32s's and the depthwise decoder's bfloat16 channels_last rows.
#   M: after the case table took the paired speedups: test_cuda_graphs (one of its tests
#      times a case through bench.measure), then the bfloat16 and float32 training tables.
#   N: do turns cost our small cases their graphs? (turns_probe.py)
#   O: 2d-stride5-dil2's bfloat16 training step, bimodal from process to process (0.93-0.94
#      or 1.54-1.70 ms in sessions 43-48): its kernels in four processes (layer.py).
#   P: the forward tables, NCHW and channels_last (timed in turns, paired).
#   Q: the float32 forward in turns against in a row (turns_probe.py --forward), on the
#      cases P read slower than session 47's E.
#   R: the probes after their shared code moved to probe_lib.py, each on one configuration
#      (do they still run).
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu, all_tests, table, probe, zoo_model
case "$1" in
A) gpu
  OUT=$O probe 400 traces sample_trace_probe.py ;;
B) gpu
  probe 300 zoo_profile zoo_profile.py
  probe 200 host host_floor_probe.py vae:float32:channels_last dcgan:float32:channels_last ;;
C) gpu
  probe 300 runtime runtime_probe.py ;;
D) gpu
  for m in "dcgan 85" "vae 85" "fcn32s 115" "depthwise 75" "unet2d 200"; do zoo_model $m; done ;;
E) gpu
  for m in "hifigan 250" "unet3d 320"; do zoo_model $m; done ;;
F) gpu
  probe 300 hits graph_hits_probe.py ;;
G) gpu
  probe 400 hits graph_hits_probe.py ;;
H) gpu
  probe 300 backward backward_host_probe.py ;;
I) gpu
  probe 300 forward forward_host_probe.py ;;
J) gpu
  probe 300 step graph_step_probe.py ;;
K) gpu
  { layer "ConvTranspose3d(32, 64, (3, 5, 5))" --input 16,32,64,64,64 --backward --dtype bfloat16
    layer "ConvTranspose3d(32, 64, 3, stride=2, padding=1, dilation=2)" --input 16,32,16,32,32 --backward --dtype bfloat16
    layer "ConvTranspose3d(32, 16, (3, 5, 7))" --input 16,32,16,32,64 --backward --dtype bfloat16
    layer "ConvTranspose2d(32, 32, (3, 7), padding=(1, 3))" --input 8,32,512,1024 --backward --dtype bfloat16
    layer "ConvTranspose1d(32, 64, 3, stride=2, padding=1, dilation=2)" --input 16,32,131072 --backward --dtype bfloat16
    layer "ConvTranspose3d(48, 24, 3)" --input 8,48,96,96,96 --backward --dtype bfloat16
  } | tee $O/layers.log ;;
L) gpu
  timeout 400 python3 benches/zoo_rows.py vae-decoder:bf16-autocast:channels_last:train \
    fcn32s:bf16-autocast:channels_last:forward fcn32s:bf16-autocast:channels_last:train \
    depthwise:bf16-autocast:channels_last:forward depthwise:bf16-autocast:channels_last:train \
    --layers 2>&1 | grep -v "Warn\|_warn_once" > $O/rows.log; grep -v "^ \|^$\|^[a-z_]*:$\|^layer\|^---\|^whole\|^gemmconv.convert" $O/rows.log ;;
M) gpu
  t graphs tests/test_cuda_graphs.py; count $O/graphs.log | tee $O/counts.txt; tail -1 $O/graphs.log
  table bench-train-bf16 --backward --dtype bfloat16 --repeats 10
  table bench-train --backward --repeats 10 ;;
N) gpu
  probe 200 turns turns_probe.py ;;
O) gpu
  for i in 1 2 3 4; do layer "ConvTranspose2d(32, 64, 3, stride=5, padding=1, dilation=2)" --input 16,32,64,128 --backward --dtype bfloat16 | grep -A14 "== gemmconv"; done | tee $O/layers.log ;;
P) gpu
  TB=150 table bench-fwd
  TB=150 table bench-fwd-cl --channels-last ;;
Q) gpu
  probe 250 turns turns_probe.py 3d-stride2-dil2,3d-3x5x7,1d-dil3,2d-3x7-512 --forward --dtype float32 ;;
R) gpu
  for p in "sample_trace_probe.py dcgan:float32:NCHW:forward" "zoo_profile.py dcgan:float32:NCHW:forward" \
      "runtime_probe.py dcgan:float32:NCHW:train" "graph_hits_probe.py dcgan:float32:NCHW:forward" \
      "backward_host_probe.py" "forward_host_probe.py" "graph_step_probe.py" \
      "turns_probe.py 2d-stride5-dil2" "copies_probe.py dcgan float32 NCHW forward"; do
    echo "== $p"; OUT=$O timeout 120 python3 benches/$p 2>&1 | grep -v "Warn\|_warn_once" | tail -4; done 2>&1 | tee $O/smoke.log ;;
esac
