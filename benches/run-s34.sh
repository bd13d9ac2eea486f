#!/usr/bin/env bash
# Session 34's device calls (outputs under $OUT/<call>; logs kept in benches/results/s34/).
#   P: host time A/B, this tree against scratch/base (the session's starting commit, carried):
#      overhead.py's module calls and steps, zoo_probe.py's host-bound variants; then the
#      depthwise decoder's layers (convert's per-layer table; one layer's kernels).
#   A: the depthwise kernel's CUDA tests and layers (benches/layer.py), then G.
#   B: the depthwise kernel's CUDA tests and layers again, then the zoo's depthwise, DCGAN, VAE.
#   C: the CUDA tests, depthwise first, within the call's limit.
#   D: the zoo's U-Nets, HiFi-GAN and FCN-32s, then the CUDA tests C did not reach.
#   T: CUDA tests ($TESTS, all by default).  G: the tables.  Z: the zoo ($MODELS).
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
case "$1" in
P)
  for code in scratch/base .; do
    echo "=== $code" | tee -a $O/overhead.log
    PYTHONPATH=$code timeout 60 python3 benches/overhead.py >> $O/overhead.log 2>&1
    PYTHONPATH=$code timeout 60 python3 benches/overhead.py --train >> $O/overhead.log 2>&1
    PYTHONPATH=$code timeout 60 python3 benches/overhead.py --train --channels-last >> $O/overhead.log 2>&1
  done; cat $O/overhead.log
  for code in scratch/base .; do
    echo "=== $code" | tee -a $O/zoo.log
    PYTHONPATH=$code timeout 150 python3 benches/zoo_probe.py $PROBE 2>&1 | grep "ms: torch" | tee -a $O/zoo.log
  done
  export PYTHONPATH=.
  timeout 90 python3 -m gemmconv bench --models --model depthwise --layers > $O/depthwise.log 2>&1; cat $O/depthwise.log
  for dt in float32 bfloat16; do for cl in "" --channels-last; do
    timeout 30 python3 benches/layer.py "ConvTranspose2d(32, 32, 4, stride=2, padding=1, groups=32, bias=False)" --input 16,32,128,128 --dtype $dt $cl 2>&1 | tee -a $O/layer.log
  done; done ;;
A)   # the depthwise kernel: its CUDA tests, its layers against torch, then the tables
  export PYTHONPATH=.
  timeout 200 python3 -m pytest -q -m cuda -p no:cacheprovider tests/test_cuda_depthwise.py > $O/tests.log 2>&1; tail -4 $O/tests.log
  for dt in float32 bfloat16; do for cl in "" --channels-last; do for shape in "32, 32, 4, stride=2, padding=1, groups=32, bias=False):16,32,128,128" "256, 256, 4, stride=2, padding=1, groups=256, bias=False):16,256,16,16"; do
    timeout 30 python3 benches/layer.py "ConvTranspose2d(${shape%%:*}" --input ${shape##*:} --dtype $dt $cl 2>&1 | grep -v Warn | tee -a $O/layer.log
  done; done; done
  bash benches/run-s34.sh G ;;
B)   # the depthwise kernel again (blocks of rows): its CUDA tests, its layers, then the zoo's depthwise, DCGAN and VAE
  export PYTHONPATH=.
  timeout 240 python3 -m pytest -q -x -m cuda -p no:cacheprovider tests/test_cuda_depthwise.py > $O/tests.log 2>&1; tail -4 $O/tests.log
  for dt in float32 bfloat16; do for cl in "" --channels-last; do for shape in "32, 32, 4, stride=2, padding=1, groups=32, bias=False):16,32,128,128" "256, 256, 4, stride=2, padding=1, groups=256, bias=False):16,256,16,16"; do
    timeout 30 python3 benches/layer.py "ConvTranspose2d(${shape%%:*}" --input ${shape##*:} --dtype $dt $cl 2>&1 | grep -v Warn | tee -a $O/layer.log
  done; done; done
  for m in depthwise dcgan vae; do
    timeout 150 python3 -m gemmconv bench --models --model $m > $O/$m.log 2>&1; grep -A12 "^model " $O/$m.log | grep -v "^model\|^---"
  done ;;
C)   # the CUDA tests, the depthwise kernel's first, as far as the call's limit lets them go
  export PYTHONPATH=.
  timeout ${TT:-540} python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_depthwise.py tests/test_cuda_graphs.py tests/test_cuda_replay.py tests/test_cuda.py tests/test_cuda_channels_last.py tests/test_cuda_fused.py tests/test_cuda_reuse.py > $O/tests.log 2>&1; tail -3 $O/tests.log; grep -c PASSED $O/tests.log; grep -c SKIPPED $O/tests.log; grep FAILED $O/tests.log | head -30; grep -o "tests/test_cuda[a-z_]*.py" $O/tests.log | uniq -c ;;
D)   # the zoo's other models, then the CUDA tests C did not reach
  export PYTHONPATH=.
  for m in unet2d unet3d hifigan fcn32s; do
    timeout 130 python3 -m gemmconv bench --models --model $m > $O/$m.log 2>&1; grep -A12 "^model " $O/$m.log | grep -v "^model\|^---"
  done
  timeout ${TT:-200} python3 -m pytest -v -m cuda -p no:cacheprovider tests/test_cuda_reuse.py tests/test_cuda_fused.py > $O/tests.log 2>&1
  grep -E "PASSED|SKIPPED|FAILED|ERROR" $O/tests.log | awk '{print $1, $2}' | sed 's/::[^ ]* / /' | sort | uniq -c ;;
T)
  export PYTHONPATH=.
  timeout ${TT:-580} python3 -m pytest -q -m cuda -p no:cacheprovider ${TESTS:-tests} > $O/tests.log 2>&1; tail -15 $O/tests.log ;;
G)
  export PYTHONPATH=.
  timeout 60 python3 -m gemmconv bench --full --channels-last > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 70 python3 -m gemmconv bench --full > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log
  timeout 120 python3 -m gemmconv bench --full --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 130 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log ;;
Z)
  export PYTHONPATH=.
  for m in ${MODELS:-dcgan unet2d unet3d hifigan fcn32s vae depthwise}; do
    timeout ${TZ:-200} python3 -m gemmconv bench --models --model $m > $O/$m.log 2>&1; grep -A12 "^model " $O/$m.log | grep -v "^model\|^---"
  done ;;
esac
