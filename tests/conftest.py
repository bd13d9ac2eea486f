import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def fresh_replays(monkeypatch):
    """Each test starts with no replays kept (ops._replays, ops._backward_replays,
    ops._conv_replays, ops._conv_backward_replays, a module's ops._steady) and no graphs
    of them (graphs.py): a replay keeps its first call's route, which a test's patched
    cost model or routes would not reach otherwise."""
    import weakref
    from gemmconv import graphs, ops
    monkeypatch.setattr(ops, "_replays", {})
    monkeypatch.setattr(ops, "_backward_replays", {})
    monkeypatch.setattr(ops, "_conv_replays", {})
    monkeypatch.setattr(ops, "_conv_backward_replays", {})
    monkeypatch.setattr(ops, "_steady", weakref.WeakKeyDictionary())
    graphs.forget()
