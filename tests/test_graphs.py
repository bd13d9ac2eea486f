"""CPU: the bookkeeping of kept CUDA graphs (gemmconv.graphs), over a stand-in capture:
a graph is captured on the second call of one owner at one set of addresses, launched on
later ones, never at other addresses, within the memory limit, and a graph let go is not
captured again."""
import pytest
import torch

from gemmconv import graphs


class FakeGraph:
    def __init__(self):
        self.replays = 0
        self.was_reset = False

    def replay(self):
        self.replays += 1

    def reset(self):
        self.was_reset = True


@pytest.fixture
def captured(monkeypatch):
    """The graphs captured, in order; the run each capture was given is called once, as a
    capture issues its launches."""
    made = []

    def capture(run, device):
        run()
        made.append(FakeGraph())
        return made[-1]
    monkeypatch.setattr(graphs, "_capture", capture)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(graphs, "_memory_limit", 100)
    graphs.forget()
    yield made
    graphs.forget()


def launch(owner, addresses, nbytes=10, runs=None):
    return graphs.launch(owner, addresses, lambda: runs.append(1) if runs is not None else None,
                         nbytes, torch.device("cpu"))


def test_captured_on_the_second_call_then_launched(captured):
    owner, runs = object(), []
    assert launch(owner, (1, 2), runs=runs) is False and not captured and not runs
    assert launch(owner, (1, 2), runs=runs) is True
    assert len(captured) == 1 and captured[0].replays == 1 and runs == [1]
    assert launch(owner, (1, 2), runs=runs) is True
    assert len(captured) == 1 and captured[0].replays == 2 and runs == [1]
    assert graphs.kept() == 1


def test_other_addresses_or_owners_are_other_graphs(captured):
    first, second = object(), object()
    launch(first, (1, 2)), launch(first, (1, 2))
    assert launch(first, (1, 3)) is False
    assert launch(second, (1, 2)) is False
    assert len(captured) == 1 and captured[0].replays == 1


def test_over_the_limit_never_captured(captured):
    owner = object()
    assert [launch(owner, (1,), nbytes=101) for _ in range(3)] == [False] * 3
    assert not captured


def test_the_least_recently_launched_is_let_go_and_not_captured_again(captured):
    a, b, c = object(), object(), object()
    for owner in (a, b):
        launch(owner, (1,), nbytes=40), launch(owner, (1,), nbytes=40)
    launch(a, (1,), nbytes=40)          # a launched last: b is the least recent
    launch(c, (1,), nbytes=40), launch(c, (1,), nbytes=40)
    assert captured[1].was_reset and not captured[0].was_reset and graphs.kept() == 2
    assert [launch(b, (1,), nbytes=40) for _ in range(3)] == [False] * 3
    assert len(captured) == 3


def test_lowering_the_limit_lets_go(captured, monkeypatch):
    owner = object()
    launch(owner, (1,)), launch(owner, (1,))
    graphs.set_graph_memory_limit(5)
    assert captured[0].was_reset and graphs.kept() == 0
    assert graphs.get_graph_memory_limit() == 5


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
def test_the_limit_must_be_bytes(bad):
    with pytest.raises(ValueError, match="graph memory limit"):
        graphs.set_graph_memory_limit(bad)


def test_nothing_while_a_graph_is_captured(captured, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    owner = object()
    assert [launch(owner, (1,)) for _ in range(3)] == [False] * 3
    assert not captured


def test_forget(captured):
    owner = object()
    launch(owner, (1,)), launch(owner, (1,))
    graphs.forget()
    assert captured[0].was_reset and graphs.kept() == 0
    assert launch(owner, (1,)) is False
