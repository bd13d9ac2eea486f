#!/usr/bin/env bash
# Session 35's device calls (outputs under $OUT/<call>; logs kept in benches/results/s35/).
#   A: the two strided-bias tests session 34 left unrun on a GPU; benches/depthwise_probe.py;
#      the depthwise decoder's layers as convert(sample=) times them (forward and step).
#   B: the depthwise backward kernel: test_cuda_depthwise, the probe (forward and backward),
#      the autocast probe, the depthwise decoder's layers and rows.
#   S, H, E: probes of the depthwise step (host time, autograd, graphs).  P: every CUDA test,
#   in parallel processes.  C, D: the CUDA tests in two halves.  G: the tables.  Z: the zoo
#   ($MODELS).  F: G, then the zoo's depthwise, DCGAN and VAE.
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export PYTHONPATH=.
source benches/run-lib.sh   # count, t, depthwise_tests, summary
case "$1" in
A)
  timeout 100 python3 -m pytest -v -m cuda -p no:cacheprovider "tests/test_cuda_depthwise.py::test_depthwise_kernel_reads_strided_input_and_bias" \
    "tests/test_cuda_fused.py::test_fused_route_reads_a_strided_bias" > $O/tests.log 2>&1; count $O/tests.log
  timeout 150 python3 benches/depthwise_probe.py 512 1024 2048 4096 2>&1 | grep -v Warn | tee $O/probe.log
  timeout 150 python3 -m gemmconv bench --models --model depthwise --layers > $O/layers.log 2>&1; cat $O/layers.log ;;
B)
  timeout ${TT:-300} python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_depthwise.py > $O/tests.log 2>&1; count $O/tests.log
  timeout 120 python3 benches/depthwise_probe.py --backward 1024 2048 4096 2>&1 | grep -v Warn | tee $O/probe-backward.log
  timeout 60 python3 benches/autocast_probe.py > $O/autocast.log 2>&1; grep "^(16" $O/autocast.log
  timeout 150 python3 -m gemmconv bench --models --model depthwise --layers > $O/layers.log 2>&1; grep -A12 "^model " $O/layers.log ;;
S)   # the depthwise step's host time, and the backward probe
  for o in "" --channels-last; do timeout 100 python3 benches/depthwise_step_probe.py $o 2>&1 | grep -v Warn | tee -a $O/step.log; done
  timeout 200 python3 benches/depthwise_probe.py --backward ${SIZES:-2048:1024 2048:4096 2048:16384 1024:4096 4096:4096} 2>&1 | grep -v Warn | tee $O/probe-backward.log ;;
E)   # the depthwise kernels graphed: their CUDA tests, then the step probes
  timeout ${TT:-360} python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_depthwise.py "tests/test_cuda_graphs.py" -k "depthwise or not graphed" > $O/tests.log 2>&1; count $O/tests.log
  for o in "" --channels-last; do timeout 100 python3 benches/autograd_probe.py $o 2>&1 | grep -v Warn | tee -a $O/autograd.log; done
  for o in "" --channels-last; do timeout 100 python3 benches/depthwise_step_probe.py $o 2>&1 | grep -v Warn | grep "us$" | tee -a $O/step.log; done ;;
H)   # a small layer's step on the host: autograd Functions against torch's module
  for o in "" --channels-last; do timeout 100 python3 benches/autograd_probe.py $o 2>&1 | grep -v Warn | tee -a $O/autograd.log; done ;;
P)   # every CUDA test file, in parallel processes (Triton's compiles are the host's work)
  depthwise_tests
  t cuda tests/test_cuda.py &
  t cl tests/test_cuda_channels_last.py &
  t graphs tests/test_cuda_graphs.py tests/test_cuda_replay.py &
  t fused tests/test_cuda_fused.py &
  t reuse tests/test_cuda_reuse.py &
  summary ;;
