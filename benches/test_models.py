"""pytest-benchmark suite over the model zoo (gemmconv.zoo): torch against the model
converted three ways (every transposed convolution swapped; convert(model, sample=x); the
same over every layer type), forward and training step, float32 and bf16 autocast, NCHW
and channels_last.

    python -m pytest benches/test_models.py --benchmark-group-by=group --benchmark-save=NAME

On a GPU the models run at full size; without one at reduced sizes. Each benchmark records
its error against the model in float64 in extra_info, and holds it to a few times torch's.
"""
import functools

import pytest
import torch

from gemmconv import bench, zoo

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CONFIGS = [(m, *c) for m in zoo.ZOO for c in bench.model_configs(m)]


@functools.lru_cache(maxsize=1)
def _workload(name, precision, layout, mode):
    entry = zoo.by_name([name])[0]
    return bench.ModelWorkload(entry, DEVICE.type != "cuda", DEVICE, precision, layout, mode)


@pytest.mark.parametrize("variant", ["torch", "every", "chosen", "chosen_all"])
@pytest.mark.parametrize("config", CONFIGS,
                         ids=lambda c: f"{c[0].name}-{c[3]}-{c[1]}-{c[2]}")
def test_model(benchmark, config, variant):
    entry, precision, layout, mode = config
    work = _workload(entry.name, precision, layout, mode)
    run = work.runners[variant]
    if DEVICE.type == "cuda":
        run = lambda run=run: (run(), torch.cuda.synchronize(DEVICE))
    benchmark.group = f"{entry.name} {mode} {precision} {layout}"
    benchmark.extra_info.update(rel_error=work.errors[variant], variant=variant)
    assert work.errors[variant] <= max(4 * work.errors["torch"], 1e-4)
    benchmark.pedantic(run, rounds=10 if DEVICE.type == "cuda" else 2, warmup_rounds=1)
