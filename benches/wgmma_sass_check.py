"""Whether ptxas kept a CUDA C++ file's wgmma chains whole: builds it for sm_90a with nvcc
and counts, per kernel, the HGMMA instructions and the warpgroup waits (WARPGROUP.DEPBAR)
in its SASS, and prints ptxas's C75xx notes (a wgmma serialised, or a wait or arrive it
injected). No GPU; a few seconds.

    PYTHONPATH=<triton 3.6>:. python benches/wgmma_sass_check.py [FILE.cu] [--waits N]

Session 68 (benches/NOTES.md): forms of wgmma_forward.cu that looked right in the source
had a wait after every HGMMA (C7518: a wgmma's registers in a divergent path) or a wait
for every chain at once (C7517: NVVM's moves of loop-carried accumulators). Exits 1 where
a kernel has more waits than ``--waits`` (2: a stage's and a tile's) or ptxas wrote a
C75xx note. Needs nvcc, and cuobjdump on PATH or Triton's copy (ttgir_check.py finds it,
so Triton and gemmconv must import).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from ttgir_check import cuobjdump   # (benches/ is on the path when run as a script)

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", default=os.path.join(HERE, "wgmma_forward.cu"))
    parser.add_argument("--waits", type=int, default=2)
    args = parser.parse_args()
    source, waits = args.source, args.waits
    cubin = os.path.join(tempfile.mkdtemp(), "check.cubin")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    built = subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-o", cubin,
                            "-Xptxas", "-v", source], capture_output=True, text=True, check=True)
    notes = [line for line in built.stderr.splitlines() if re.search(r"\(C75\d\d\)", line)]
    sass = subprocess.run([cuobjdump(), "-sass", cubin], capture_output=True, text=True,
                          check=True).stdout
    counts = {}   # kernel: [HGMMAs, waits], in the SASS's order
    kernel = None
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            kernel = m.group(1)
            counts[kernel] = [0, 0]
        elif kernel and "HGMMA" in line:
            counts[kernel][0] += 1
        elif kernel and "WARPGROUP.DEPBAR" in line:
            counts[kernel][1] += 1
    bad = {k: c for k, c in counts.items() if c[0] and c[1] > waits}
    for k, (hgmma, depbar) in counts.items():
        print(f"{k}: {hgmma} HGMMA, {depbar} waits{'  <- serialised' if k in bad else ''}")
    for line in notes:
        print(line)
    print(f"{len(counts)} kernels, {len(bad)} with more than {waits} waits, "
          f"{len(notes)} C75xx notes")
    return 1 if bad or notes else 0


if __name__ == "__main__":
    sys.exit(main())
