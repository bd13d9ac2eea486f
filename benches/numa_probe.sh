#!/usr/bin/env bash
# Does the set of CPUs a process may run on decide host-bound timings? DCGAN's forward per
# call, torch and gemmconv, in processes unpinned and pinned (taskset), in turns.
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi topo -m 2>&1 | head -3
lscpu | grep -i "numa\|model name\|^CPU(s)"
cat > /tmp/dcgan_fwd.py <<'PY'
import copy, os, sys, time, torch
sys.path.insert(0, "benches")
from overhead import per_call_us
from gemmconv import zoo, nn as gnn
entry = zoo.by_name(["dcgan"])[0]
base = entry.build(False).cuda().eval(); x = entry.input(False, "cuda")
ours = gnn.convert(copy.deepcopy(base))
def fn(m):
    def run():
        with torch.no_grad():
            m(x)
    return run
t = [min(per_call_us(fn(m), 50) for _ in range(3)) for m in (base, ours)]
print(f"  cpus {sorted(os.sched_getaffinity(0))[:4]}.. torch {t[0]:.0f} us, ours {t[1]:.0f} us, {t[0] / t[1]:.2f}x", flush=True)
PY
for i in 1 2 3; do
  for pin in none 0-15 3 3-4; do
    echo "$pin run $i"
    if [ $pin = none ]; then timeout 60 python3 /tmp/dcgan_fwd.py 2>&1 | grep -v Warn
    else taskset -c $pin timeout 60 python3 /tmp/dcgan_fwd.py 2>&1 | grep -v Warn; fi
  done
done
