#!/usr/bin/env bash
# Session 25's H200 calls (outputs under benches/results/s25/<call>).
#   A: probes: which backward work costs more on autograd's device thread (lt_probe.py engine);
#      DCGAN's forward and training step by function (lt_probe.py model); the zoo's layers with
#      the fused route off (host_probe.py layers, columns only).
#   B: GPU tests after the GEMMs moved to cuBLASLt; Lt against the legacy call on DCGAN and the
#      VAE decoder (lt_probe.py ab).
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
esac
tar czf $OUT/s25-$1.tgz -C $O .
