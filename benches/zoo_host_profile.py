"""Where the host time of convert(model)'s calls goes on the zoo (cProfile, the GPU kept busy
by a sleep kernel so that nothing waits for it): per variant, torch's model's and the
converted one's host time a call, and the converted one's functions by own time and by
cumulative time.

    PYTHONPATH=. python benches/zoo_host_profile.py [MODEL:MODE:PRECISION:LAYOUT ...]
"""
import io
import pstats
import sys

import torch

sys.path.insert(0, "benches")
from overhead import busy_host_us, profiled  # noqa: E402
from zoo_probe import runners  # noqa: E402

VARIANTS = ["vae-decoder:forward:bf16-autocast:channels_last",
            "vae-decoder:forward:float32:channels_last", "vae-decoder:forward:float32:NCHW",
            "vae-decoder:train:float32:channels_last"]


def main() -> int:
    print(torch.cuda.get_device_name(), flush=True)
    for spec in sys.argv[1:] or VARIANTS:
        runs = runners(spec)
        for run in runs.values():
            for _ in range(5):
                run()
        host = {k: busy_host_us(r, calls=10) for k, r in runs.items()}
        print(f"\n=== {spec}: busy host us a call: torch {host['torch']:.0f}, ours "
              f"{host['ours']:.0f}", flush=True)
        stats = pstats.Stats(profiled(runs["ours"], 20, 2_000_000_000), stream=io.StringIO())
        for order, rows in (("tottime", 25), ("cumulative", 40)):
            stats.stream = io.StringIO()
            stats.sort_stats(order).print_stats(rows)
            text = stats.stream.getvalue()
            print(f"--- ours by {order} (20 calls)\n" + text[text.find("ncalls"):], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
