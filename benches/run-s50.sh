#!/usr/bin/env bash
# Session 50's device calls (outputs under $OUT/<call>; logs kept in benches/results/s50/).
#   A: do our graphs cost a GPU-paced model? (graph_ab_probe.py: converted models with
#      graphs on and paused, paired against torch's); which VAE decoder layers lose in the
#      model (in_model_probe.py); then the CUDA tests the two review mends touch
#      (test_cuda_replay, test_cuda_graphs).
#   B: where a converted model's step spends host time, module by module (issue_probe.py),
#      and graph_ab_probe.py's NCHW row (A's ran channels_last twice).
#   C: issue_probe.py again, every module listed, steps alone and in a row.
#   D: a module's steady call piece by piece, planar and channels_last (steady_probe.py);
#      issue_probe.py with the garbage collector off too.
#   E: issue_probe.py with the collector's runs and time a step counted.
#   F: issue_probe.py with a third model: converted, its steps with gemmconv's graphs paused.
#   G: issue_probe.py with the caching allocator's cudaMalloc and cudaFree calls a step;
#      then every CUDA test file (after the review mends).
#   H: cProfile of a steady channels_last layer call, without and with grad, and its step.
#   I: the 2-D U-Net's k2 s2 up-convolutions kernel by kernel (layer.py), where its
#      channels_last training step read 0.55-0.94x per layer in session 49's zoo.
#   J: a channels_last bias gradient's sum, formulation by formulation (channel_sums_probe.py).
#   K: after 145 (channel_sums by 32 rows side by side): the U-Net's last up-convolution
#      kernel by kernel, the code before (ab_old/, carried untracked) and after; the CUDA
#      tests of channels_last backwards (test_cuda_channels_last, _replay, _reuse).
#   L: issue_probe.py with autograd's device threads off too (what a C++ node could save).
#   M: the 17 cases' tables after this session's changes: forward NCHW, float32 training.
#   N: the CUDA test of 145 at 2^19 positions (test_cuda_channels_last -k many_positions).
#   O: a whole training step captured as one CUDA graph by the user, torch's model against
#      the converted one (whole_graph_probe.py).
#   P: its CUDA test (test_cuda_graphs -k captured_whole).
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu, all_tests, table, probe, zoo_model
case "$1" in
A) gpu
  probe 200 graph_ab graph_ab_probe.py
  probe 120 in_model in_model_probe.py vae:float32:channels_last:forward
  TT=240 t replay tests/test_cuda_replay.py &
  TT=240 t graphs tests/test_cuda_graphs.py &
  summary ;;
B) gpu
  probe 200 issue issue_probe.py
  probe 60 graph_ab graph_ab_probe.py vae:float32:NCHW:forward ;;
C) gpu
  probe 300 issue issue_probe.py 20 ;;
D) gpu
  probe 200 steady steady_probe.py
  probe 300 issue issue_probe.py 20 vae:float32:channels_last:forward vae:float32:channels_last:train \
    dcgan:float32:channels_last:train ;;
E) gpu
  probe 300 issue issue_probe.py 20 dcgan:float32:channels_last:train vae:float32:channels_last:train \
    vae:float32:channels_last:forward ;;
F) gpu
  probe 300 issue issue_probe.py 20 vae:float32:channels_last:train vae:float32:NCHW:train \
    dcgan:float32:channels_last:train vae:float32:channels_last:forward ;;
G) gpu
  probe 100 issue issue_probe.py 15 vae:float32:channels_last:train dcgan:float32:channels_last:train \
    vae:float32:channels_last:forward
  all_tests ;;
H) gpu
  probe 120 steady steady_probe.py --profile ;;
I) gpu
  U3="ConvTranspose2d(128, 64, 2, stride=2)"; U0="ConvTranspose2d(1024, 512, 2, stride=2)"
  layer "$U3" --input 8,128,128,128 --backward --channels-last
  layer "$U3" --input 8,128,128,128 --backward
  layer "$U0" --input 8,1024,16,16 --backward --channels-last
  layer "$U3" --input 8,128,128,128 --backward --channels-last --dtype bfloat16
  layer "$U0" --input 8,1024,16,16 --channels-last --dtype bfloat16 ;;
J) gpu
  probe 150 sums channel_sums_probe.py ;;
K) gpu
  U3="ConvTranspose2d(128, 64, 2, stride=2)"
  for code in ab_old . ab_old .; do for dt in float32 bfloat16; do
    echo "== code $code"; PYTHONPATH=$code layer "$U3" --input 8,128,128,128 --backward --channels-last --dtype $dt
  done; done 2>&1 | tee $O/layers.log | grep "==\|reduce_kernel"
  t cl tests/test_cuda_channels_last.py &
  t replay tests/test_cuda_replay.py &
  t reuse tests/test_cuda_reuse.py &
  summary ;;
L) gpu
  probe 200 issue issue_probe.py 15 dcgan:float32:channels_last:train vae:float32:channels_last:train \
    vae:float32:NCHW:train ;;
M) gpu
  table bench-fwd; table bench-train --backward ;;
N) gpu
  TT=200 t wide tests/test_cuda_channels_last.py -k many_positions; count $O/wide.log; tail -1 $O/wide.log ;;
O) gpu
  probe 200 whole whole_graph_probe.py ;;
P) gpu
  TT=150 t whole tests/test_cuda_graphs.py -k captured_whole; count $O/whole.log; tail -1 $O/whole.log ;;
esac
