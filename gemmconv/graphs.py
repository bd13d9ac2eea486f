"""CUDA graphs of replayed calls: a small layer's launches as one.

A replayed call (ops._Replay, ops._BackwardReplay) still costs the host its launches: on
the H200's host a forward's GEMM, col2im and weight reorder took 50-60 of the 85-100 us a
small layer's call costs, where torch's whole convolution takes 25-35 (benches/NOTES.md),
and the GPU waits for the host there. A CUDA graph launches those kernels for the cost of
one launch.

A graph's kernels read and write the addresses they were captured with. So a graph is kept
per call (the replay's key) and per the addresses of every tensor the call reads or
writes (input, weight, bias, outputs, the stream it runs on), and launched only for a call
whose tensors lie at those addresses; its workspace is its own, kept with it. In a loop
over a model, torch's caching allocator hands a layer the same blocks step after step, so a
call seen a second time at the same addresses captures its graph and later calls launch it.
Graphs hold their workspaces for as long as they are kept: at most
:func:`get_graph_memory_limit` bytes in all. A new graph lets the least recently launched
go where it needs the room, and a graph let go is not captured again (calls whose graphs
do not fit together would otherwise capture one every step).
"""
from __future__ import annotations

import collections
from typing import Callable, NamedTuple

import torch

# Bytes all kept graphs may hold (see set_graph_memory_limit).
_memory_limit = 512 << 20

# Keys seen once, waiting for a second call to capture their graph, and keys whose graphs
# were let go: each bounded, the oldest dropped.
MAX_SEEN = 4096
_seen: collections.OrderedDict = collections.OrderedDict()
_dropped: collections.OrderedDict = collections.OrderedDict()


class _Kept(NamedTuple):
    graph: torch.cuda.CUDAGraph
    nbytes: int
    owner: object


_graphs: collections.OrderedDict = collections.OrderedDict()   # key: _Kept, oldest first
_held = 0
_side_streams: dict = {}


def get_graph_memory_limit() -> int:
    """Bytes of workspace the kept CUDA graphs of small calls may hold in all."""
    return _memory_limit


def set_graph_memory_limit(nbytes: int) -> None:
    """Bounds the workspace held by the CUDA graphs gemmconv keeps of small calls (their
    launches as one, captured on a call's second run at the same addresses; see
    gemmconv.graphs). 0 keeps none: every call then launches its kernels one by one.
    Lowering it lets go of the least recently launched graphs at once. Default 512 MiB."""
    global _memory_limit
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
        raise ValueError(f"graph memory limit must be a non-negative number of bytes, got {nbytes!r}")
    _memory_limit = nbytes
    _let_go(0)


def forget() -> None:
    """Lets go of every kept graph, and forgets every key seen (tests; probes that change a
    rule)."""
    global _held
    for old in _graphs.values():
        old.graph.reset()
    _graphs.clear()
    _held = 0
    _seen.clear()
    _dropped.clear()


def kept() -> int:
    """How many graphs are kept."""
    return len(_graphs)


def _remember(keys: collections.OrderedDict, key: tuple) -> None:
    if len(keys) >= MAX_SEEN:
        keys.popitem(last=False)
    keys[key] = None


def _let_go(room: int) -> None:
    """Lets go of the least recently launched graphs until ``room`` more bytes fit within
    the limit."""
    global _held
    while _graphs and _held + room > _memory_limit:
        key, old = _graphs.popitem(last=False)
        _held -= old.nbytes
        old.graph.reset()
        _remember(_dropped, key)


def _side_stream(device: torch.device) -> torch.cuda.Stream:
    stream = _side_streams.get(device.index)
    if stream is None:
        stream = _side_streams[device.index] = torch.cuda.Stream(device)
    return stream


def launch(owner: object, addresses: tuple, run: Callable[[], None], nbytes: int,
           device: torch.device) -> bool:
    """Runs ``run`` (a call's launches on the current stream of ``device``, planned by
    ``owner``, on tensors at ``addresses``, with ``nbytes`` of workspace of its own) as a
    kept graph, captured on the second call of that owner at those addresses. False where
    it did not run ``run``, which the caller then does: on the first call, for a graph let
    go before or over the limit, and while a CUDA graph is being captured (the caller's
    own). A kept graph keeps ``owner``, so that no other object takes its id meanwhile."""
    global _held
    if torch.cuda.is_current_stream_capturing():
        return False
    key = (id(owner), *addresses)
    kept_graph = _graphs.get(key)
    if kept_graph is not None:
        _graphs.move_to_end(key)
        kept_graph.graph.replay()
        return True
    if nbytes > _memory_limit or key in _dropped:
        return False
    if key not in _seen:
        _remember(_seen, key)
        return False
    del _seen[key]
    _let_go(nbytes)
    graph = _capture(run, device)
    _graphs[key] = _Kept(graph, nbytes, owner)
    _held += nbytes
    graph.replay()
    return True


def _capture(run: Callable[[], None], device: torch.device) -> torch.cuda.CUDAGraph:
    """``run``'s launches captured on a side stream (capture needs one), its allocations
    in a memory pool of the graph's own. Nothing runs: the graph is launched after."""
    stream = torch.cuda.current_stream(device)
    side = _side_stream(device)
    side.wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        # Thread-local: calls on other threads (autograd's device threads) go on meanwhile.
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            run()
        finally:
            graph.capture_end()
    stream.wait_stream(side)
    return graph
