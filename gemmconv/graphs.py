"""CUDA graphs of replayed calls: a small layer's launches as one.

A replayed call (ops._Replay, ops._BackwardReplay) still costs the host its launches: on
the H200's host a forward's GEMM, col2im and weight reorder took 50-60 of the 85-100 us a
small layer's call costs, where torch's whole convolution takes 25-35 (benches/NOTES.md),
and the GPU waits for the host there. A CUDA graph launches those kernels for the cost of
one launch. Fused forwards (ops._FusedReplay) are graphed whatever their size: before a
large one's kernel starts, the host's work (0.1-0.25 ms) adds to a call from an idle GPU.

A graph's kernels read and write the addresses they were captured with. So a graph is kept
per call (the replay that plans it) and per the addresses of every tensor the call reads
or writes (input, weight, bias, outputs) and the stream it runs on, and launched only for
a call whose tensors lie at those addresses. In a loop over a model, torch's caching
allocator hands a layer the same blocks step after step, so a call seen a second time at
the same addresses captures its graph and later calls launch it.

What a graph allocates (its workspace, the weight's reorder) it frees again before its
capture ends, so nothing of it outlives a launch: the graphs launched on one stream, which
never run at once, share one memory pool, as large as the most any one of them takes.
Calls that would take more than :func:`get_graph_memory_limit` get no graph. At most
MAX_GRAPHS are kept; beyond, the least recently launched is let go, and a graph let go is
not captured again (calls that do not all fit would otherwise capture one every step).
"""
from __future__ import annotations

import collections
import contextlib
import itertools
from typing import Callable, Iterator, NamedTuple, Optional

import torch

# The most workspace one graph may take (see set_graph_memory_limit).
_memory_limit = 512 << 20

# Graphs kept at most, and keys remembered at most: those seen once, waiting for a second
# call to capture their graph, and those whose graphs were let go (oldest dropped first).
MAX_GRAPHS = 1024
MAX_SEEN = 4096
_seen: collections.OrderedDict = collections.OrderedDict()
_dropped: collections.OrderedDict = collections.OrderedDict()


class _Kept(NamedTuple):
    graph: torch.cuda.CUDAGraph
    nbytes: int
    owner: object
    pool: tuple   # (device index, stream): the memory pool it shares
    serial: int   # never reused, unlike the graph's handle (see _observe)


_paused = False   # (see paused)
_graphs: collections.OrderedDict = collections.OrderedDict()   # key: _Kept, oldest first
_serials = itertools.count()
_by_serial: dict = {}   # serial: key in _graphs
# The C++ autograd node's module (gemmconv/_node.py), once built: it launches kept graphs
# too, so it is told which are kept, and whether graphs are paused (see _observe).
_observer = None
# Per (device index, stream): the pool's handle and how many kept graphs use it.
_pools: dict = {}
_side_streams: dict = {}


def get_graph_memory_limit() -> int:
    """The most workspace a call may take to be launched as a CUDA graph."""
    return _memory_limit


def set_graph_memory_limit(nbytes: int) -> None:
    """Bounds the memory of the CUDA graphs gemmconv keeps of replayed calls (their launches
    as one, captured on a call's second run at the same addresses; see gemmconv.graphs): a
    call that takes more workspace than ``nbytes`` gets no graph. The graphs launched on
    one stream share one memory pool, as large as the most one of them takes. 0 keeps
    none: every call then launches its kernels one by one. Lowering it lets go of the
    graphs over it at once. Default 512 MiB."""
    global _memory_limit
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
        raise ValueError(f"graph memory limit must be a non-negative number of bytes, got {nbytes!r}")
    _memory_limit = nbytes
    for key in [k for k, kept in _graphs.items() if kept.nbytes > nbytes]:
        _let_go(key)


