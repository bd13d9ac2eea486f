"""Bad input: a clear ConvArgumentError (a RuntimeError, like torch's) before any work runs."""
import re

import pytest
import torch
import torch.nn.functional as F

import gemmconv
from gemmconv import ConvArgumentError, columns, gemm, shapes

X, W = (4, 4, 5, 5), (4, 3, 3, 3)          # a valid conv_transpose2d call: input, weight shapes
BAD = [
    # (what is wrong, input shape, weight shape, keyword arguments, message fragment)
    ("too few dims", (5, 5), W, {}, "Expected 3D (unbatched) or 4D (batched) input"),
    ("too many dims", (1, 4, 4, 5, 5), W, {}, "Expected 3D (unbatched) or 4D (batched) input"),
    ("weight dims", X, (4, 3, 3), {}, "Expected 4D weight"),
    ("channel mismatch", X, (3, 3, 3, 3), {}, "to have 3 channels, but got 4 channels"),
    ("groups do not divide", X, W, {"groups": 3}, "expected weight to be divisible by 3"),
    ("groups more than channels", X, W, {"groups": 8}, "expected weight to be at least 8"),
    ("zero groups", X, W, {"groups": 0}, "non-positive groups"),
    ("output_padding >= stride and dilation", X, W, {"output_padding": 1}, "output padding must be smaller"),
    ("output_padding one dim", X, W, {"stride": (2, 1), "output_padding": (1, 1)}, "output padding must be smaller"),
    ("negative output_padding", X, W, {"output_padding": -1}, "negative output_padding"),
    ("negative padding", X, W, {"padding": (0, -1)}, "negative padding"),
    ("zero stride", X, W, {"stride": 0}, "non-positive stride"),
    ("negative stride", X, W, {"stride": (1, -2)}, "non-positive stride"),
    ("zero dilation", X, W, {"dilation": 0}, "dilation should be greater than zero"),
    ("stride tuple too long", X, W, {"stride": (1, 1, 1)}, "list of 2 values"),
    ("padding tuple too short", X, W, {"padding": ()}, "list of 2 values"),
    ("dilation tuple too long", X, W, {"dilation": [1, 2, 3]}, "list of 2 values"),
    ("output size <= 0", X, W, {"padding": 4}, "Output size is too small"),
    ("output size 0 in one dim", (4, 4, 1, 5), (4, 3, 1, 3), {"padding": (1, 0)}, "Output size is too small"),
    ("empty spatial input", (4, 4, 0, 5), W, {}, "Only zero batch or zero channel inputs"),
    ("bias of wrong length", X, W, {"bias": (4,)}, "expected bias to be 1-dimensional with 3 elements"),
    ("bias of wrong rank", X, W, {"bias": (3, 1)}, "expected bias to be 1-dimensional"),
]


def _call(fn, x_shape, w_shape, kw, **tensor_kw):
    kw = dict(kw)
    bias = kw.pop("bias", None)
    x = torch.randn(x_shape, **tensor_kw)
    w = torch.randn(w_shape, **tensor_kw)
    b = None if bias is None else torch.randn(bias, **tensor_kw)
    return fn(x, w, b, **kw)


@pytest.fixture
def no_work(monkeypatch):
    """Fails the test if a GEMM or column kernel runs."""
    def refuse(*args, **kwargs):
        raise AssertionError("work started before the arguments were checked")
    for module, name in ((gemm, "matmul"), (columns, "col2im"), (columns, "im2col")):
        monkeypatch.setattr(module, name, refuse)


@pytest.mark.parametrize("what,x,w,kw,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_named_before_any_work(no_work, what, x, w, kw, message):
    with pytest.raises(ConvArgumentError, match=re.escape(message)) as error:
        _call(gemmconv.conv_transpose2d, x, w, kw)
    assert isinstance(error.value, RuntimeError) and isinstance(error.value, ValueError)


@pytest.mark.parametrize("what,x,w,kw,message", BAD, ids=[b[0] for b in BAD])
def test_torch_rejects_the_same_input(what, x, w, kw, message):
    with pytest.raises(RuntimeError):
        _call(F.conv_transpose2d, x, w, kw)


@pytest.mark.parametrize("bad", ["weight", "bias"])
def test_mismatched_dtypes(no_work, bad):
    x, w, b = torch.randn(X), torch.randn(W), torch.randn(3)
    args = {"weight": (x, w.double(), b), "bias": (x, w, b.double())}[bad]
    with pytest.raises(ConvArgumentError, match=f"Input type \\(torch.float32\\) and {bad} type"):
        gemmconv.conv_transpose2d(*args)


def test_unsupported_dtype(no_work):
    with pytest.raises(ConvArgumentError, match="supports float16, bfloat16, float32 and float64"):
        gemmconv.conv_transpose2d(torch.ones(X, dtype=torch.int64), torch.ones(W, dtype=torch.int64))


def test_non_tensor_argument(no_work):
    with pytest.raises(TypeError, match="argument 'weight' must be Tensor"):
        gemmconv.conv_transpose1d(torch.randn(1, 2, 3), [[1.0]])


def test_bool_is_not_an_int(no_work):
    with pytest.raises(ConvArgumentError, match="stride"):
        gemmconv.conv_transpose2d(torch.randn(X), torch.randn(W), stride=(True, 1))


def test_checks_are_remembered_per_signature_and_bad_calls_still_fail(monkeypatch):
    """A good call's checked arguments serve later calls of its signature; a call differing
    in anything the checks read (a bool or float for an int, a dtype, a device, a shape)
    is checked afresh and fails as it would have."""
    runs = []
    check_tensors = shapes._check_tensors
    monkeypatch.setattr(shapes, "_check_tensors", lambda *a: runs.append(a) or check_tensors(*a))
    shapes.conv_transpose_args.remembered.clear()
    good = dict(stride=(2, 1), padding=1)
    for _ in range(2):
        out = gemmconv.conv_transpose2d(torch.randn(X), torch.randn(W), **good)
        assert out.shape == F.conv_transpose2d(torch.randn(X), torch.randn(W), **good).shape
    assert len(runs) == 1
    bad = [
        ((X, W, torch.float32, "cpu", {"stride": (True, 1), "padding": 1}), "list of 2 values"),
        ((X, W, torch.float32, "cpu", {"stride": (2.0, 1), "padding": 1}), "list of 2 values"),
        ((X, W, torch.float32, "meta", good), "Expected all tensors to be on the same device"),
        (((4, 3, 5, 5), W, torch.float32, "cpu", good), "to have 4 channels, but got 3"),
        ((X, W, torch.float16, "cpu", good), "Input type (torch.float32) and weight type"),
    ]
    for (x, w, dtype, device, kw), message in bad:
        for _ in range(2):                       # not remembered: fails the second time too
            with pytest.raises(ConvArgumentError, match=re.escape(message)):
                gemmconv.conv_transpose2d(torch.randn(x), torch.randn(w, dtype=dtype, device=device), **kw)
    args = ("conv_transpose2d", 2, torch.randn(X), torch.randn(W), None, (2, 1), 1, 0, 1, 1)
    assert shapes.conv_transpose_args(*args) is shapes.conv_transpose_args(*args)
    signature = lambda *settings: shapes._signature(*args[:2], args[2:5], settings, {})
    assert signature(*args[5:]) is not None
    assert signature(torch.tensor(2), *args[6:]) is None and signature(2.0, *args[6:]) is None
