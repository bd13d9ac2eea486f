"""Drop-in modules: torch.nn's transposed convolutions, convolutions, Fold and Unfold,
computed by gemmconv.

Each class subclasses its torch.nn counterpart and replaces only the computation, so the
constructor, parameter names, initialisation (the same weights under the same seed),
``state_dict``, ``repr`` and ``isinstance`` checks are torch's own, and a model that swaps
them in loads its old checkpoints unchanged. :func:`convert` swaps them into a built model.

Every other name is torch.nn's, so ``from gemmconv import nn`` can replace
``from torch import nn`` in code that builds models.
"""
from typing import TYPE_CHECKING, Callable, Iterable, List, Optional, overload

import torch
import torch.nn.functional as F

from . import ops

if TYPE_CHECKING:
    from . import measure


class _GemmConvTranspose:
    _functional: Callable[..., torch.Tensor]

    def forward(self, input: torch.Tensor, output_size: Optional[List[int]] = None) -> torch.Tensor:
        if output_size is None:   # the module's own settings (ops.module_conv_transpose)
            return ops.module_conv_transpose(self, input)
        nd = len(self.kernel_size)
        output_padding = self._output_padding(input, output_size, self.stride, self.padding,
                                              self.kernel_size, nd, self.dilation)
        return self._functional(input, self.weight, self.bias, self.stride, self.padding,
                                output_padding, self.groups, self.dilation)


class ConvTranspose1d(_GemmConvTranspose, torch.nn.ConvTranspose1d):
    """``torch.nn.ConvTranspose1d`` running :func:`gemmconv.conv_transpose1d`."""
    _functional = staticmethod(ops.conv_transpose1d)


class ConvTranspose2d(_GemmConvTranspose, torch.nn.ConvTranspose2d):
    """``torch.nn.ConvTranspose2d`` running :func:`gemmconv.conv_transpose2d`."""
    _functional = staticmethod(ops.conv_transpose2d)


class ConvTranspose3d(_GemmConvTranspose, torch.nn.ConvTranspose3d):
    """``torch.nn.ConvTranspose3d`` running :func:`gemmconv.conv_transpose3d`."""
    _functional = staticmethod(ops.conv_transpose3d)


class _GemmConv:
    _functional: Callable[..., torch.Tensor]

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor,
                      bias: Optional[torch.Tensor]) -> torch.Tensor:
        if self.padding_mode != "zeros":   # as torch: pad by the mode, then convolve unpadded
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return self._functional(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return ops.module_conv(self, input, weight, bias)


class Conv1d(_GemmConv, torch.nn.Conv1d):
    """``torch.nn.Conv1d`` running :func:`gemmconv.conv1d` (every padding_mode)."""
    _functional = staticmethod(ops.conv1d)


class Conv2d(_GemmConv, torch.nn.Conv2d):
    """``torch.nn.Conv2d`` running :func:`gemmconv.conv2d` (every padding_mode)."""
    _functional = staticmethod(ops.conv2d)


class Conv3d(_GemmConv, torch.nn.Conv3d):
    """``torch.nn.Conv3d`` running :func:`gemmconv.conv3d` (every padding_mode)."""
    _functional = staticmethod(ops.conv3d)


class Fold(torch.nn.Fold):
    """``torch.nn.Fold`` running :func:`gemmconv.col2im` (1, 2 or 3 spatial dims)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return ops.col2im(input, self.output_size, self.kernel_size, self.dilation,
                          self.padding, self.stride)


class Unfold(torch.nn.Unfold):
    """``torch.nn.Unfold`` running :func:`gemmconv.im2col` (1, 2 or 3 spatial dims)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return ops.im2col(input, self.kernel_size, self.dilation, self.padding, self.stride)


SWAPS = {torch.nn.ConvTranspose1d: ConvTranspose1d, torch.nn.ConvTranspose2d: ConvTranspose2d,
         torch.nn.ConvTranspose3d: ConvTranspose3d, torch.nn.Conv1d: Conv1d,
         torch.nn.Conv2d: Conv2d, torch.nn.Conv3d: Conv3d, torch.nn.Fold: Fold,
         torch.nn.Unfold: Unfold}
TRANSPOSED = (torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


@overload
def convert(model: torch.nn.Module, *, types: Iterable[type] = ...,
            sample: None = None, repeats: int = ...) -> torch.nn.Module: ...


@overload
def convert(model: torch.nn.Module, *, types: Iterable[type] = ...,
            sample: "measure.Sample", repeats: int = ...) -> "measure.ConversionReport": ...


def convert(model, *, types=TRANSPOSED, sample=None, repeats=10):
    """Makes the modules of ``model`` whose class is one of ``types`` (torch.nn classes;
    default: the transposed convolutions; add ``torch.nn.Conv2d`` and so on to convert those
    too) run on gemmconv, in place.

    Without a ``sample``, every such module is swapped, and ``model`` is returned. With one
    (the model's input: a tensor, or a sequence of the model's positional arguments),
    the model runs once on it, each such module is timed as torch's and as gemmconv's on
    inputs of the shape, dtype, device and memory format it got (forward, plus backward
    where the model is in training mode and gradients are enabled; under the caller's
    autocast, if any), the median of ``repeats`` runs each, and only the modules gemmconv
    runs faster are swapped (swapped ones that lose go back to torch's class); then the
    whole model is timed with torch's classes throughout, with those choices and with
    gemmconv's throughout, and the fastest of the three is kept: torch's classes unless
    another is faster by 3% (``measure.MODEL_MARGIN``, above the spread of two timings of
    one and the same model). Returns a
    :class:`gemmconv.measure.ConversionReport` of what was measured and decided: ``print``
    it for a table; its ``model`` is ``model``. Parameters, gradients and buffers are left
    as they were.

    Only each module's class changes (to gemmconv's subclass of it): its Parameter objects,
    buffers, hooks and state_dict keys stay as they are, so optimizers already holding the
    parameters keep working and checkpoints load either way.
    """
    types = tuple(types)
    unknown = [t for t in types if t not in SWAPS]
    if unknown:
        raise ValueError(f"gemmconv.convert: no gemmconv module for {unknown}; it converts "
                         f"{[t.__name__ for t in SWAPS]}")
    if sample is not None:
        from . import measure
        return measure.choose(model, sample, types, repeats)
    for module in model.modules():
        if type(module) in types:
            module.__class__ = SWAPS[type(module)]
    return model


def __getattr__(name: str):
    return getattr(torch.nn, name)
