#!/usr/bin/env bash
# Session 25's H200 calls (outputs under benches/results/s25/<call>).
#   A: probes: which backward work costs more on autograd's device thread (lt_probe.py engine);
#      DCGAN's forward and training step by function (lt_probe.py model); the zoo's layers with
#      the fused route off (host_probe.py layers, columns only).
#   B: GPU tests after the GEMMs moved to cuBLASLt; Lt against the legacy call on DCGAN and the
#      VAE decoder (lt_probe.py ab).
#   C: the zoo (python -m gemmconv bench --models).
#   G: forwards that moved in C: Lt against legacy in one process (lt_probe.py ab-forward), and
#      session 24's code against this session's in alternating processes on DCGAN and the
#      depthwise decoder.
#   D: (not run; G and J took its place) session 24's code (benches/ab-old/gemmconv, from
#      git archive 20a492d, carried) against this session's, in alternating processes, on the
#      small-layer models; the 17 cases. G carries benches/ab-old likewise.
#   H: after the generic col2im took several planes a thread: FCN-32s's layer (fcn_probe.py),
#      the zoo's FCN-32s head, and tests/test_cuda.py.
#   I: every CUDA test, on the code before gemm.LT_MAX_BATCH (the last CUDA-side change).
#   J: FCN-32s's layer and head (the channels_last col2im's runs too), and the 17 cases
#      (forward NCHW and channels_last, training), on the same code.
# Before them, single runs of benches/lt_probe.py (default, pieces, backward, steps modes:
# results/s25/lt-probe.log, backward-pieces.log, step-pieces.log) and benches/numa_probe.sh
# (results/s25/numa/).
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=/tmp/o-$1; rm -rf $O; mkdir -p $O
case "$1" in
A)
  timeout 120 python3 benches/lt_probe.py engine > $O/engine.log 2>&1; grep -v Warn $O/engine.log | tail -12
  timeout 200 python3 benches/lt_probe.py model > $O/model.log 2>&1; grep "dcgan\|watched" $O/model.log
  timeout 200 python3 -c "import sys; sys.path.insert(0, 'benches'); from gemmconv import fused; fused.preferred = lambda a, i: False; import host_probe; sys.argv = ['host_probe', 'layers']; host_probe.main()" > $O/layers-columns.log 2>&1; grep " CL " $O/layers-columns.log | cut -c1-150 ;;
B)
  timeout 150 python3 benches/lt_probe.py ab > $O/ab.log 2>&1; grep "|" $O/ab.log
  timeout 420 python3 -m pytest -q -m cuda tests/test_cuda.py tests/test_cuda_replay.py tests/test_cuda_fused.py -p no:cacheprovider -x > $O/tests.log 2>&1; tail -5 $O/tests.log ;;
C)
  timeout 420 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log ;;
D)
  for i in 1 2; do
    for v in old new; do
      P=.; [ $v = old ] && P=benches/ab-old
      PYTHONPATH=$P timeout 100 python3 -m gemmconv bench --models --model dcgan --model vae-decoder --json $O/ab-$v-$i.json > $O/ab-$v-$i.log 2>&1; echo "$v $i"; grep "geometric mean" $O/ab-$v-$i.log
    done
  done
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log
  timeout 80 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log
  timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log ;;
G)
  timeout 240 python3 benches/lt_probe.py ab-forward > $O/ab-forward.log 2>&1; grep "|" $O/ab-forward.log
  for i in 1 2; do
    for v in old new; do
      P=.; [ $v = old ] && P=benches/ab-old
      PYTHONPATH=$P timeout 100 python3 -m gemmconv bench --models --model dcgan --model depthwise --json $O/ab-$v-$i.json > $O/ab-$v-$i.log 2>&1; echo "$v $i"; grep "forward" $O/ab-$v-$i.log | head -8
    done
  done ;;
H)
  timeout 120 python3 benches/fcn_probe.py > $O/fcn.log 2>&1; grep "|" $O/fcn.log
  timeout 100 python3 -m gemmconv bench --models --model fcn32s --json $O/fcn-model.json > $O/fcn-model.log 2>&1; grep -A12 "torch ms" $O/fcn-model.log | head -12
  timeout 330 python3 -m pytest -q -m cuda tests/test_cuda.py -p no:cacheprovider > $O/tests.log 2>&1; tail -3 $O/tests.log ;;
I)
  timeout 590 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -3 $O/tests.log ;;
J)
  timeout 120 python3 benches/fcn_probe.py > $O/fcn.log 2>&1; grep "|" $O/fcn.log
  timeout 100 python3 -m gemmconv bench --models --model fcn32s --json $O/fcn-model.json > $O/fcn-model.log 2>&1; grep -A12 "torch ms" $O/fcn-model.log | head -12
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log
  timeout 80 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log
  timeout 150 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log ;;
esac
tar czf $OUT/s25-$1.tgz -C $O .
