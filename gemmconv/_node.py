"""The C++ side of a module's steady call (autograd_node.cpp), built at first use: its
forward's graph launch and its autograd node; and autocast's cached cast, which every call
under autocast takes (ops._autocast).

Why C++: a converted small model's training step lost 110-880 us a step on the host to
our Python autograd Function, run on autograd's device thread (benches/NOTES.md, session
50: with the device threads off, DCGAN's channels_last step read 1.10x torch's, against
0.90x with them). A module's steady call (ops._Steady) needs no Python past its key: the
extension launches the forward's kept CUDA graph, and its node the backward's, and each
calls Python only where none is kept for the call's addresses (which then tells the call's
table of the graph it kept).

The extension is compiled by torch.utils.cpp_extension (a C++ compiler and ninja; a minute
on a first use, cached by torch after). Where it cannot be built, :func:`load` warns once
and module calls keep the Python Function: the same results, more host time a step.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import warnings
from typing import Iterator, Optional

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "autograd_node.cpp")
_module = None
_error: Optional[BaseException] = None


def load():
    """The extension's module (built at the first call), or None where it could not be
    built (warned once)."""
    global _module, _error
    if _module is not None or _error is not None:
        return _module
    try:
        from torch.utils import cpp_extension
        directory = _build_directory(cpp_extension)
        _clear_stale_lock(directory)
        with _ninja_on_path():
            module = cpp_extension.load(name="gemmconv_autograd_node", sources=[_SOURCE],
                                        extra_cflags=["-O2"], build_directory=directory,
                                        verbose=False)
    except Exception as error:   # (no compiler, no ninja, no Python headers: say so, once)
        _error = error
        warnings.warn(f"gemmconv: its C++ autograd node could not be built ({error}); module "
                      "calls use a Python autograd Function instead, and autocast casts a "
                      "weight on every call: the same results, more host time a step",
                      RuntimeWarning, stacklevel=3)
        return None
    from . import graphs, ops
    module.set_python_backward(ops._steady_backward)
    graphs._observe(module)
    _module = module
    return module


# A build takes under a minute (44 s on the H200's host): a lock this old was left by a
# build that was killed, and torch's build would wait for it for ever.
STALE_LOCK_SECONDS = 600


def _build_directory(cpp_extension) -> str:
    """Where the extension is built: under torch's extensions root (TORCH_EXTENSIONS_DIR,
    else its default), one directory per Python and torch version."""
    import sys

    import torch
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    name = f"gemmconv_autograd_node-py{sys.version_info[0]}{sys.version_info[1]}-torch" \
           f"{torch.__version__}"
    directory = os.path.join(root, name)
    os.makedirs(directory, exist_ok=True)
    return directory


def _clear_stale_lock(directory: str) -> None:
    """Removes the build's lock where an interrupted build left it (STALE_LOCK_SECONDS)."""
    import time
    lock = os.path.join(directory, "lock")
    try:
        if time.time() - os.path.getmtime(lock) > STALE_LOCK_SECONDS:
            os.remove(lock)
            warnings.warn(f"gemmconv: removed {lock}, left by an interrupted build of its "
                          "C++ autograd node", RuntimeWarning, stacklevel=3)
    except FileNotFoundError:
        pass


@contextlib.contextmanager
def _ninja_on_path() -> Iterator[None]:
    """torch's build runs ``ninja`` from PATH; where none is there (a virtual environment
    used without activating it), the one pip installed with gemmconv (the ninja package's
    BIN_DIR), for the build only."""
    if shutil.which("ninja") is not None:
        yield
        return
    try:
        import ninja
    except ImportError:
        yield   # (the build then says that ninja is missing)
        return
    before = os.environ.get("PATH")
    os.environ["PATH"] = os.pathsep.join(p for p in (ninja.BIN_DIR, before) if p)
    try:
        yield
    finally:
        if before is None:
            del os.environ["PATH"]
        else:
            os.environ["PATH"] = before
