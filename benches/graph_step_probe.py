"""Does alternating a layer's forward and backward graphs cost the host? Session 48's H
(backward_host_probe.py, H100, GPU busy): DCGAN's k4 s2 layer channels_last, ours: a step
(forward and autograd.grad) 325 us, where its forward alone took 84 and its grad alone 136;
torch's step 176 = 31 + 146. Here, ours with the graphs kept (default) and with none
(graphs.set_graph_memory_limit(0)), torch beside: host us a step, a forward and a grad
alone (GPU busy, as H), and ms a step back to back from an idle GPU (measure.timed, in
turns: what a training loop sees).

    PYTHONPATH=. python benches/graph_step_probe.py
"""
import sys

import torch

from gemmconv import graphs, measure

sys.path.insert(0, "benches")
from probe_lib import busy_us, layer_cases  # noqa: E402
from sync_probe import sleep_cycles  # noqa: E402


def main() -> None:
    print(torch.cuda.get_device_name(), flush=True)
    cycles = sleep_cycles()
    for name, layout, theirs, ours, x, g in layer_cases():
        steps = {}
        row = []
        for label, m, limit in (("torch", theirs, None), ("ours", ours, 512 << 20),
                                ("ours, no graphs", ours, 0)):
            leaves = [x, *m.parameters()]
            if limit is not None:
                graphs.set_graph_memory_limit(limit)
                graphs.forget()
            for _ in range(5):
                torch.autograd.grad(m(x), leaves, g)

            def step(_=None, m=m, leaves=leaves):
                torch.autograd.grad(m(x), leaves, g)
            steps[label] = step
            grad = lambda out, leaves=leaves: torch.autograd.grad(out, leaves, g)   # noqa: E731
            forward = lambda _, m=m: m(x)   # noqa: E731
            row.append(f"{label} {busy_us(step, cycles):.0f} / {busy_us(forward, cycles):.0f}"
                       f" / {busy_us(grad, cycles, forward):.0f} (graphs kept {graphs.kept()})")
        print(f"== {name} {layout} {tuple(x.shape)}: host us, GPU busy, step / forward / grad "
              "alone: " + " | ".join(row), flush=True)
        for limit, label in ((512 << 20, "ours"), (0, "ours, no graphs")):
            graphs.set_graph_memory_limit(limit)
            graphs.forget()
            pair = {"torch": steps["torch"], label: steps[label]}
            t = measure.timed(torch.device("cuda"), pair, 10, "torch")
            print(f"   back to back: torch {t.ms['torch']:.3f} ms, {label} {t.ms[label]:.3f} "
                  f"({t.speedup[label]:.2f}x)", flush=True)
        graphs.set_graph_memory_limit(512 << 20)


if __name__ == "__main__":
    main()
