#!/usr/bin/env bash
# Session 37's device calls (outputs under $OUT/<call>; logs kept in benches/results/s37/).
# Modes of run-s35.sh (P: every CUDA test in parallel processes; G: the tables; Z: the zoo,
# $MODELS) run through it.
#   A: whether our layers make their neighbours' host time dearer (context_probe.py).
#   B: the VAE decoder's float32 forward: host against GPU time, its layers' kernels.
#   C, D: the fused forward graphed, on the zoo's small layers (small_fused_probe.py).
#   E: every CUDA test file after the small 2-D rule, and the zoo's VAE decoder; F: DCGAN, U-Net.
#   G, H: the small 2-D rule on and off in one process (small_rule_probe.py).
#   I: one converted model in eight fresh processes (process_probe.py).
#   J: the VAE decoder's and DCGAN's layers, a training step each (layer_step_probe.py).
#   K: a layer's step channels_last against planar, host time (layer_host_profile.py).
#   L: what convert(sample=) measured (choose_probe.py).  M: the tables on the final code.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary
case "$1" in
A)
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  timeout 400 python3 benches/context_probe.py vae-decoder:forward:float32:channels_last \
    vae-decoder:train:float32:NCHW dcgan:forward:float32:NCHW 2>&1 | grep -v Warn | tee $O/context.log ;;
B)   # the VAE decoder's float32 channels_last forward: host against GPU time, per layer kernels
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  timeout 200 python3 benches/context_probe.py vae-decoder:forward:float32:channels_last vae-decoder:train:float32:NCHW \
    vae-decoder:forward:float32:NCHW 2>&1 | grep -v Warn | grep -v "^micro\|^  [ 0-9a-z+]*:" | tee $O/context.log
  timeout 120 python3 benches/mixed_probe.py vae-decoder:forward:float32:channels_last vae-decoder:forward:float32:NCHW 2>&1 | grep -v Warn > $O/mixed.log
  grep -i "kernel\|turns" $O/mixed.log | head -30
  i=0; for io in "512,512 16,512,4,4" "512,256 16,512,8,8" "256,128 16,256,16,16" "128,64 16,128,32,32" "64,32 16,64,64,64"; do
    set -- $io; i=$((i+1))
    for cl in --channels-last ""; do
      echo "== layer $i ($1) input $2 $cl"; timeout 60 python3 benches/layer.py "ConvTranspose2d($1, 3, 2, 1, output_padding=1)" --input $2 $cl 2>&1 | grep -v Warn
    done
  done | tee $O/layers.log ;;
C)   # the fused forward graphed (_FusedReplay.graphed): its tests, and on the zoo's small layers against the column route
  t graphs tests/test_cuda_graphs.py &
  t fused tests/test_cuda_fused.py &
  timeout 520 python3 benches/small_fused_probe.py 2>&1 | grep -v Warn | tee $O/small-fused.log
  summary ;;
D)   # C's probe again (fixed), the other models first
  timeout 560 python3 benches/small_fused_probe.py vae unet2d hifigan dcgan 2>&1 | grep -v "Warn\|_warn_once" | tee $O/small-fused.log ;;
E)   # the small 2-D rule (fused.small_preferred): every CUDA test file, then the zoo's VAE decoder
  bash benches/run-s35.sh P | tee $O/P.txt; cp $OUT/P/*.log $O/ 2>/dev/null
  MODELS="vae" bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/ ;;
F)   # the zoo's DCGAN and 2-D U-Net
  MODELS="dcgan unet2d" TZ=250 bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/ ;;
G)   # the small 2-D rule on and off, in turns in one process (small_rule_probe.py)
  cs=""; for m in vae-decoder dcgan unet2d; do for mode in forward train; do for p in float32 bf16-autocast; do for l in NCHW channels_last; do
    cs="$cs $m:$mode:$p:$l"; done; done; done; done
  timeout 560 python3 benches/small_rule_probe.py $cs 2>&1 | grep -v "Warn\|_warn_once" | tee $O/rule.log ;;
H)   # G's DCGAN rows and the VAE decoder's steps again, twice, in two processes
  cs=""; for mode in forward train; do for p in float32 bf16-autocast; do for l in NCHW channels_last; do
    cs="$cs dcgan:$mode:$p:$l"; done; done; done
  for i in 1 2; do timeout 250 python3 benches/small_rule_probe.py $cs vae-decoder:train:float32:channels_last \
    vae-decoder:train:bf16-autocast:NCHW 2>&1 | grep -v "Warn\|_warn_once" | tee $O/rule-$i.log; done ;;
I)   # one converted model in eight fresh processes: what differs in the slow ones (process_probe.py)
  for i in 1 2 3 4 5 6 7 8; do timeout 60 python3 benches/process_probe.py dcgan:forward:float32:NCHW 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/process.log; done ;;
J)   # the VAE decoder's and DCGAN's layers, a training step each: where ours lose (layer_step_probe.py)
  for m in vae dcgan; do for d in float32 bfloat16; do for l in CL NCHW; do
    timeout 100 python3 benches/layer_step_probe.py $m $d $l 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/steps.log; done; done; done ;;
K)   # a layer's step channels_last against planar: the host's time, by function
  for d in float32 bfloat16; do timeout 120 python3 benches/layer_host_profile.py $d 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/host.log; done ;;
L)   # what convert(sample=) measured where it kept torch's layers that the zoo timed slower (choose_probe.py)
  for i in 1 2; do timeout 120 python3 benches/choose_probe.py dcgan:forward:float32:NCHW 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/choose.log; done
  timeout 120 python3 benches/choose_probe.py vae-decoder:forward:float32:channels_last 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/choose.log ;;
M)   # the tables on the final code (the 17 cases meet none of this session's rules; run-s35.sh G)
  bash benches/run-s35.sh G | tee $O/G.txt; cp $OUT/G/*.log $O/ ;;
N)   # the probes after their shared helpers (lt_probe.zoo_config, process_probe.kernels) still run
  timeout 100 python3 benches/small_rule_probe.py dcgan:forward:float32:NCHW 2>&1 | grep -v "Warn\|_warn_once" | tee $O/probes.log
  timeout 60 python3 benches/process_probe.py dcgan:forward:float32:NCHW 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/probes.log
  timeout 100 python3 benches/choose_probe.py dcgan:forward:float32:NCHW 2>&1 | grep -v "Warn\|_warn_once" | tail -3 | tee -a $O/probes.log
  timeout 150 python3 benches/small_fused_probe.py hifigan 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/probes.log
  timeout 100 python3 benches/context_probe.py dcgan:forward:float32:NCHW 2>&1 | grep -v "Warn\|_warn_once" | tail -6 | tee -a $O/probes.log ;;
O)   # after the review's ConvTransposeArgs.output_elements: the fused, graph and explain-bearing CUDA tests
  t fused tests/test_cuda_fused.py &
  t graphs tests/test_cuda_graphs.py &
  t cl tests/test_cuda_channels_last.py &
  summary ;;
*) bash benches/run-s35.sh "$@" ;;
esac
