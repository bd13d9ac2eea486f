#!/usr/bin/env bash
# Session 29's device calls (outputs under benches/results/s29/<call>).
#   N, T, F1, F2: session 28's letters (benches/run-s28.sh) on its final code, on an H200:
#      N the copy-engine probe, the float32 weight-gradient probe and the float32 tables,
#      T every CUDA test, F2 bfloat16 training and the zoo, F1 the channels_last forward.
#   D: diagnostics. The fused kernels on the 3-D stride-1 cases (fused3d_probe.py), where
#      DCGAN's and the VAE decoder's converted forward spends its time (model_profile.py),
#      and the 2-D U-Net's layers as convert(model, sample=x) measured them.
#   E: each gradient's error on the 3-D cases (fused3d_error.py), and the host time of a
#      U-Net up-conv's bfloat16 channels_last training step (train_host_profile.py).
#   W: the fused forward with warp specialization (fwd_ws_probe.py, commit ef9816e; it gave no
#      row within its 150 s, a hang suspected, and was taken out again); the fused route's CUDA
#      tests and the bfloat16 training table after the weight gradient's chain cap and the
#      3-D 16-bit fused backward.
#   X1, X2: the final code: every CUDA test, the float32 training and forward tables (X1);
#      the channels_last forward table and the zoo (X2). bfloat16 training: run W. X1's tests
#      passed their 400 s at 3483 of 3777 (3322 passed, 161 skipped, none failed): X2 runs
#      the rest, tests/test_cuda_reuse.py, whole.
#   U: the 2-D U-Net again with --layers: X2's convert(model, sample=x) swapped its four
#      up-convs in the bfloat16 channels_last training step, which then ran 0.86x.
# Prepared for the next session: the code since X2 changed only probes and docs, so no CUDA
# test is owed for it. tma_offset_probe.py now runs each start in its own process (N's run
# of it lost the context at the first start). The whole CUDA suite takes about 420 s on an
# H200 now: give it a call of its own.
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader
case "$1" in
D)
  timeout 200 python3 benches/fused3d_probe.py > $O/fused3d.log 2>&1; cat $O/fused3d.log
  timeout 100 python3 benches/model_profile.py > $O/profile.log 2>&1; grep "a call" $O/profile.log
  timeout 250 python3 -m gemmconv bench --models --model unet2d --layers --json $O/unet2d.json > $O/unet2d.log 2>&1; tail -12 $O/unet2d.log ;;
E)
  timeout 150 python3 benches/fused3d_error.py > $O/error.log 2>&1; cat $O/error.log
  timeout 100 python3 benches/train_host_profile.py > $O/host.log 2>&1; head -100 $O/host.log ;;
W)
  timeout 150 python3 benches/fwd_ws_probe.py > $O/ws.log 2>&1; cat $O/ws.log
  timeout 200 python3 -m pytest -q -m cuda tests/test_cuda_fused.py -p no:cacheprovider > $O/tests.log 2>&1; tail -4 $O/tests.log
  timeout 130 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16.json > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log ;;
X1)
  timeout 400 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -4 $O/tests.log
  timeout 110 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 60 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log ;;
X2)
  timeout 80 python3 -m pytest -q -m cuda tests/test_cuda_reuse.py -p no:cacheprovider > $O/tests-reuse.log 2>&1; tail -2 $O/tests-reuse.log
  timeout 45 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log
  timeout 450 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log ;;
U)
  timeout 280 python3 -m gemmconv bench --models --model unet2d --layers --json $O/unet2d.json > $O/unet2d.log 2>&1; grep -A3 "train bf16-autocast channels_last ...$" $O/unet2d.log; tail -14 $O/unet2d.log ;;
esac