R)   # after the review's refactor of the graphed backward: the graph and replay tests, the depthwise table in bfloat16, and the rest of test_cuda_depthwise
  t graphs tests/test_cuda_graphs.py &
  t replay tests/test_cuda_replay.py &
  t dw-bf16 tests/test_cuda_depthwise.py -k "bfloat16" &
  t dw-rest tests/test_cuda_depthwise.py -k "not matches_float64" &
  summary
  N() { n=$1; shift; timeout 120 ncu --kernel-name regex:depthwise --launch-skip 4 --launch-count 2 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SourceCounters python3 benches/depthwise_ncu.py "$@" > $O/ncu-$n.txt 2>&1; }
  N planar; N cl --channels-last
  grep -h "depthwise_transposed\|Duration\|Memory Throughput\|DRAM Throughput\|Compute (SM) Throughput\|Registers Per\|Achieved Occupancy\|Theoretical Occupancy\|Executed Ipc A\|L1/TEX Hit\|L2 Hit" $O/ncu-*.txt | head -60 ;;
W)   # program sizes and warps of the depthwise kernels
  timeout 150 python3 benches/depthwise_probe.py 1024 1024:8 2048:8 2048 2>&1 | grep -v Warn | tee $O/probe-forward.log
  timeout 200 python3 benches/depthwise_probe.py --backward 2048:4096:4 2048:4096:8 4096:4096:8 1024:4096:4 1024:8192:4 2>&1 | grep -v Warn | tee $O/probe-backward.log ;;
V)   # the channels-innermost forward's programs doubled: test_cuda_depthwise and test_cuda_graphs, then the zoo's depthwise decoder
  depthwise_tests
  t graphs tests/test_cuda_graphs.py &
  summary
  MODELS=depthwise bash benches/run-s35.sh Z; cp $OUT/Z/depthwise.log $O/ ;;
U)   # the user's-graph test of a depthwise step, with test_cuda_graphs whole
  timeout 300 python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_graphs.py > $O/graphs.log 2>&1; count $O/graphs.log; tail -30 $O/graphs.log | grep -v PASSED ;;
K)   # the depthwise backward in chunks of pairs: its CUDA tests, then an FCN-like depthwise layer's step against torch and the column routes (scratch/base, carried)
  depthwise_tests
  t graphs tests/test_cuda_graphs.py &
  summary
  for code in scratch/base .; do for cl in "" --channels-last; do
    echo "== $code $cl" | tee -a $O/fcn.log
    PYTHONPATH=$code timeout 60 python3 benches/layer.py "ConvTranspose2d(21, 21, 64, stride=32, padding=16, groups=21, bias=False)" --input 8,21,16,16 --backward $cl 2>&1 | grep -v Warn | tee -a $O/fcn.log
  done; done ;;
L)   # the depthwise table's large-kernel cases after the channels_last routing rule
  timeout 150 python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_depthwise.py -k "fcn-like or large-kernel" > $O/tests.log 2>&1; count $O/tests.log; tail -1 $O/tests.log ;;
C)
  timeout ${TT:-540} python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_depthwise.py tests/test_cuda_graphs.py tests/test_cuda_replay.py tests/test_cuda.py tests/test_cuda_channels_last.py > $O/tests.log 2>&1; count $O/tests.log ;;
D)
  timeout ${TT:-220} python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_fused.py tests/test_cuda_reuse.py > $O/tests.log 2>&1; count $O/tests.log ;;
T)
  timeout ${TT:-580} python3 -m pytest -v -m cuda -p no:cacheprovider ${TESTS:-tests} > $O/tests.log 2>&1; count $O/tests.log ;;
G)
  timeout 60 python3 -m gemmconv bench --full --channels-last > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 70 python3 -m gemmconv bench --full > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log
  timeout 120 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 130 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log ;;
F)   # the tables, then the zoo's depthwise, DCGAN and VAE
  bash benches/run-s35.sh G
  MODELS="depthwise dcgan vae" bash benches/run-s35.sh Z ;;
Z)
  for m in ${MODELS:-dcgan unet2d unet3d hifigan fcn32s vae depthwise}; do
    timeout ${TZ:-200} python3 -m gemmconv bench --models --model $m $ZOPT > $O/$m.log 2>&1; grep -A12 "^model " $O/$m.log | grep -v "^model\|^---"
  done ;;
esac
