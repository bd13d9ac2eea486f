#!/usr/bin/env bash
# Session 27's H200 calls (outputs under benches/results/s27/<call>).
#   A: does the model bench's timer favour one of two identical models (timing_probe.py,
#      DCGAN and the VAE decoder); per layer of the small-layer models, forward, per call
#      and kernel time (host_probe.py layers); the 2-D U-Net's up-convolutions in
#      bfloat16 channels_last, forward and training, kernel by kernel (layer.py).
#      (Ran on an H100: the session's device time was nearly spent by an earlier try.)
#   B: the float32 fused weight gradient from shifted copies (wgrad_shifted_probe.py), and
#      the fused backward's CUDA tests.
# Prepared for the next session (not run in session 27: no device time left):
#   T: every CUDA test.
#   F: the 17 cases, float32 training and bfloat16 training, then the zoo.
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
case "$1" in
A)
  timeout 150 python3 benches/timing_probe.py dcgan vae > $O/timing.log 2>&1; grep "|" $O/timing.log
  timeout 200 python3 benches/host_probe.py layers > $O/layers.log 2>&1; grep "|" $O/layers.log | tail -70
  for l in "1024 512 16" "512 256 32" "256 128 64" "128 64 128"; do set -- $l
    for bw in "" --backward; do
      timeout 60 python3 benches/layer.py "ConvTranspose2d($1, $2, 2, stride=2)" --input 8,$1,$3,$3 --dtype bfloat16 --channels-last $bw > $O/unet-$1$bw.log 2>&1; grep -v "Warn\|warn" $O/unet-$1$bw.log | head -12
    done
  done ;;
B)
  timeout 100 python3 benches/wgrad_shifted_probe.py > $O/probe.log 2>&1; grep "|" $O/probe.log
  timeout 60 python3 -m pytest -q -m cuda tests/test_cuda_fused.py -k backward -x -p no:cacheprovider > $O/tests.log 2>&1; tail -3 $O/tests.log ;;
T)
  timeout 590 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -3 $O/tests.log ;;
F)
  timeout 200 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log
  timeout 150 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16.json > $O/bench-train-bf16.log 2>&1; grep geometric $O/bench-train-bf16.log
  timeout 240 python3 -m gemmconv bench --models --model unet --model fcn --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log ;;
esac
