#!/usr/bin/env bash
# Session 26's H200 calls (outputs under benches/results/s26/<call>).
#   A: does a call wait for the GPU (sync_probe.py: host time per call with the GPU idle and
#      busy, zoo models); cuBLASLt against the legacy call on batched products
#      (lt_probe.py batched).
#   B: where DCGAN's training step spends its host time (host_profile.py), three variants.
#   C: the samples side by side through a copy or a batched product (batched_probe.py); the
#      FCN-32s layer's kernels in bfloat16, NCHW and channels_last (layer.py).
#   D: batched_probe.py again, the GPU timed alone; FCN-32s's layer after the pitched copies
#      (fcn_probe.py, layer.py in bfloat16 and float32 channels_last).
#   E: FCN-32s's layer with its channels zero-padded (fcn_probe.py, layer.py channels_last
#      in both dtypes, forward and backward); the channels_last CUDA tests.
#   T2: every CUDA test, after the samples side by side came from batched products.
#   G: zoo models with the batched products on and off in turns (batched_probe.py models),
#      and the zoo (bench --models) on T2's code.
#   T: every CUDA test (after E's code and the forward replay with padded channels).
#   F: the 17 cases, forward NCHW and channels_last, and training, on T's code.
#   Z: the zoo (python -m gemmconv bench --models), on T's code.
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
case "$1" in
A)
  timeout 300 python3 benches/sync_probe.py > $O/sync.log 2>&1; grep -v "Warn\|warn" $O/sync.log | head -80
  timeout 200 python3 benches/lt_probe.py batched > $O/batched.log 2>&1; grep "|" $O/batched.log ;;
B)
  for v in "float32 NCHW" "float32 CL" "bfloat16 NCHW"; do
    f=$O/profile-${v// /-}.log
    timeout 150 python3 benches/host_profile.py dcgan $v > $f 2>&1; grep -v "Warn\|warn" $f | head -40
  done ;;
C)
  timeout 300 python3 benches/batched_probe.py > $O/batched.log 2>&1; grep "|" $O/batched.log
  for cl in "" --channels-last; do
    timeout 60 python3 benches/layer.py "ConvTranspose2d(21, 21, 64, stride=32, padding=16, bias=False)" --input 8,21,16,16 --dtype bfloat16 $cl > $O/fcn$cl.log 2>&1; grep -v "Warn\|warn" $O/fcn$cl.log
  done ;;
D)
  timeout 300 python3 benches/batched_probe.py > $O/batched.log 2>&1; grep "|" $O/batched.log
  timeout 120 python3 benches/fcn_probe.py > $O/fcn.log 2>&1; grep "|" $O/fcn.log
  for dt in bfloat16 float32; do
    timeout 60 python3 benches/layer.py "ConvTranspose2d(21, 21, 64, stride=32, padding=16, bias=False)" --input 8,21,16,16 --dtype $dt --channels-last > $O/fcn-$dt.log 2>&1; grep -v "Warn\|warn" $O/fcn-$dt.log
  done ;;
E)
  timeout 120 python3 benches/fcn_probe.py > $O/fcn.log 2>&1; grep "|" $O/fcn.log
  for dt in bfloat16 float32; do for bw in "" --backward; do
    timeout 60 python3 benches/layer.py "ConvTranspose2d(21, 21, 64, stride=32, padding=16, bias=False)" --input 8,21,16,16 --dtype $dt --channels-last $bw > $O/fcn-$dt$bw.log 2>&1; grep -v "Warn\|warn" $O/fcn-$dt$bw.log | head -8
  done; done
  timeout 300 python3 -m pytest -q -m cuda tests/test_cuda_channels_last.py -p no:cacheprovider -x > $O/tests.log 2>&1; tail -3 $O/tests.log ;;
F)
  timeout 100 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log
  timeout 100 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log
  timeout 200 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log ;;
Z)
  timeout 500 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log ;;
T2)
  timeout 590 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -3 $O/tests.log ;;
G)
  timeout 240 python3 benches/batched_probe.py models > $O/ab.log 2>&1; grep "|" $O/ab.log
  timeout 330 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log ;;
T)
  timeout 590 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -3 $O/tests.log ;;
esac
