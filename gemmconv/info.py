"""``python -m gemmconv info``: what a bug report needs to say about this machine.

Versions (gemmconv, Python, torch, CuPy, CUDA and the driver), the GPUs, whether NVRTC
compiles gemmconv's kernels here and whether its C++ autograd node builds, the kernel
cache's location and size, and the settings that change what a call does (workspace
limit, float32 precision policy).
"""
from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

from . import __version__, _node, gemm, ops


def _cupy():
    try:
        import cupy
        return cupy
    except ImportError:
        return None


def _cache_dir() -> Path:
    """Where CuPy keeps compiled kernels (its CUPY_CACHE_DIR, else its default)."""
    return Path(os.environ.get("CUPY_CACHE_DIR", Path.home() / ".cupy" / "kernel_cache"))


def _size(path: Path) -> tuple[int, int]:
    """Files under ``path`` and their bytes."""
    files = [f for f in path.rglob("*") if f.is_file()] if path.is_dir() else []
    return len(files), sum(f.stat().st_size for f in files)


def _nvrtc(cupy) -> str:
    """Whether NVRTC compiles gemmconv's col2im.cu here (one generic kernel)."""
    if cupy is None:
        return "not tried: CuPy is not installed"
    if not torch.cuda.is_available():
        return "not tried: no CUDA device"
    from . import _cuda
    try:
        _cuda._compile(torch.cuda.current_device(),
                       {"col2im": "gemmconv::col2im_kernel<float, int, 2>"})
    except Exception as error:   # the report shows why, whatever it is
        return f"FAILS: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    version = ".".join(map(str, cupy.cuda.nvrtc.getVersion()))
    return f"compiles gemmconv/col2im.cu (NVRTC {version})"


def _autograd_node() -> str:
    """Whether the C++ autograd node of module calls builds here (built now if not yet)."""
    import warnings
    with warnings.catch_warnings(record=True):   # (the report says it instead)
        warnings.simplefilter("always")
        module = _node.load()
    if module is None:
        return f"FAILS (module calls use a Python autograd Function): {_node._error}"
    return f"builds ({module.__file__})"


def report() -> str:
    """The lines ``python -m gemmconv info`` prints."""
    cupy = _cupy()
    lines = [f"gemmconv {__version__} ({Path(__file__).parent})",
             f"python {platform.python_version()} ({platform.platform()})",
             f"torch {torch.__version__} (CUDA build {torch.version.cuda or 'none'})",
             f"cupy {cupy.__version__}" if cupy else
             "cupy not installed (CUDA tensors need it: pip install 'gemmconv[cuda13]' or "
             "'gemmconv[cuda12]')"]
    if torch.cuda.is_available():
        driver = "unknown"
        if cupy is not None:
            version = cupy.cuda.runtime.driverGetVersion()
            driver = f"{version // 1000}.{version % 1000 // 10}"
        lines.append(f"CUDA runtime {torch.version.cuda}, driver supports CUDA {driver}")
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            lines.append(f"GPU {i}: {p.name}, compute capability {p.major}.{p.minor}, "
                         f"{p.total_memory / 2**30:.0f} GiB")
    else:
        lines.append("CUDA: no device available (gemmconv runs its CPU path)")
    lines.append(f"NVRTC: {_nvrtc(cupy)}")
    lines.append(f"C++ autograd node: {_autograd_node()}")
    files, size = _size(_cache_dir())
    lines.append(f"kernel cache: {_cache_dir()} ({files} files, {size / 1e6:.1f} MB)")
    limit = ops.get_workspace_limit()
    lines.append(f"workspace limit: {limit} bytes ({limit / 2**30:.2f} GiB; "
                 "gemmconv.set_workspace_limit)")
    tf32 = gemm.uses_tf32()
    lines.append(f"float32 precision: {gemm.get_float32_precision()!r} (float32 GEMMs on CUDA "
                 f"run on {'TF32 tensor cores' if tf32 else 'full float32'} now; "
                 "gemmconv.set_float32_precision)")
    return "\n".join(lines)
