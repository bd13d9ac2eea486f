"""A converted model's whole training step captured as one CUDA graph by the user
(torch.cuda.graph), against torch's model captured alike (session 50: small models' eager
steps lose on the host, where our kernels take less GPU time than cuDNN's; a captured step
has no host time between its kernels).

Per float32 configuration: torch's model and the converted one, each step (forward, and
in training autograd.grad of every parameter) captured once after three warm-up steps on a
side stream, then replayed; the replays timed in turns and paired against torch's
(measure.timed, back to back), next to the same models' eager steps. Before timing, one
replay's output is checked against torch's eager output (a wrong capture shows there).

    PYTHONPATH=. python benches/whole_graph_probe.py [REPEATS] [model:float32:layout:mode ...]

Needs a GPU (capture does not run on the CPU).
"""
import copy
import sys

import torch

from gemmconv import measure
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from probe_lib import zoo_setup  # noqa: E402

CONFIGS = ["dcgan:float32:channels_last:train", "dcgan:float32:NCHW:train",
           "vae:float32:channels_last:train", "vae:float32:channels_last:forward",
           "dcgan:float32:channels_last:forward"]


def captured(step):
    """``step`` captured as a CUDA graph (after three warm-up calls on a side stream, as
    torch asks): the graph's replay, and the tensors the capture's call returned."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        results = step()
    return graph.replay, results


def main(args: list[str]) -> None:
    repeats = int(args.pop(0)) if args and args[0].isdigit() else 15
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    for config in args or CONFIGS:
        try:
            setup, step_of = zoo_setup(config, device)
            models = {"torch": setup.model, "ours": gnn.convert(copy.deepcopy(setup.model))}
            eager = {k: step_of(m) for k, m in models.items()}
            with torch.no_grad():
                expected = eager["torch"]()[0].clone()
            replays, outputs = {}, {}
            for k, step in eager.items():
                replays[k], outputs[k] = captured(step)
            for k in replays:
                replays[k]()
            torch.cuda.synchronize()
            error = {k: ((outputs[k][0].float() - expected.float()).norm()
                         / expected.float().norm()).item() for k in replays}
            steps = {"torch eager": eager["torch"], "ours eager": eager["ours"],
                     "torch graphed": replays["torch"], "ours graphed": replays["ours"]}
            timed = measure.timed(device, steps, repeats, "torch eager")
            pair = measure.timed(device, {k: steps[k] for k in ("torch graphed", "ours graphed")},
                                 repeats, "torch graphed")
            print(f"== {config}: " + ", ".join(f"{k} {timed.ms[k]:.3f} ms" for k in steps)
                  + f"; eager ours/torch {timed.speedup['ours eager']:.3f}x, graphed "
                  f"{pair.speedup['ours graphed']:.3f}x; a replay's output against torch's "
                  f"eager one: torch {error['torch']:.1e}, ours {error['ours']:.1e}", flush=True)
        except Exception as e:   # (a probe: report the configuration's failure, go on)
            print(f"== {config}: failed: {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
