#!/usr/bin/env bash
# Session 24's H200 calls (outputs under benches/results/s24/<call>).
#   A: the replay's GPU tests, and host time by function of tiny calls (benches/host_probe.py glue).
#   B: every cuda test.
#   C: the zoo and the 17 cases' training steps.
#   E: the 17 cases forward (both layouts), and host time of tiny calls again.
#   F: after replays took copied weights: their tests; DCGAN, VAE and HiFi-GAN with replays and without.
#   G: per layer, per call and kernel times, replays on against off.
#   H: after the review's mends: tests/test_cuda_replay.py and tests/test_cuda.py.
#   D: per-layer host time and kernels of the zoo's layers (benches/host_probe.py).
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=/tmp/o-$1; rm -rf $O; mkdir -p $O
case "$1" in
A)
  timeout 240 python3 -m pytest -q -m cuda tests/test_cuda_replay.py -p no:cacheprovider -x > $O/tests-replay.log 2>&1; tail -15 $O/tests-replay.log
  timeout 100 python3 benches/host_probe.py glue > $O/glue.log 2>&1; grep -A4 "a step" $O/glue.log ;;
B)
  timeout 580 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -5 $O/tests.log ;;
C)
  timeout 290 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log
  timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log ;;
E)
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log
  timeout 80 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log
  timeout 100 python3 benches/host_probe.py glue > $O/glue.log 2>&1; grep "a step" $O/glue.log ;;
F)
  timeout 200 python3 -m pytest -q -m cuda tests/test_cuda_replay.py -p no:cacheprovider > $O/tests-replay.log 2>&1; tail -3 $O/tests-replay.log
  # the small-layer models with replays, then without (the A/B of one machine)
  timeout 150 python3 -m gemmconv bench --models --model dcgan --model vae --model hifigan --json $O/models-on.json > $O/models-on.log 2>&1; grep "geometric mean" $O/models-on.log
  timeout 150 python3 -c "import sys; from gemmconv import ops, __main__ as m; ops._replayed = ops._replayed_backward = lambda *a: None; sys.exit(m.main(sys.argv[1:]))" bench --models --model dcgan --model vae --model hifigan --json $O/models-off.json > $O/models-off.log 2>&1; grep "geometric mean" $O/models-off.log ;;
G)
  # per layer, replays on against off, on one machine
  timeout 200 python3 benches/host_probe.py layers > $O/layers-on.log 2>&1
  timeout 200 python3 -c "import sys; sys.path.insert(0, 'benches'); from gemmconv import ops; ops._replayed = ops._replayed_backward = lambda *a: None; import host_probe; sys.argv = ['host_probe', 'layers']; host_probe.main()" > $O/layers-off.log 2>&1
  paste -d'#' <(grep "|" $O/layers-on.log | cut -d'|' -f1-4) <(grep "|" $O/layers-off.log | cut -d'|' -f3) ;;
H)
  # after the review's mends (a shared reorder on the planar routes): the replay and planar GPU tests
  timeout 420 python3 -m pytest -q -m cuda tests/test_cuda_replay.py tests/test_cuda.py -p no:cacheprovider > $O/tests.log 2>&1; tail -2 $O/tests.log ;;
D)
  timeout 300 python3 benches/host_probe.py > $O/host_probe.log 2>&1; head -70 $O/host_probe.log ;;
esac
tar czf $OUT/s24-$1.tgz -C $O .
