"""gemmconv: transposed convolution as cuBLAS GEMM + col2im, for PyTorch."""
from . import nn
from .explain import Explanation, explain
from .gemm import float32_precision, get_float32_precision, set_float32_precision
from .graphs import get_graph_memory_limit, set_graph_memory_limit
from .nn import convert
from .ops import (col2im, conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d,
                  conv_transpose3d, get_workspace_limit, im2col, set_workspace_limit)
from .shapes import ConvArgumentError

__version__ = "0.1.0"

__all__ = ["explain", "Explanation", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "conv1d", "conv2d",
           "conv3d", "col2im", "im2col", "nn", "convert", "float32_precision",
           "get_float32_precision", "set_float32_precision", "get_workspace_limit",
           "set_workspace_limit", "get_graph_memory_limit", "set_graph_memory_limit",
           "ConvArgumentError"]
