"""Does the C++ side of a steady call (gemmconv/_node.py) win back a converted model's step?
(Session 50: DCGAN's channels_last step read 0.90x torch's with autograd's device threads
on, 1.10x with them off: the Python node on the device thread.)

Per configuration, paired against torch's model in turns (measure.timed): the converted
model as it runs (its steady calls' forward graphs launched from C++, their nodes C++:
session 52), the same with the C++ forward refused (session 51's code: the forward's launch
in Python), and with the extension refused (every call's node the Python Function), in one
process; then what the C++ forwards and nodes' backwards did (launched a kept graph, or
called Python and why).

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


class _NoForward:
    """The extension's module with its forward refused: steady forwards launch in Python."""
    def __init__(self, module) -> None:
        self._module = module

    def __getattr__(self, name: str):
        return getattr(self._module, name)

    @staticmethod
    def forward(*args):
        return None


def with_node(step, node):
    """``step`` with ops's ``_node`` in place of gemmconv._node (none: the Python Function)."""
    def run():
        ops._node = node
        try:
            return step()
        finally:
            ops._node = _node
    return run


if __name__ == "__main__":
    node = _node.load()
    print("C++ node built:", node is not None, flush=True)
    python_forward = types.SimpleNamespace(load=lambda: _NoForward(node))
    paired_variants(sys.argv[1:], CONFIGS, lambda step: {
        "ours, C++": step, "ours, Python forward": with_node(step, python_forward),
        "ours, Python node": with_node(step, _REFUSED)}, node.reset_outcomes,
        lambda: f"  C++ forwards: {node.forwards()}; backwards: {node.outcomes()}\n")
