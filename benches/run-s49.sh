#!/usr/bin/env bash
# Session 49's device calls (outputs under $OUT/<call>; logs kept in benches/results/s49/).
#   A: why our small layers' steps take longer on a running GPU than their host time with
#      the GPU busy (live_probe.py: tiny graphs, DCGAN's layer, DCGAN's and the VAE
#      decoder's channels_last steps; the collector and device threads off).
#   B: does a graph's launch, or a step, cost more with many graphs kept? (live_probe.py
#      --crowded: 0, 100, 400, 1000 other graphs)
#   C: a small layer's step phase by phase (step_phases_probe.py).
#   D: after 142 (the precision read through torch's getter, the layout asked on a replay's
#      first call only): step_phases_probe.py, and --models, the code before (ab_old/, the
#      commit before, carried untracked) and after in turns.
#   E: every CUDA test file (after 142).
#   F: after 143 (a module's steady call): host_ab_probe.py, the code before 142 (ab_old/)
#      and after 143 in turns, two processes each.
#   G: the CUDA tests 143 touches: test_cuda_replay (its new module tests), test_cuda_graphs,
#      test_cuda_channels_last, test_cuda_reuse, test_cuda.py.
#   H: after 143, DCGAN's and the VAE decoder's layers one by one (host_ab_probe.py
#      --layers: paired steps, kernel time, host time), then both models in the zoo.
#   I: every CUDA test file (the final code).
#   J, K: the model zoo (bench --models, a model per process): J the small models and the
#      2-D U-Net, K HiFi-GAN and the 3-D U-Net.
#   L: the zoo's rows J did not reach in its time (zoo_rows.py): FCN-32s's and the depthwise
#      decoder's bfloat16 channels_last rows.
#   M: the VAE decoder's float32 channels_last forward, slower whole than layer by layer:
#      kernels, gaps between them and host time, torch's and converted (gaps_probe.py).
#   N: after 144 (a module keeps up to four calls): test_cuda_replay and test_cuda_graphs.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu, all_tests, table, probe, zoo_model
case "$1" in
A) gpu
  probe 500 live live_probe.py ;;
B) gpu
  probe 500 crowded live_probe.py --crowded ;;
C) gpu
  probe 300 phases step_phases_probe.py ;;
D) gpu
  for i in 1 2; do
    for v in old new; do
      p=.; [ $v = old ] && p=ab_old
      echo "### $v $i"; PYTHONPATH=$p timeout 120 python3 benches/step_phases_probe.py | grep "=="
      PYTHONPATH=$p timeout 200 python3 benches/step_phases_probe.py --models | grep -v "^NVIDIA"
    done
  done 2>&1 | tee $O/ab.log ;;
E) gpu
  all_tests ;;
F) gpu
  for i in 1 2; do
    for v in old new; do
      p=.; [ $v = old ] && p=ab_old
      echo "### $v $i"; PYTHONPATH=$p timeout 140 python3 benches/host_ab_probe.py 12 | grep "=="
    done
  done 2>&1 | tee $O/ab.log ;;
G) gpu
  t replay tests/test_cuda_replay.py &
  t graphs tests/test_cuda_graphs.py &
  t cl tests/test_cuda_channels_last.py &
  t reuse tests/test_cuda_reuse.py &
  t cuda tests/test_cuda.py &
  summary ;;
H) gpu
  probe 200 layers host_ab_probe.py 12 --layers
  zoo_model dcgan 120; zoo_model vae 150 ;;
I) gpu
  all_tests ;;
J) gpu
  zoo_model dcgan 85; zoo_model vae 85; zoo_model fcn32s 115; zoo_model depthwise 75
  zoo_model unet2d 200 ;;
K) gpu
  zoo_model hifigan 250; zoo_model unet3d 320 ;;
L) gpu
  timeout 400 python3 benches/zoo_rows.py fcn32s:bf16-autocast:channels_last:forward \
    fcn32s:bf16-autocast:channels_last:train depthwise:bf16-autocast:channels_last:forward \
    depthwise:bf16-autocast:channels_last:train 2>&1 | grep -v "Warn\|_warn_once" | tee $O/rows.log ;;
M) gpu
  probe 200 gaps gaps_probe.py vae:float32:channels_last:forward vae:float32:channels_last:train \
    dcgan:float32:channels_last:train ;;
N) gpu
  t replay tests/test_cuda_replay.py &
  t graphs tests/test_cuda_graphs.py &
  summary ;;
esac
