"""Drop-in modules: torch.nn.ConvTranspose1d/2d/3d, computed by gemmconv.

Each class subclasses its torch.nn counterpart and replaces only ``forward``, so the
constructor, parameter names, initialisation (the same weights under the same seed),
``state_dict``, ``repr`` and ``isinstance`` checks are torch's own, and a model that swaps
them in loads its old checkpoints unchanged.
"""
from typing import Callable, List, Optional

import torch

from . import ops


class _GemmConvTranspose:
    _functional: Callable[..., torch.Tensor]

    def forward(self, input: torch.Tensor, output_size: Optional[List[int]] = None) -> torch.Tensor:
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
