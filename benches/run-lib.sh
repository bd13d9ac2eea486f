#!/usr/bin/env bash
# Shell functions of the run-s*.sh scripts (sourced; $O is the call's output folder).
# Sourced with the call's name (run-s58.sh on), it sets up that folder and the environment.
if [ $# -gt 0 ]; then
  export PYTHONUNBUFFERED=1 PYTHONPATH=.
  O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
fi
count() { grep -E "PASSED|SKIPPED|FAILED|ERROR" $1 | awk '{print $1, $2}' | sed 's/::[^ ]* / /' | sort | uniq -c; grep -E "^(FAILED|ERROR)" $1 | head -20; }
# CUDA test files in parallel processes (Triton's compiles are the host's work): t LOG FILES...
t() { log=$1; shift; timeout ${TT:-500} python3 -m pytest -v -m cuda -p no:cacheprovider "$@" > $O/$log.log 2>&1; }
# test_cuda_depthwise in five processes, in the background: a precision each (their -k
# prefixed with $1, if given), and the tests -k "$2" picks (by default the rest).
depthwise_tests() {
  t dw-ieee tests/test_cuda_depthwise.py -k "${1}float32-ieee" &
  t dw-tf32 tests/test_cuda_depthwise.py -k "${1}float32-tf32" &
  t dw-f16 tests/test_cuda_depthwise.py -k "${1}float16 and not bfloat16" &
  t dw-bf16 tests/test_cuda_depthwise.py -k "${1}bfloat16" &
  t dw-rest tests/test_cuda_depthwise.py -k "${2:-not matches_float64}" &
}
grouped_tests() { depthwise_tests "grouped and " "$1"; }   # the grouped cases; -k "$1" for the fifth
summary() {   # once the background tests end: their counts, and each process's last line
  wait
  cat $O/*.log > $O/all.txt; count $O/all.txt; for f in $O/*.log; do echo "$f: $(tail -1 $f)"; done
}
# One layer kernel by kernel, torch against ours (benches/layer.py): layer LAYER --input ...
layer() { echo "== $*"; timeout 120 python3 benches/layer.py "$@" 2>&1 | grep -v "Warn\|_warn_once" | head -40; }
# The card a call ran on (run-s43.sh on; the older scripts define their own).
gpu() { nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $O/gpu.txt; }
# Every CUDA test file (run-s35.sh P): the counts in $O/P.txt, each file's failures and
# last lines in $O/tails.txt.
all_tests() {
  bash benches/run-s35.sh P | tee $O/P.txt
  for f in $OUT/P/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; grep -E "^E  " $f | head -40; tail -2 $f; done > $O/tails.txt
  rm -rf $OUT/P
}
# The 17 cases' table (python -m gemmconv bench --full; TB: its time limit): table LOG [OPTIONS...]
table() { log=$1; shift; timeout ${TB:-170} python3 -m gemmconv bench --full "$@" > $O/$log.log 2>&1; grep -A20 "^case" $O/$log.log; }
# A probe's run, its output filtered of Triton's warnings into $O/LOG.log: probe SECS LOG SCRIPT [ARGS...]
probe() { s=$1; log=$2; shift 2; timeout $s python3 benches/"$@" 2>&1 | grep -v "Warn\|_warn_once" | tee $O/$log.log; }
# One zoo model through the CLI, its conversion reports too, into $O/NAME.log; its table: zoo_model NAME SECS
zoo_model() { timeout $2 python3 -m gemmconv bench --models --model $1 --layers > $O/$1.log 2>&1; grep -A14 "^model " $O/$1.log | grep -v "^---"; }
# Builds the C++ autograd node first, so that no timing waits for its compile.
node() { python3 -c "from gemmconv import _node; print(_node.load())" > /dev/null 2>&1; }
