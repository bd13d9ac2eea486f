#!/usr/bin/env bash
# Session 22's H200 calls, after the fused route became the default where a call can take it.
#   A: the cuda-marked tests (the fused route's first), then the 17-case forward tables, NCHW
#      and channels_last;  B: the training tables and the model zoo;  C: after the cost model
#      narrowed the route: its tests, the forward tables and the zoo;  D: after it sent small
#      calls back to the other routes: the route's tests, channels_last forward, DCGAN and U-Net;
#   E, F: after the last CUDA-side change: every cuda test, the forward tables, the zoo, the
#      training table (E's tests stopped at 2602 of 2946, all passed or skipped: F runs the rest,
#      test_cuda_reuse.py);  G: where a small fused call's host time goes (benches/fused_host.py).
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=/tmp/o; mkdir -p $O
case "$1" in
A)
  timeout 100 python3 -m pytest -q -m cuda tests/test_cuda_fused.py -p no:cacheprovider > $O/tests-fused.log 2>&1; tail -3 $O/tests-fused.log
  timeout 300 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -3 $O/tests.log
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log
  timeout 80 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log ;;
B)
  timeout 120 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log
  timeout 120 python3 -m gemmconv bench --full --channels-last --backward --repeats 10 --json $O/train-cl.json > $O/bench-train-cl.log 2>&1; grep geometric $O/bench-train-cl.log
  timeout 330 python3 -m gemmconv bench --models --png $O/m.png --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log ;;
C)
  timeout 150 python3 -m pytest -q -m cuda tests/test_cuda_fused.py -p no:cacheprovider > $O/tests-fused.log 2>&1; tail -3 $O/tests-fused.log
  timeout 70 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log
  timeout 70 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log
  timeout 270 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log ;;
D)
  timeout 150 python3 -m pytest -q -m cuda tests/test_cuda_fused.py -p no:cacheprovider > $O/tests-fused.log 2>&1; tail -3 $O/tests-fused.log
  timeout 60 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log
  timeout 200 python3 -m gemmconv bench --models dcgan unet2d --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log ;;
E)
  timeout 330 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -3 $O/tests.log
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep geometric $O/bench-fwd.log
  timeout 80 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep geometric $O/bench-fwd-cl.log ;;
F)
  timeout 150 python3 -m pytest -q -m cuda tests/test_cuda_reuse.py -p no:cacheprovider > $O/tests-reuse.log 2>&1; tail -2 $O/tests-reuse.log
  timeout 280 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; grep "geometric mean" $O/models.log
  timeout 130 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep geometric $O/bench-train.log
 ;;
G)
  timeout 150 python3 benches/fused_host.py > $O/host.log 2>&1; cat $O/host.log ;;
esac
tar czf $OUT/s22-$1.tgz -C $O .
