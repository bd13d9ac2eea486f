"""Does the C++ autograd node (gemmconv/_node.py) win back a converted model's training step?
(Session 50: DCGAN's channels_last step read 0.90x torch's with autograd's device threads
on, 1.10x with them off: the Python node on the device thread.)

Per configuration, paired against torch's model in turns (measure.timed): the converted
model as it runs (its steady calls through the C++ node), and the same with the node
refused (every call's node the Python Function, as before the node), in one process; then
what the C++ nodes' backwards did (launched a kept graph, or called Python and why).

    PYTHONPATH=. python benches/node_probe.py [REPEATS] [model:precision:layout:mode ...]

On a machine without a GPU it runs the zoo's reduced sizes (a check that it runs).
"""
import sys
import types

from gemmconv import _node, ops

sys.path.insert(0, "benches")
from probe_lib import paired_variants  # noqa: E402

CONFIGS = ["dcgan:float32:channels_last:train", "dcgan:float32:NCHW:train",
           "vae:float32:channels_last:train", "vae:float32:NCHW:train",
           "vae:bf16-autocast:channels_last:train", "dcgan:bf16-autocast:channels_last:train"]
_REFUSED = types.SimpleNamespace(load=lambda: None)


def python_node(step):
    """``step`` with the C++ node refused: module calls take the Python Function."""
    def run():
        ops._node = _REFUSED
        try:
            return step()
        finally:
            ops._node = _node
    return run


if __name__ == "__main__":
    node = _node.load()
    print("C++ node built:", node is not None, flush=True)
    paired_variants(sys.argv[1:], CONFIGS, lambda step: {
        "ours, C++ node": step, "ours, Python node": python_node(step)},
        node.reset_outcomes, lambda: f"  the C++ nodes' backwards: {node.outcomes()}\n")
