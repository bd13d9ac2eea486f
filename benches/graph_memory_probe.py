"""What does a channels_last backward take beyond its graph bound? (Session 54's C: on the
zoo's two large channels_last layers, tests/test_cuda_graphs.py's bound test read 128 MiB
more than _BackwardReplay.graph_bytes, in float32 and bfloat16, 2-D and 3-D alike.)

Per call: a training step's backward launches run eagerly in place of graphs.launch (as
the bound test does), the third step's recorded by torch's allocator history. Prints the
bound, the peak, and every allocation of 1 MiB or more made while they ran, with the
innermost frames of gemmconv or torch that made it; then the bias gradient's sum alone.

    PYTHONPATH=. python benches/graph_memory_probe.py
"""
import torch

from gemmconv import cases, channels_last as cl, graphs
from gemmconv.bench import OURS

CALLS = [(c, dtype) for c in cases.LARGE_MODEL_LAYERS for dtype in (torch.float32, torch.bfloat16)]


def frames(entry) -> str:
    mine = [f"{f['filename'].split('/')[-1]}:{f['line']} {f['name']}" for f in entry["frames"]
            if "gemmconv" in f["filename"] or "torch/" in f["filename"]]
    return " < ".join(mine[:4])


def main() -> None:
    print(torch.cuda.get_device_name(), flush=True)
    for case, dtype in CALLS:
        x, w, b = case.tensors(dtype, "cuda")
        fmt = cl.memory_format(x.dim())
        x, w = x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)
        leaves = [t.requires_grad_() for t in (x, w, b)]
        grad = torch.randn((case.batch, case.out_channels, *case.output_size), device="cuda",
                           dtype=dtype).contiguous(memory_format=fmt)
        record = []

        def measured(owner, addresses, run, nbytes, device, stream):
            if "Backward" in type(owner).__name__ and record:
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
                run()
                torch.cuda.synchronize()
                snapshot = torch.cuda.memory._snapshot()
                torch.cuda.memory._record_memory_history(enabled=None)
                print(f"{case.name} {dtype}: {type(owner).__name__} bound {nbytes():,}, took "
                      f"{torch.cuda.max_memory_allocated() - base:,}", flush=True)
                for entry in snapshot["device_traces"][0]:
                    if entry["action"] == "alloc" and entry["size"] >= 1 << 20:
                        print(f"  {entry['size']:>13,}  {frames(entry)}", flush=True)
            else:
                run()
            return True
        real = graphs.launch
        graphs.launch = measured
        try:
            for step in range(3):
                if step == 2:
                    record.append(1)
                torch.autograd.grad(OURS[case.nd](x, w, b, **case.kwargs), leaves, grad)
        finally:
            graphs.launch = real
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        cl.channel_sums(grad)
        torch.cuda.synchronize()
        print(f"  channel_sums alone: {torch.cuda.max_memory_allocated() - base:,} bytes",
              flush=True)


if __name__ == "__main__":
    main()
