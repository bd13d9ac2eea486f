#!/usr/bin/env bash
# Session 52's device calls (outputs under $OUT/<call>; logs kept in benches/results/s52/).
#   A: the C++ node's tests in their final form (session 51's F), the CUDA test files of
#      module calls beside them, and where a steady call's host time goes with the node
#      (steady_probe.py), the VAE decoder's step module by module (issue_probe.py), and the
#      node's A/B on the VAE decoder (node_probe.py).
#   B: 147 (the steady forward's graph launched from C++): its tests and the CUDA test files
#      of module calls; its pieces (steady_probe.py) and its A/B on the zoo's small models
#      (node_probe.py: C++ forward and node, Python forward, Python node). The test logs are
#      kept in all.txt only (a call brings back a few files).
#   C: the zoo's DCGAN, VAE decoder and 2-D U-Net with 147; the VAE decoder's channels_last
#      training step module by module again (issue_probe.py: what is left of its loss).
#   D: why convert(sample=)'s whole-model timing read DCGAN's and the VAE decoder's training
#      steps with every layer swapped at 0.87-0.93x where the zoo's turns read 1.05-1.29x
#      (choose_probe.py), then every CUDA test file on 147's code.
#   E: 148 (the C++ node frees the gradients of its miss before the Python backward runs):
#      the CUDA test files of module calls and graphs, then the zoo's DCGAN and VAE decoder.
#   F-H (written for the next session, not run in session 52): F, the whole-step capture
#      test that failed once in E (its message now gives the eager step's own spread) and
#      every CUDA test file; G, the zoo's 2-D U-Net, FCN-32s and depthwise decoder; H,
#      HiFi-GAN and the 17 cases' four tables. The 3-D U-Net its own call (about 320 s).
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, summary, layer, gpu, all_tests, table, probe, zoo_model
case "$1" in
A) gpu
  { time python3 -c "from gemmconv import _node; print(_node.load())"; } 2>&1 | tail -4 | tee $O/build.txt
  TT=200 t node-tests tests/test_cuda_replay.py -k "steady_training_step or forward_mode" &
  TT=240 t graphs tests/test_cuda_graphs.py & TT=240 t replay tests/test_cuda_replay.py &
  TT=240 t cl tests/test_cuda_channels_last.py & TT=240 t reuse tests/test_cuda_reuse.py &
  summary; count $O/node-tests.log
  probe 60 steady steady_probe.py; probe 40 steady-profile steady_probe.py --profile
  probe 100 issue issue_probe.py 10 vae:float32:channels_last:train vae:float32:NCHW:train
  probe 80 node node_probe.py 10 vae:float32:channels_last:train vae:bfloat16:channels_last:train ;;
B) gpu
  { time python3 -c "from gemmconv import _node; print(_node.load())"; } 2>&1 | tail -4 | tee $O/build.txt
  TT=240 t graphs tests/test_cuda_graphs.py & TT=240 t replay tests/test_cuda_replay.py &
  TT=240 t cl tests/test_cuda_channels_last.py & TT=240 t reuse tests/test_cuda_reuse.py &
  summary; grep -E "^(FAILED|ERROR)" $O/all.txt | head -30; rm $O/{graphs,replay,cl,reuse}.log
  probe 70 steady steady_probe.py
  probe 170 node node_probe.py 8 vae:float32:channels_last:train vae:bf16-autocast:channels_last:train \
    dcgan:float32:channels_last:train vae:float32:NCHW:train vae:float32:channels_last:forward ;;
C) gpu
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  zoo_model dcgan 90; zoo_model vae 90; zoo_model unet2d 190
  probe 100 issue issue_probe.py 10 vae:float32:channels_last:train ;;
D) gpu
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  { timeout 45 python3 benches/choose_probe.py dcgan:train:float32:NCHW
    timeout 45 python3 benches/choose_probe.py vae:train:float32:channels_last; } 2>&1 | \
    grep -v "Warn\|_warn_once" > $O/choose.log; grep -E "^(in turns|C\+\+|graphs.launch|whole)" $O/choose.log
  all_tests; cat $O/P.txt | tail -20 ;;
E) gpu
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  TT=200 t replay tests/test_cuda_replay.py & TT=200 t graphs tests/test_cuda_graphs.py &
  summary; grep -E "^(FAILED|ERROR)" $O/all.txt | head -30; rm $O/{graphs,replay}.log
  zoo_model dcgan 90; zoo_model vae 90 ;;
F) gpu
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  for i in 1 2 3; do TT=200 t capture-$i tests/test_cuda_graphs.py -k captured_whole & done
  all_tests; wait; tail -12 $O/P.txt
  cat $O/capture-*.log > $O/capture.txt; rm $O/capture-*.log
  grep -E "passed|failed|against itself" $O/capture.txt ;;
G) gpu
  python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1
  zoo_model unet2d 190; zoo_model fcn32s 200; zoo_model depthwise 150 ;;
H) gpu
  zoo_model hifigan 240
  TB=100 table bench-fwd; TB=110 table bench-fwd-cl --channels-last ;;
esac
