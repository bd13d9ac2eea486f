#!/usr/bin/env bash
# One call on the GPU machine: the cuda-marked tests, then benchmarks. Logs go under $OUT.
#   bash benches/gpu.sh [tests] [tests-all] [overhead] [columns] [stages] [bench] [bench-backward]
#                       [bench-cl] [bench-cl-backward] [bench-ieee] [models] [suite-reuse] [suite]
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-out}
mkdir -p "$OUT"
steps=${*:-tests bench}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)" | tee -a "$OUT/gpu.txt"
for step in $steps; do
  echo "=== $step"
  case $step in
    tests) python3 -m pytest -q -m cuda tests -p no:cacheprovider -x --junitxml="$OUT/cuda-tests.xml" \
             2>&1 | tee "$OUT/tests.log" | tail -25 ;;
    tests-all) python3 -m pytest -q tests -p no:cacheprovider --junitxml="$OUT/all-tests.xml" \
             2>&1 | tee "$OUT/all-tests.log" | tail -25 ;;   # the CPU tests too, on this torch
    overhead) python3 benches/overhead.py 2>&1 | tee "$OUT/overhead.log" ;;
    columns) python3 benches/columns.py --json "$OUT/columns.json" 2>&1 | tee "$OUT/columns.log" ;;
    stages) python3 benches/stages.py --top --json "$OUT/stages.json" 2>&1 | tee "$OUT/stages.log" ;;
    bench) python3 -m gemmconv bench --full --json "$OUT/fwd.json" --png "$OUT/fwd.png" 2>&1 | tee "$OUT/bench-fwd.log" ;;
    bench-backward) python3 -m gemmconv bench --full --backward --repeats 10 --json "$OUT/train.json" \
             --png "$OUT/train.png" 2>&1 | tee "$OUT/bench-train.log" ;;
    bench-cl) python3 -m gemmconv bench --full --channels-last --json "$OUT/fwd-cl.json" \
             --png "$OUT/fwd-cl.png" 2>&1 | tee "$OUT/bench-fwd-cl.log" ;;
    bench-cl-backward) python3 -m gemmconv bench --full --channels-last --backward --repeats 10 \
             --json "$OUT/train-cl.json" --png "$OUT/train-cl.png" 2>&1 | tee "$OUT/bench-train-cl.log" ;;
    bench-ieee) python3 -m gemmconv bench --full --no-tf32 --json "$OUT/ieee.json" --png "$OUT/ieee.png" \
             2>&1 | tee "$OUT/bench-ieee.log" ;;
    models) python3 -m gemmconv bench --models --layers --json "$OUT/models.json" --png "$OUT/models.png" \
             > "$OUT/models-layers.log" 2> >(tee "$OUT/models-progress.log" >&2); \
             sed -n '/^model zoo on/,$p' "$OUT/models-layers.log" | tee "$OUT/models.log" ;;
    suite-reuse) python3 -m pytest -q benches/test_bench_reuse.py --benchmark-group-by=group --benchmark-columns=median,iqr -p no:cacheprovider 2>&1 | tail -60 ;;
    suite) python3 -m pytest -q benches --benchmark-group-by=group --benchmark-columns=median,iqr \
             --benchmark-json="$OUT/suite.json" -p no:cacheprovider 2>&1 | tail -40 ;;
  esac
done
