"""Do our CUDA graphs hit while the zoo times its variants in turns? Session 48's D read the
VAE decoder's float32 NCHW forward at 0.95x with convert's four swapped layers, where
convert's own timing of the same choice read 1.10x (benches/results/s48/D/vae.log). A
graph is kept per call and per the addresses of its tensors (graphs.py); five models timed
in turns may hand our layers new addresses from sample to sample, and then a timed sample
pays a capture. Counts graphs.launch's outcomes (replayed, captured, first seen, dropped or
over the limit) while bench.measure_model's variants are timed, and times torch's model
against each converted one in pairs too.

    PYTHONPATH=. python benches/graph_hits_probe.py [model:precision:layout:mode ...]
"""
import gc
import sys

import torch

from gemmconv import graphs, measure, zoo
from gemmconv.bench import ModelWorkload

sys.path.insert(0, "benches")
from probe_lib import launches_counted  # noqa: E402

CONFIGS = ["vae-decoder:float32:NCHW:forward", "vae-decoder:float32:channels_last:train",
           "dcgan:float32:channels_last:train"]


def main() -> None:
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    for config in sys.argv[1:] or CONFIGS:
        name, precision, layout, mode = config.split(":")
        work = ModelWorkload(zoo.by_name([name])[0], False, device, precision, layout, mode)
        pair = lambda k: {key: work.runners[key] for key in ("torch", k)}   # noqa: E731
        for label, fns in [("all five in turns", work.runners),
                           ("torch and convert(model)", pair("every")),
                           ("torch and with a sample", pair("chosen")),
                           ("all five in turns again", work.runners),
                           ("torch and a copy", pair("copy")),
                           ("torch and convert(model) again", pair("every")),
                           ("all five, the garbage collector off", work.runners)]:
            gc.collect()
            if "collector off" in label:
                gc.disable()
            with launches_counted() as outcomes:
                t = measure.timed(device, fns, 10, "torch")
            gc.enable()
            print(f"== {config}, {label}: " + ", ".join(
                f"{k} {t.ms[k]:.3f} ms {t.speedup[k]:.2f}x" for k in fns)
                + " | graphs: " + ", ".join(f"{k} {v}" for k, v in outcomes.items())
                + f" (kept {graphs.kept()})", flush=True)


if __name__ == "__main__":
    main()
