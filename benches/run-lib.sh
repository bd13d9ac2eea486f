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
# The counts of DIR's test logs (all of them in DIR/all.txt), and each log's last line: tally DIR
tally() { (cd $1 && cat *.log > all.txt; count all.txt; for f in *.log; do echo "$f: $(tail -1 $f)"; done); }
summary() {   # once the background tests end: their counts, and each process's last line
  wait
  tally $O
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
# CUDA tests in parallel processes, each cut at $TC seconds: sharded_tests SPEC...; a SPEC is
# NAME:PROCESSES:FILES[:KEYWORDS] (FILES split by spaces, KEYWORDS pytest's -k), its node ids
# (`pytest --co`) dealt round-robin. Counts into $O/counts.txt, the logs in $O/logs.tgz.
sharded_tests() {
  d=/tmp/shards; rm -rf $d; mkdir -p $d
  for spec; do
    IFS=: read -r name n files k <<< "$spec"
    python3 -m pytest --co -q -m cuda -p no:cacheprovider $files ${k:+-k "$k"} 2>/dev/null | grep "::" |
      awk -v n=$n -v f=$d/$name '{print > (f (NR - 1) % n ".ids")}'
  done
  for f in $d/*.ids; do
    timeout ${TC:-260} python3 -m pytest -v -m cuda -p no:cacheprovider $(cat $f) > ${f%.ids}.log 2>&1 &
  done
  wait
  tally $d | tee $O/counts.txt
  (cd $d && tar -czf $O/logs.tgz *.log)
}
# ncu on tf32_weight_gradient's third launch of benches/rows_wgrad_ncu.py: wgrad_ncu CASE
wgrad_ncu() {
  timeout 150 ncu --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy \
    --section MemoryWorkloadAnalysis --section SourceCounters -k regex:tf32_weight_gradient \
    --launch-skip 2 --launch-count 1 python3 benches/rows_wgrad_ncu.py $1 > $O/ncu-$1.log 2>&1
  grep -E "Duration|Throughput|Busy|Stall|Issued|Eligible|Hit Rate|Pipe|Occupancy|Warp Cycles" $O/ncu-$1.log | head -60
}
# tf32_weight_gradient alone on the cases its form takes, by build: $BUILDS (folders holding
# a copy of the package, carried in scratch/; "." the tree's). In A: session 69's
# (scratch/base), the output gradient rounded once in shared memory (scratch/round), and
# the tree's (also A's pairs by float2). In N: before the division-free walk of the box
# rows and the tree's; make the first here before the call (scratch/ is not tracked):
# mkdir -p scratch/prewalk && git archive b095122^ gemmconv | tar -x -C scratch/prewalk
wgrad_builds() {
  for code in ${BUILDS:-scratch/base scratch/round .}; do for c in 2d-1024 2d-3x7-512 2d-64to128; do
    echo "$code $(PYTHONPATH=$code timeout 60 python3 benches/rows_wgrad_ncu.py $c 2>&1 | tail -1)"
  done; done | tee $O/wgrad-builds.log
}
left() { echo $(( ${1:-570} - SECONDS )); }   # seconds left of the call's budget
# The convolution replays' checks (run-s76.sh N, run-s77.sh A): test_cuda_graphs' convolution
# tests, test_cuda_replay's steady tests, conv_wgrad_replay_probe.py in four precisions and
# layouts, conv_backward_bytes_probe.py.
conv_replay_checks() {
  TC=150 sharded_tests "graphs:8:tests/test_cuda_graphs.py:convolution" \
    "replay:3:tests/test_cuda_replay.py:steady_convolution or steady_training or like_its_last"
  for d in float32 bfloat16; do for l in planar channels_last; do
    probe 60 conv-step-$d-$l conv_wgrad_replay_probe.py $d $l
  done; done
  probe 60 conv-backward-bytes conv_backward_bytes_probe.py
}
# zoo_model (without --layers) with ops.GRAPHED_CONV_BACKWARD and ops.STEADY_CONVOLUTIONS on,
# patched in for this process alone (session 77 turned both on): switched NAME SECS
switched() {
  timeout $2 python3 -c "import runpy, sys
import gemmconv.ops as o; o.GRAPHED_CONV_BACKWARD = o.STEADY_CONVOLUTIONS = True
sys.argv = ['gemmconv', 'bench', '--models', '--model', '$1']
runpy.run_module('gemmconv', run_name='__main__')" > $O/$1-switched.log 2>&1
  grep -A14 "^model " $O/$1-switched.log | grep -v "^---"; }
# The four tables of the 17 cases' 2-D and 3-D rows, both layouts (run-s77.sh E on), each
# training table cut at $TB_TRAIN seconds, each forward one at $TB_FWD (a cold machine
# compiles each case's kernels first: 150 and 90 cut all four in run-s79.sh A).
four_tables() {
  TB=${TB_TRAIN:-150} table train-f32-layouts --layouts --backward
  TB=${TB_TRAIN:-150} table train-bf16-layouts --layouts --backward --dtype bfloat16
  TB=${TB_FWD:-90} table fwd-f32-layouts --layouts
  TB=${TB_FWD:-90} table fwd-bf16-layouts --layouts --dtype bfloat16
}
# Zoo models without --layers, each while more than a minute of the call's budget is left,
# their tables printed: zoo_models BUDGET NAME...
zoo_models() {
  budget=$1; shift
  for m; do
    [ $(left $budget) -gt 60 ] || break
    timeout $(( $(left $budget) - 5 )) python3 -m gemmconv bench --models --model $m > $O/$m.log 2>&1
    grep -A14 "^model " $O/$m.log | grep -v "^---"
  done
}
# benches/unet_conv_probe.py in four precisions and layouts, each cut at SECS, its rows
# filtered by the grep pattern PATTERN where given: unet_conv_probes SECS [PATTERN]
unet_conv_probes() {
  for d in float32 bfloat16; do for l in planar channels_last; do
    probe $1 unet-conv-$d-$l unet_conv_probe.py $d $l | grep -E "${2:-.}"
  done; done
}
# A convolution's training step by each route (conv_wgrad_replay_probe.py), float32 planar
# and bfloat16 channels_last, 45 s each (run-s77.sh C on).
conv_step_probes() {
  probe 45 conv-step-float32-planar conv_wgrad_replay_probe.py float32 planar
  probe 45 conv-step-bfloat16-channels_last conv_wgrad_replay_probe.py bfloat16 channels_last
}
