#!/usr/bin/env bash
# Session 21's GPU runs (see benches/NOTES.md, session 21): bash benches/run-s21.sh A|B
#   A: every cuda-marked test, then the 17 cases forward and training, NCHW
#   B: the 14 2-D and 3-D cases channels_last, forward and training; the model zoo
#   C: the whole test suite, CPU tests included (this machine's torch: the lower bound)
export PYTHONPATH=. PYTHONUNBUFFERED=1
R=$OUT; O=/tmp/o; mkdir -p $O
case $1 in
  A) OUT=$O timeout 560 bash benches/gpu.sh tests bench bench-backward > $O/gpu-sh.log 2>&1
     grep -h "passed\|failed" $O/tests.log | tail -2 ;;
  B) OUT=$O timeout 560 bash benches/gpu.sh bench-cl bench-cl-backward models > $O/gpu-sh.log 2>&1
     tail -40 $O/models.log ;;
  C) OUT=$O timeout 590 bash benches/gpu.sh tests-all > $O/gpu-sh.log 2>&1
     python3 -c "import torch; print('torch', torch.__version__)"
     tail -3 $O/all-tests.log ;;
esac
grep -h "geometric" $O/bench-*.log
tar czf $R/run$1.tgz -C $O .
