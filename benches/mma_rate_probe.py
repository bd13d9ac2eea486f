"""The rate of mma.sync alone (benches/mma_rate.cu): m16n8k8 TF32 and m16n8k16 bfloat16
products on operands in registers, 32 independent accumulator tiles a warp (as col2im.cu's
tf32_weight_gradient holds them), by warps a block and blocks an SM; then TF32 with 16 and
40 tiles a warp (its balanced forms: two tiles of A, or one of each of five W taps) at
their forms' warps. The ceiling of that kernel's products loop: whether its 106-116
TFLOP/s (H100, session 70) is near what mma.sync gives at all, and each form's. Needs a
Hopper GPU and nvcc; about 15 s: ``PYTHONPATH=. python benches/mma_rate_probe.py``."""
import cupy
import torch

from gemmconv.measure import timer
from wgmma_shift_probe import build   # (benches/ is on the path when run as a script)


def main() -> None:
    module = build(__file__.replace("mma_rate_probe.py", "mma_rate.cu"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    steps = 2000
    print(torch.cuda.get_device_name(), f"{sms} SMs", flush=True)
    usual = ((4, 1), (7, 1), (8, 1), (9, 1), (10, 1), (12, 1), (4, 2), (4, 3), (6, 2))
    # (kernel, K, tiles a warp, (warps a block, blocks an SM)...)
    for name, k, tiles, shapes in (("tf32_rate", 8, 32, usual), ("bf16_rate", 16, 32, usual),
                                   ("tf32_rate_m2", 8, 16, ((7, 1), (14, 1), (16, 1))),
                                   ("tf32_rate_m5", 8, 40, ((4, 1), (8, 1)))):
        kernel = module.get_function(name)
        for warps, per_sm in shapes:
            blocks = sms * per_sm
            out = cupy.asarray(torch.empty(blocks * warps * 32, device="cuda"))
            args = (out, cupy.int32(steps), cupy.uint32(12345))
            ms = timer(torch.device("cuda"), lambda: kernel((blocks,), (32 * warps,), args), 5)
            flops = blocks * warps * steps * tiles * 16 * 8 * k * 2
            print(f"{name}: {warps} warps x {per_sm} block(s) an SM: {ms:.3f} ms, "
                  f"{flops / ms / 1e9:.0f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
