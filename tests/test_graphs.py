"""CPU: the bookkeeping of kept CUDA graphs (gemmconv.graphs), over a stand-in capture:
a graph is captured on the second call of one owner at one set of addresses on one stream,
launched on later ones, never at other addresses, within the memory limit and MAX_GRAPHS,
in one memory pool a stream, and a graph let go is not captured again."""
import contextlib

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

    def raw_cuda_graph_exec(self):
        return 1000 + id(self) % 1000


@pytest.fixture
def captured(monkeypatch):
    """The graphs captured, in order; the run each capture was given is called once, as a
    capture issues its launches."""
    made = []

    def capture(run, device, pool):
        run()
        made.append(FakeGraph())
        made[-1].pool = pool
        return made[-1]
    monkeypatch.setattr(graphs, "_capture", capture)
    handles = iter(range(1000))
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: (0, next(handles)))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(graphs, "_memory_limit", 100)
    # graphs.py alone: the C++ node's module (loaded by earlier tests) is not told of these
    # stand-ins (test_node tests what it is told)
    monkeypatch.setattr(graphs, "_observer", None)
    graphs.forget()
    yield made
    graphs.forget()


def launch(owner, addresses, nbytes=10, runs=None, stream=7):
    return graphs.launch(owner, addresses, lambda: runs.append(1) if runs is not None else None,
                         lambda: nbytes, torch.device("cpu"), stream)


def test_a_kept_graph_is_launched_without_its_size_worked_out(captured):
    """The byte count (a call's graph_bytes) is asked for while a graph may be captured, not
    on the launches of a kept one: they are a small call's whole host time."""
    owner, asked = object(), []
    size = lambda: asked.append(1) or 10   # noqa: E731
    for _ in range(4):
        graphs.launch(owner, (1,), lambda: None, size, torch.device("cpu"), 7)
    assert graphs.kept() == 1 and len(asked) == 2


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


def test_the_least_recently_launched_is_let_go_and_not_captured_again(captured, monkeypatch):
    monkeypatch.setattr(graphs, "MAX_GRAPHS", 2)
    a, b, c = object(), object(), object()
    for owner in (a, b):
        launch(owner, (1,)), launch(owner, (1,))
    launch(a, (1,))          # a launched last: b is the least recent
    launch(c, (1,)), launch(c, (1,))
    assert captured[1].was_reset and not captured[0].was_reset and graphs.kept() == 2
    assert [launch(b, (1,)) for _ in range(3)] == [False] * 3
    assert len(captured) == 3


def test_one_pool_a_stream(captured):
    a, b, c = object(), object(), object()
    for owner, stream in ((a, 7), (b, 7), (c, 8)):
        launch(owner, (1,), stream=stream), launch(owner, (1,), stream=stream)
    assert captured[0].pool == captured[1].pool != captured[2].pool
    assert launch(a, (1,), stream=8) is False, "a stream is part of the key"
    graphs.forget()
    d = object()
    launch(d, (1,)), launch(d, (1,))
    assert captured[3].pool not in (captured[0].pool, captured[2].pool), \
        "a pool no graph uses any more is let go"


def test_lowering_the_limit_lets_go_of_the_graphs_over_it(captured):
    small, large = object(), object()
    for owner, nbytes in ((small, 5), (large, 50)):
        launch(owner, (1,), nbytes), launch(owner, (1,), nbytes)
    graphs.set_graph_memory_limit(10)
    assert captured[1].was_reset and not captured[0].was_reset and graphs.kept() == 1
    assert graphs.get_graph_memory_limit() == 10


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
def test_the_limit_must_be_bytes(bad):
    with pytest.raises(ValueError, match="graph memory limit"):
        graphs.set_graph_memory_limit(bad)


