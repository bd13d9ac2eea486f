"""gemmconv.nn modules against torch.nn: construction, weights, state_dict, repr, forward."""
import io

import pytest
import torch

import gemmconv
from helpers import rel_error

CONFIGS = [
    (1, dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1, output_padding=1)),
    (1, dict(in_channels=4, out_channels=4, kernel_size=5, groups=2, bias=False, dilation=2)),
    (2, dict(in_channels=3, out_channels=8, kernel_size=(3, 2), stride=(2, 1), padding=(1, 0))),
    (2, dict(in_channels=6, out_channels=6, kernel_size=3, groups=3, dilation=(1, 2))),
    (3, dict(in_channels=2, out_channels=4, kernel_size=(2, 3, 1), stride=2, output_padding=(1, 0, 1))),
    (3, dict(in_channels=4, out_channels=2, kernel_size=2, groups=2, bias=False)),
]
PAIRS = {1: (torch.nn.ConvTranspose1d, gemmconv.nn.ConvTranspose1d),
         2: (torch.nn.ConvTranspose2d, gemmconv.nn.ConvTranspose2d),
         3: (torch.nn.ConvTranspose3d, gemmconv.nn.ConvTranspose3d)}


def _pair(nd, kw, seed=0):
    theirs_cls, ours_cls = PAIRS[nd]
    torch.manual_seed(seed)
    theirs = theirs_cls(**kw).double()
    torch.manual_seed(seed)
    ours = ours_cls(**kw).double()
    return theirs, ours


@pytest.mark.parametrize("nd,kw", CONFIGS)
def test_same_construction_weights_repr_and_state_dict(nd, kw):
    theirs, ours = _pair(nd, kw, seed=nd)
    assert isinstance(ours, PAIRS[nd][0])
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for a, b in zip(ours.state_dict().values(), theirs.state_dict().values()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("nd,kw", CONFIGS)
def test_forward_matches_torch_and_loads_torch_checkpoints(nd, kw):
    theirs, ours = _pair(nd, kw, seed=10 + nd)
    torch.manual_seed(99)
    ours.load_state_dict(PAIRS[nd][0](**kw).double().state_dict())   # other weights, torch's
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, kw["in_channels"], *[5, 4, 3][:nd], dtype=torch.float64, requires_grad=True)
    out, ref = ours(x), theirs(x)
    assert rel_error(out, ref) < 1e-12
    g_ours = torch.autograd.grad(out.square().sum(), [x, *ours.parameters()])
    g_theirs = torch.autograd.grad(ref.square().sum(), [x, *theirs.parameters()])
    for a, b in zip(g_ours, g_theirs):
        assert rel_error(a, b) < 1e-12


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_output_size_argument(nd):
    kw = dict(in_channels=2, out_channels=3, kernel_size=3, stride=3, padding=1)
    theirs, ours = _pair(nd, kw)
    x = torch.randn(1, 2, *[4] * nd, dtype=torch.float64)
    for extra in (0, 1, 2):
        size = [10 + extra] * nd
        out = ours(x, output_size=size)
        assert out.shape[2:] == tuple(size)
        assert rel_error(out, theirs(x, output_size=size)) < 1e-12
    with pytest.raises(ValueError):
        ours(x, output_size=[13] * nd)


def test_swapped_model_loads_old_checkpoint():
    torch.manual_seed(0)
    old = torch.nn.Sequential(torch.nn.ConvTranspose2d(4, 8, 4, 2, 1), torch.nn.ReLU(),
                              torch.nn.ConvTranspose2d(8, 3, 3, padding=1))
    buffer = io.BytesIO()
    torch.save(old.state_dict(), buffer)
    new = torch.nn.Sequential(gemmconv.nn.ConvTranspose2d(4, 8, 4, 2, 1), torch.nn.ReLU(),
                              gemmconv.nn.ConvTranspose2d(8, 3, 3, padding=1))
    buffer.seek(0)
    new.load_state_dict(torch.load(buffer))
    x = torch.randn(2, 4, 6, 7)
    assert rel_error(new(x), old(x)) < 1e-6


def test_non_zero_padding_mode_is_rejected_like_torch():
    with pytest.raises(ValueError, match="zeros"):
        gemmconv.nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")


@pytest.mark.parametrize("module", ["ConvTranspose2d", "Conv2d"])
def test_modules_skip_the_custom_ops_dispatch(monkeypatch, module):
    """A module's Parameters are plain tensors to gemmconv: eager calls take ops._Eager,
    forward and backward, not the custom ops' dispatch (tens of microseconds a call)."""
    def refuse(*args):
        raise AssertionError("the custom op ran")
    for name in ("_conv_transpose_op", "_conv_op"):
        monkeypatch.setattr(gemmconv.ops, name, refuse)
    theirs = getattr(torch.nn, module)(3, 4, 3, stride=2).double()
    ours = gemmconv.convert(torch.nn.Sequential(getattr(torch.nn, module)(3, 4, 3, stride=2)),
                            types=(getattr(torch.nn, module),))[0].double()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64)
    mine, ref = ours(x), theirs(x)
    assert rel_error(mine, ref) < 1e-12
    mine.square().sum().backward()
    ref.square().sum().backward()
    assert rel_error(ours.weight.grad, theirs.weight.grad) < 1e-12


def test_a_modules_steady_key_differs_wherever_its_checks_or_plans_could():
    """ops._steady_key lets a module's CUDA call that reads what its last one read skip the
    argument checks and the replays' lookups: it must tell apart every setting and every
    property of a tensor that those read."""
    from gemmconv import ops
    m = gemmconv.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
    x = torch.randn(2, 4, 5, 5)

    def key(x=x, weight=m.weight, bias=m.bias):
        return ops._steady_key(m, x, weight, bias)
    base = key()
    assert key() == base and key(x.clone()) == base and len({base, key(x.clone())}) == 1
    shifted = torch.randn(x.numel() + 1)[1:].view(x.shape)   # 4 bytes off 16-byte alignment
    variants = [key(x[:1]), key(torch.randn(2, 4, 5, 6)), key(x.double()), key(shifted),
                key(x.contiguous(memory_format=torch.channels_last)), key(bias=None),
                key(weight=m.weight.double()), key(weight=m.weight[:, :3]),
                key(weight=m.weight.contiguous(memory_format=torch.channels_last))]
    for setting, value in (("stride", (1, 1)), ("padding", (0, 0)), ("output_padding", (0, 0)),
                           ("dilation", (2, 2)), ("groups", 2)):
        before = getattr(m, setting)
        setattr(m, setting, value)
        variants.append(key())
        setattr(m, setting, before)
    with gemmconv.float32_precision("ieee"):
        variants.append(key())
    limit = ops.get_workspace_limit()
    ops.set_workspace_limit(limit // 2)
    try:
        variants.append(key())
    finally:
        ops.set_workspace_limit(limit)
    assert key() == base
    assert [i for i, v in enumerate(variants) if v == base] == []
