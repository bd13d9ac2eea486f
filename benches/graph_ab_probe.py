"""Do our CUDA graphs cost a model whose GPU, not its host, sets the pace? (Session 50: the
VAE decoder's float32 channels_last forward reads 0.89-0.91x converted, each layer alone
1.04-1.62x; session 49's profile put 94 us a step of idle GPU right before our graphs'
kernels.)

Per configuration, paired against torch's model in turns (measure.timed, back to back):
the converted model as it runs, and the same with gemmconv.graphs.paused() around each
step (every call launches its kernels one by one; the kept graphs stay kept).

    PYTHONPATH=. python benches/graph_ab_probe.py [REPEATS] [model:precision:layout:mode ...]

On a machine without a GPU it runs the zoo's reduced sizes (a check that it runs).
"""
import sys

sys.path.insert(0, "benches")
from probe_lib import graphs_paused, paired_variants  # noqa: E402

CONFIGS = ["vae:float32:channels_last:forward", "vae:float32:channels_last:train",
           "vae:float32:NCHW:forward", "dcgan:float32:channels_last:forward",
           "dcgan:float32:channels_last:train", "vae:bf16-autocast:channels_last:forward"]

if __name__ == "__main__":
    paired_variants(sys.argv[1:], CONFIGS, lambda step: {
        "ours": step, "ours, no graphs": graphs_paused(step)})