def test_nothing_while_a_graph_is_captured(captured, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    owner = object()
    assert [launch(owner, (1,)) for _ in range(3)] == [False] * 3
    assert not captured


def test_paused_launches_and_captures_nothing_and_keeps_what_is_kept(captured):
    """Inside graphs.paused() (the bench's memory measurement) every call runs its own
    kernels: no graph is launched, none captured, no key remembered; after, a kept graph
    launches again, and a call seen only while paused is seen for the first time."""
    kept, new, runs = object(), object(), []
    launch(kept, (1,)), launch(kept, (1,))
    with graphs.paused():
        with graphs.paused():   # (nested: the outer one still holds after the inner)
            assert launch(kept, (1,)) is False
        assert [launch(new, (2,), runs=runs) for _ in range(3)] == [False] * 3
    assert captured[0].replays == 1 and len(captured) == 1 and not runs
    assert launch(kept, (1,)) is True and captured[0].replays == 2
    assert launch(new, (2,)) is False and launch(new, (2,)) is True


def test_forget(captured):
    owner = object()
    launch(owner, (1,)), launch(owner, (1,))
    graphs.forget()
    assert captured[0].was_reset and graphs.kept() == 0
    assert launch(owner, (1,)) is False


def test_a_capture_short_of_memory_launches_as_before(captured, monkeypatch):
    def capture(run, device, pool):
        raise torch.OutOfMemoryError("the pool could not grow")
    monkeypatch.setattr(graphs, "_capture", capture)
    owner = object()
    assert [launch(owner, (1,)) for _ in range(4)] == [False] * 4
    assert graphs.kept() == 0 and not graphs._pools


class FakeStreams:
    """torch.cuda's streams and graphs on the CPU: what _capture asks of them, in order."""

    def __init__(self, monkeypatch, fails=None):
        self.events = []
        events = self.events

        class Stream:
            def __init__(self, name):
                self.name = name

            def wait_stream(self, other):
                events.append(f"{self.name} waits for {other.name}")

        class Graph:
            def capture_begin(self, pool, capture_error_mode):
                events.append(f"begin {pool} {capture_error_mode}")

            def capture_end(self):
                events.append("end")
                if fails == "end":
                    raise RuntimeError("capture invalidated")

            def reset(self):
                events.append("reset")

        monkeypatch.setattr(torch.cuda, "current_stream", lambda device: Stream("current"))
        monkeypatch.setattr(graphs, "_side_stream", lambda device: Stream("side"))
        monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
        monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)


def test_capture_on_a_side_stream(monkeypatch):
    streams = FakeStreams(monkeypatch)
    graphs._capture(lambda: streams.events.append("run"), torch.device("cpu"), (0, 1))
    assert streams.events == ["side waits for current", "begin (0, 1) thread_local", "run",
                              "end", "current waits for side"]


@pytest.mark.parametrize("fails", [None, "end"])
def test_a_failed_capture_is_ended_and_let_go(monkeypatch, fails):
    streams = FakeStreams(monkeypatch, fails)

    def run():
        raise torch.OutOfMemoryError("out of memory")
    with pytest.raises(torch.OutOfMemoryError):
        graphs._capture(run, torch.device("cpu"), (0, 1))
    assert streams.events[-2:] == ["end", "reset"]


class _Observer:
    """The C++ node's module's stand-in: what graphs.py tells it, and the graphs it
    'launched'."""
    def __init__(self):
        self.kept, self.paused, self.recently = {}, [], []

    def keep(self, serial, handle):
        self.kept[serial] = handle

    def let_go(self, serial):
        del self.kept[serial]

    def set_paused(self, paused):
        self.paused.append(paused)

    def launched(self):
        launched, self.recently = self.recently, []
        return launched


def test_graphs_tell_the_node_what_it_may_launch(captured, monkeypatch):
    """graphs.py tells the C++ node's module of each graph it keeps (by a serial number,
    with its handle) and lets go, and of pauses; a graph the node launched counts as
    launched when graphs are let go for room."""
    monkeypatch.setattr(graphs, "MAX_GRAPHS", 2)
    owners = [object() for _ in range(3)]
    assert not launch(owners[0], (1, 2)) and launch(owners[0], (1, 2))   # seen, captured
    observer = _Observer()
    graphs._observe(observer)   # told of the graph kept before
    first = graphs.serial(owners[0], 7, (1, 2))
    assert observer.kept == {first: captured[0].raw_cuda_graph_exec()}
    assert observer.paused == [False]
    assert not launch(owners[1], (1, 2)) and launch(owners[1], (1, 2))
    second = graphs.serial(owners[1], 7, (1, 2))
    assert second != first and set(observer.kept) == {first, second}
    assert graphs.serial(owners[2], 7, (1, 2)) is None
    with graphs.paused():
        assert observer.paused[-1] is True
        assert not launch(owners[0], (1, 2))
    assert observer.paused[-1] is False
    observer.recently = [first]   # the node launched the older one since: the other goes
    assert not launch(owners[2], (1, 2)) and launch(owners[2], (1, 2))
    assert set(observer.kept) == {first, graphs.serial(owners[2], 7, (1, 2))}
    assert graphs.serial(owners[1], 7, (1, 2)) is None
    graphs.forget()
    assert observer.kept == {}