def forget() -> None:
    """Lets go of every kept graph, and forgets every key seen (tests; probes that change a
    rule)."""
    for key in list(_graphs):
        _let_go(key)
    _seen.clear()
    _dropped.clear()


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Inside, no call launches or captures a graph: each runs its kernels one by one, as
    where none is kept, on every thread, and the graphs kept stay kept. For measuring the
    memory a call takes: a kept graph holds it in its pool, taken at its capture, rather
    than allocating it at each launch."""
    global _paused
    before, _paused = _paused, True
    if _observer is not None:
        _observer.set_paused(True)
    try:
        yield
    finally:
        _paused = before
        if _observer is not None:
            _observer.set_paused(before)


def kept() -> int:
    """How many graphs are kept."""
    return len(_graphs)


def _remember(keys: collections.OrderedDict, key: tuple) -> None:
    if len(keys) >= MAX_SEEN:
        keys.popitem(last=False)
    keys[key] = None


def _let_go(key: tuple) -> None:
    """Lets go of a kept graph (and of its pool where no other graph uses it, so that torch
    may free the pool's memory); its key is not captured again."""
    old = _graphs.pop(key)
    del _by_serial[old.serial]
    if _observer is not None:   # (before the reset: the node may launch it until then)
        _observer.let_go(old.serial)
    old.graph.reset()
    handle, users = _pools[old.pool]
    if users == 1:
        del _pools[old.pool]
    else:
        _pools[old.pool] = (handle, users - 1)
    _remember(_dropped, key)


def _side_stream(device: torch.device) -> torch.cuda.Stream:
    stream = _side_streams.get(device.index)
    if stream is None:
        stream = _side_streams[device.index] = torch.cuda.Stream(device)
    return stream


def launch(owner: object, addresses: tuple, run: Callable[[], None], nbytes: Callable[[], int],
           device: torch.device, stream: int) -> bool:
    """Runs ``run`` (a call's launches on ``stream``, the current stream of ``device``,
    planned by ``owner``, on tensors at ``addresses``, taking ``nbytes()`` of workspace,
    asked only where no graph is kept for them: a kept one's launch waits for no more) as a
    kept graph, captured on the second call of that owner at those addresses on that
    stream. False where it did not run ``run``, which the caller then does: on the first
    call, for a graph let go before, over the limit or short of memory to capture, and
    while a CUDA graph is being captured (the caller's own). A kept graph keeps ``owner``,
    so that no other object takes its id meanwhile. (Always False while :func:`paused`.)"""
    if _paused or torch.cuda.is_current_stream_capturing():
        return False
    key = _key(owner, stream, addresses)
    kept_graph = _graphs.get(key)
    if kept_graph is not None:
        _graphs.move_to_end(key)
        kept_graph.graph.replay()
        return True
    if key in _dropped:
        return False
    size = nbytes()
    if size > _memory_limit:
        return False
    if key not in _seen:
        _remember(_seen, key)
        return False
    del _seen[key]
    if len(_graphs) >= MAX_GRAPHS:
        _recently_launched()
        _let_go(next(iter(_graphs)))
    pool = (device.index, stream)
    handle, users = _pools.get(pool) or (torch.cuda.graph_pool_handle(), 0)
    try:
        graph = _capture(run, device, handle)
    except torch.OutOfMemoryError:
        # The graphs' pool could not grow (the cache of the other allocations can not serve
        # it): this call, and later ones at these addresses, launch their kernels as before.
        _remember(_dropped, key)
        return False
    _pools[pool] = (handle, users + 1)
    serial = next(_serials)
    _graphs[key] = _Kept(graph, size, owner, pool, serial)
    _by_serial[serial] = key
    if _observer is not None:
        _observer.keep(serial, graph.raw_cuda_graph_exec())
    graph.replay()
    return True


def serial(owner: object, stream: int, addresses: tuple) -> Optional[int]:
    """The serial number of the graph kept for ``launch(owner, addresses, ..., stream)``,
    or None where none is."""
    kept_graph = _graphs.get(_key(owner, stream, addresses))
    return None if kept_graph is None else kept_graph.serial


def _key(owner: object, stream: int, addresses: tuple) -> tuple:
    """A graph's key in _graphs (and in _seen and _dropped)."""
    return (id(owner), stream, *addresses)


def _observe(module) -> None:
    """Tells the C++ node's ``module`` of the graphs kept and of every change to come:
    which graphs are kept (by serial number, with their handles), and whether graphs are
    paused. It tells which it launched when asked (_recently_launched)."""
    global _observer
    _observer = module
    module.set_paused(_paused)
    for kept_graph in _graphs.values():
        module.keep(kept_graph.serial, kept_graph.graph.raw_cuda_graph_exec())


def _recently_launched() -> None:
    """Counts the graphs the C++ node launched since last asked as launched now (the
    order in which graphs are let go)."""
    if _observer is not None:
        for launched in _observer.launched():
            key = _by_serial.get(launched)
            if key is not None:
                _graphs.move_to_end(key)


def _capture(run: Callable[[], None], device: torch.device, pool: tuple) -> torch.cuda.CUDAGraph:
    """``run``'s launches captured on a side stream (capture needs one), its allocations
    in the memory pool ``pool``. Nothing runs: the graph is launched after. Where ``run``
    raises, the capture is ended and its graph let go before the error goes on."""
    stream = torch.cuda.current_stream(device)
    side = _side_stream(device)
    side.wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        # Thread-local: calls on other threads (autograd's device threads) go on meanwhile.
        graph.capture_begin(pool=pool, capture_error_mode="thread_local")
        try:
            run()
        except BaseException:
            try:
                graph.capture_end()
            except RuntimeError:
                pass   # (a capture cut short may not end cleanly: the first error says why)
            graph.reset()
            raise
        graph.capture_end()
    stream.wait_stream(side)
    return graph
