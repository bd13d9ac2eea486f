#!/usr/bin/env bash
# Session 51's device calls (outputs under $OUT/<call>; logs kept in benches/results/s51/).
#   A: every CUDA test file (owed since 145 and the whole-step capture test's final form),
#      and what a C++ extension built at first use would find there (compiler, ninja,
#      Python headers, torch's CUDA graph handles).
#   C: the zoo's DCGAN, VAE decoder, FCN-32s head, depthwise decoder and 2-D U-Net.
#   D: the C++ autograd node (_node.py): its build, its CUDA test, the CUDA tests of module
#      calls, and the converted models' training steps with it and without (node_probe.py).
#   E: D's node test, mended (it asserted the node on the module's first call), and the A/B.
#   F-H (not run in session 51: written for the next): the tests written after E and every
#      CUDA test file; the zoo with the C++ node and its A/B.
#   B: the 17 cases' tables: forward NCHW and channels_last, float32 and bfloat16 training.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu, all_tests, table, probe, zoo_model
case "$1" in
A) gpu
  { which g++ c++ ninja nvcc; g++ --version | head -1; python3 -c "import sysconfig, os, torch; \
print(torch.__version__, os.path.exists(sysconfig.get_paths()['include'] + '/Python.h'), \
hasattr(torch.cuda.CUDAGraph, 'raw_cuda_graph_exec'), torch._C._GLIBCXX_USE_CXX11_ABI)"; } 2>&1 | tee $O/ext.txt
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  grep -h "captured_whole" $OUT/P/*.log | tee $O/whole.txt; rm -rf $OUT/P ;;
B) gpu   # the 17 cases' four tables on the first H200 since session 38
  TB=100 table bench-fwd; TB=110 table bench-fwd-cl --channels-last
  TB=180 table bench-train --backward --repeats 10; TB=180 table bench-train-bf16 --backward --dtype bfloat16 --repeats 10 ;;
C) gpu   # the zoo's first five models (session 49's J)
  zoo_model dcgan 85; zoo_model vae 85; zoo_model fcn32s 115; zoo_model depthwise 75
  zoo_model unet2d 190 ;;
D) gpu   # the C++ autograd node: its build, its test, the CUDA tests of module calls, its A/B
  { time python3 -c "from gemmconv import _node; print(_node.load())"; } 2>&1 | tail -4 | tee $O/build.txt
  TT=150 t node tests/test_cuda_replay.py -k "steady_training_step or captured_whole"; count $O/node.log; tail -1 $O/node.log
  TT=240 t graphs tests/test_cuda_graphs.py & TT=240 t replay tests/test_cuda_replay.py &
  TT=240 t cl tests/test_cuda_channels_last.py & TT=240 t reuse tests/test_cuda_reuse.py &
  summary
  probe 150 node node_probe.py 15 ;;
E) gpu   # D's node test again (its first step was no steady call: a test error), and the A/B again
  { time python3 -c "from gemmconv import _node; print(_node.load())"; } 2>&1 | tail -4 | tee $O/build.txt
  TT=100 t node-test tests/test_cuda_replay.py -k "steady_training_step"; count $O/node-test.log; tail -1 $O/node-test.log
  probe 70 node node_probe.py 10 dcgan:float32:channels_last:train vae:float32:channels_last:train ;;
F) gpu   # written for the next session: the tests written after E, then every CUDA test file
  TT=150 t node-tests tests/test_cuda_replay.py -k "steady_training_step or forward_mode"
  count $O/node-tests.log; tail -1 $O/node-tests.log
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P ;;
G) gpu   # the zoo with the C++ node, the models C ran (FCN-32s and the depthwise decoder: C's limits were too short)
  zoo_model dcgan 90; zoo_model vae 90; zoo_model unet2d 190; probe 150 node node_probe.py 15 ;;
H) gpu
  zoo_model fcn32s 200; zoo_model depthwise 150; zoo_model hifigan 240 ;;
esac
