"""Would cuBLASLt's candidates, timed on smaller products (gemm.ALGORITHM_TRIAL_FLOPS), win
the zoo's small layers back? Per transposed convolution of a zoo model (its input recorded
by a hook), dtype and layout: a training step's GPU kernel ms (torch.profiler), torch's
module against the converted one with the trials from 2^34 FLOPs (the default) and from
2^30, plans and graphs made afresh for each; and back-to-back ms a step.

    PYTHONPATH=. python benches/trial_layers_probe.py [model] [float32|bfloat16] [NCHW|CL]
"""
import sys

import torch

sys.path.insert(0, "benches")
from layer_step_probe import layer_steps  # noqa: E402
from overhead import patched  # noqa: E402
from process_probe import kernels  # noqa: E402

from gemmconv import gemm  # noqa: E402
from gemmconv.measure import timers  # noqa: E402


def main(name="dcgan", dtype="float32", layout="CL"):
    print(f"{name} {dtype} {layout}: a layer's training step, GPU kernel ms (ms back to back)",
          flush=True)
    for module, ours, inp, step in layer_steps(name, dtype, layout):
        cells = [f"torch {sum(kernels(step(module)).values()):.4f}"]
        for flops in (1 << 34, 1 << 30):
            with patched(gemm, "ALGORITHM_TRIAL_FLOPS", flops):
                gemm._products.clear()
                gpu = kernels(step(ours))
                ms = timers(torch.device("cuda"), {"o": step(ours), "t": step(module)}, 10,
                            warmup=3, back_to_back=True)
            gemms = sum(v for k, v in gpu.items() if "gemm" in k.lower() or "nvjet" in k or "xmma" in k)
            cells.append(f"2^{flops.bit_length() - 1}: {sum(gpu.values()):.4f} (GEMMs {gemms:.4f}; "
                         f"{ms['o']:.4f} against {ms['t']:.4f})")
        gemm._products.clear()
        print(f"  {tuple(inp.shape)} -> {module.out_channels}: " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
