"""The small 2-D rule (fused.small_preferred) A/B: the same converted model with the rule on
and off, in turns in one process, against torch's.

The zoo times a model in a process of its own, and one and the same configuration moved by
up to 30% between processes (benches/NOTES.md, sessions 36 and 37), more than the rule's
effect. Here both variants are live at once: each keeps its own replays (ops._replays is
swapped in before its calls, so each plans and graphs its own routes), the rule patched
per variant; the backward's replays, which the rule does not touch, are shared.

    PYTHONPATH=. python benches/small_rule_probe.py vae-decoder:forward:float32:channels_last ...
"""
import sys

import torch

sys.path.insert(0, "benches")
from lt_probe import model_step, zoo_config  # noqa: E402

from gemmconv import fused, ops  # noqa: E402
from gemmconv.measure import timers  # noqa: E402

ROUNDS = 20


def variant(step, rule: bool, replays: dict):
    rule_fn = fused.small_preferred

    def fn():
        ops._replays = replays
        if not rule:
            fused.small_preferred = lambda *args: False
        try:
            step()
        finally:
            fused.small_preferred = rule_fn
    return fn


def main(configs):
    device = torch.device("cuda")
    for config in configs:
        base, ours, x, cast, mode = zoo_config(config)
        step = model_step(ours, x, cast, mode)
        fns = {"torch": model_step(base, x, cast, mode),
               "rule on": variant(step, True, {}), "rule off": variant(step, False, {})}
        ms = timers(device, fns, ROUNDS, warmup=4, back_to_back=True)
        print(f"{config}: torch {ms['torch']:.3f} ms | rule on {ms['rule on']:.3f} "
              f"({ms['torch'] / ms['rule on']:.2f}x) | rule off {ms['rule off']:.3f} "
              f"({ms['torch'] / ms['rule off']:.2f}x) | on / off {ms['rule off'] / ms['rule on']:.3f}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
