"""Single configurations of the model zoo (bench.measure_model, as ``bench --models`` runs
them), for rows a run of the whole zoo did not reach in its time: each row's line, as the
CLI prints it, and its conversion reports with ``--layers``.

    PYTHONPATH=. python benches/zoo_rows.py model:precision:layout:mode ... [--layers]
"""
import sys

import torch

from gemmconv import bench, zoo


def main(args) -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    layers = "--layers" in args
    print(torch.cuda.get_device_name() if device.type == "cuda" else "CPU, reduced sizes",
          flush=True)
    for config in (a for a in args if a != "--layers"):
        name, precision, layout, mode = config.split(":")
        r = bench.measure_model(zoo.by_name([name])[0], device.type != "cuda", device,
                                precision, layout, mode)
        print(f"{r.model} {mode} {precision} {layout}: torch {r.torch_ms:.3f} ms, a copy "
              f"{r.speedup('copy'):.2f}x; convert {r.speedup('every'):.2f}x, with sample "
              f"{r.speedup('chosen'):.2f}x ({r.chosen}), all types {r.speedup('chosen_all'):.2f}x "
              f"({r.chosen_all})", flush=True)
        if layers:
            for variant, report in r.reports.items():
                print(f"\n{variant}:\n{report}\n", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
