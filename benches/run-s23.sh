#!/usr/bin/env bash
# Session 23's H200 calls.
#   A: the tile-orientation probe (benches/fused_layouts.py at commit 6b677e7; results/s23/layouts.log).
#   B: after planar stride-1 2-D calls joined the fused route through channels_innermost:
#      the copy's probe, the fused route's tests, the forward tables in both layouts.
#   C: a fused backward for stride-1 planar calls, probed (benches/fused_backward.py and
#      fused.weight_gradient at commit 08d2c99; removed after it: results/s23/C/backward.log).
#   D, E: the checks after the forward's change (I1, I2 repeat them after the backward's): every cuda test (D: test_cuda, test_cuda_channels_last,
#      test_cuda_fused; E: the rest), the forward tables, the training table, the zoo.
#   F: after the stride-1 planar backward joined the fused route (fused.backward): the route's
#      tests, the training table, the forward table.
#   G: where the fused backward's time goes (benches/wgrad_probe.py).
#   H: the fused backward for 16-bit types only: the route's tests, the bfloat16 training table.
#   I1, I2: after the last CUDA-side change: every cuda test; the zoo and the float32 training table.
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=/tmp/o-$1; rm -rf $O; mkdir -p $O
case "$1" in
B)
  timeout 120 python3 benches/transpose_probe.py > $O/transpose.log 2>&1; cat $O/transpose.log
  timeout 200 python3 -m pytest -q -m cuda tests/test_cuda_fused.py -p no:cacheprovider > $O/tests-fused.log 2>&1; tail -3 $O/tests-fused.log
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log
  timeout 80 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log ;;
C)
  timeout 500 python3 benches/fused_backward.py > $O/backward.log 2>&1; cat $O/backward.log ;;
D)
  timeout 380 python3 -m pytest -q -m cuda tests/test_cuda.py tests/test_cuda_channels_last.py tests/test_cuda_fused.py -p no:cacheprovider > $O/tests.log 2>&1; tail -3 $O/tests.log
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log
  timeout 80 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log ;;
E)
  timeout 150 python3 -m pytest -q -m cuda tests -p no:cacheprovider --deselect tests/test_cuda.py --deselect tests/test_cuda_channels_last.py --deselect tests/test_cuda_fused.py > $O/tests-rest.log 2>&1; tail -3 $O/tests-rest.log
  timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log
  timeout 290 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log ;;
F)
  timeout 200 python3 -m pytest -q -m cuda tests/test_cuda_fused.py -p no:cacheprovider > $O/tests-fused.log 2>&1; tail -3 $O/tests-fused.log
  timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log ;;
G)
  timeout 400 python3 benches/wgrad_probe.py > $O/wgrad.log 2>&1; cat $O/wgrad.log ;;
H)
  timeout 200 python3 -m pytest -q -m cuda tests/test_cuda_fused.py -p no:cacheprovider > $O/tests-fused.log 2>&1; tail -3 $O/tests-fused.log
  timeout 150 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16.json > $O/bench-train-bf16.log 2>&1; grep geometric $O/bench-train-bf16.log
  # the same with the fused backward turned off, for the A/B
  timeout 150 python3 -c "import sys; from gemmconv import fused, __main__ as m; fused.backward_unavailable = lambda *a, **k: 'off'; sys.exit(m.main(sys.argv[1:]))" bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16-off.json > $O/bench-train-bf16-off.log 2>&1; grep geometric $O/bench-train-bf16-off.log ;;
I1)
  timeout 560 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -3 $O/tests.log ;;
I2)
  timeout 290 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log
  timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log ;;
esac
tar czf $OUT/s23-$1.tgz -C $O .
