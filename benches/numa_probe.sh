#!/usr/bin/env bash
# Does the CPU a process runs on (near the GPU's PCIe root or not) decide host-bound timings?
# DCGAN's forward per call, torch and gemmconv, in processes pinned to each NUMA node's CPUs.
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi topo -m 2>&1 | head -8
lscpu | grep -i "numa\|model name\|^CPU(s)" 
BUS=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | sed 's/^0000//')
for d in /sys/bus/pci/devices/*$BUS; do echo "GPU $d numa_node $(cat $d/numa_node) local_cpulist $(cat $d/local_cpulist)"; done
cat > /tmp/dcgan_fwd.py <<'PY'
import copy, sys, time, torch
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
print(f"  torch {t[0]:.0f} us, ours {t[1]:.0f} us, {t[0] / t[1]:.2f}x", flush=True)
PY
for node in $(ls -d /sys/devices/system/node/node* | sed 's/.*node//'); do
  cpus=$(cat /sys/devices/system/node/node$node/cpulist)
  for i in 1 2; do echo "node $node (cpus $cpus) run $i"; taskset -c $cpus timeout 60 python3 /tmp/dcgan_fwd.py 2>&1 | grep -v Warn; done
done
echo "unpinned"; for i in 1 2 3; do timeout 60 python3 /tmp/dcgan_fwd.py 2>&1 | grep -v Warn; done
