"""The GEMM layer's CPU path, its cuBLAS call planning, and the float32 precision policy."""
import contextlib
import ctypes
import itertools

import pytest
import torch

import gemmconv
from gemmconv import gemm
from helpers import rel_error


def _operands(b1, b2, m, k, n, broadcast_a=False, transpose_b=False):
    a = torch.randn(1 if broadcast_a else b1, b2, m, k, dtype=torch.float64)
    b = torch.randn(b1, b2, n, k, dtype=torch.float64).transpose(-1, -2) if transpose_b else \
        torch.randn(b1, b2, k, n, dtype=torch.float64)
    return a.expand(b1, -1, -1, -1), b


@pytest.mark.parametrize("broadcast_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_matches_torch(broadcast_a, transpose_b):
    a, b = _operands(3, 2, 5, 4, 6, broadcast_a, transpose_b)
    out = torch.full((3, 2, 5, 6), float("nan"), dtype=torch.float64)
    assert gemm.matmul(a, b, out) is out
    assert rel_error(out, torch.matmul(a, b)) < 1e-14


def test_matmul_with_empty_inner_dim_writes_zeros():
    out = torch.full((1, 1, 2, 3), float("nan"))
    gemm.matmul(torch.ones(1, 1, 2, 0), torch.ones(1, 1, 0, 3), out)
    assert torch.equal(out, torch.zeros_like(out))


def test_layout_reads_row_and_column_major_views():
    t = torch.empty(5, 7)
    assert gemm._layout(t) == (gemm._OP_N, 7)
    assert gemm._layout(t.t()) == (gemm._OP_T, 7)
    assert gemm._layout(torch.empty(5, 16)[:, :7]) == (gemm._OP_N, 16)     # padded rows
    assert gemm._layout(torch.empty(1, 7)) == (gemm._OP_N, 7)
    assert gemm._layout(torch.empty(7, 1)) == (gemm._OP_N, 1)
    assert gemm._layout(torch.empty(6, 8)[::2, ::2]) is None               # needs a copy


def test_batches_fold_into_one_call_when_strides_allow():
    a, b = _operands(4, 3, 5, 2, 6)                                        # all contiguous
    out = torch.empty(4, 3, 5, 6)
    plans = gemm._batches((4, 3), (a, b, out))
    assert plans == [([0, 0, 0], 12, [10, 12, 30])]


def test_broadcast_weight_loops_over_the_smaller_batch_dim():
    a, b = _operands(8, 3, 5, 2, 6, broadcast_a=True)                      # a: stride 0 over dim 0
    out = torch.empty(8, 3, 5, 6)
    plans = gemm._batches((8, 3), (a, b, out))
    assert len(plans) == 3                                                 # one call per group
    assert all(count == 8 and strides[0] == 0 for _, count, strides in plans)
    assert [offsets[0] for offsets, _, _ in plans] == [0, 10, 20]
    single_group = gemm._batches((8, 1), (a[:, :1], b[:, :1], out[:, :1]))
    assert single_group == [([0, 0, 0], 8, [0, 36, 90])]


def _column_major_weight(batch=8, groups=3, m=5, k=4):
    """A weight as the convolution routes pass it: (groups, m, k) column-major matrices,
    shared by every sample of the batch."""
    w = torch.randn(groups, k, m, dtype=torch.float64).transpose(-1, -2)
    return w.unsqueeze(0).expand(batch, -1, -1, -1)


def test_other_layout_copies_between_row_and_column_major_keeping_the_broadcast():
    a = _column_major_weight()
    assert gemm._layout(a)[0] == gemm._OP_T
    row_major = gemm._other_layout(a, gemm._distinct(a))
    assert torch.equal(row_major, a)
    assert gemm._layout(row_major) == (gemm._OP_N, 4)
    assert row_major.stride()[:2] == (0, 20)          # one copy, shared by the batch
    assert row_major.untyped_storage().nbytes() == 3 * 5 * 4 * 8
    back = gemm._other_layout(row_major, gemm._distinct(row_major))
    assert torch.equal(back, a) and gemm._layout(back) == (gemm._OP_T, 5)


def test_vectors_strided_and_large_operands_keep_their_layout(monkeypatch):
    assert gemm._distinct(_column_major_weight(m=1)) is None
    assert gemm._distinct(torch.empty(1, 1, 6, 8)[..., ::2, ::2]) is None
    a = _column_major_weight()
    assert gemm._distinct(a).shape == (1, 3, 5, 4)
    monkeypatch.setattr(gemm, "LAYOUT_TRIAL_ELEMENTS", 3 * 5 * 4 - 1)
    assert gemm._distinct(a) is None


@pytest.fixture
def trials(monkeypatch):
    """gemm._product's choice of layout on the CPU: no stream capture, every product large
    enough, nothing remembered yet, and a recorded stand-in for the timing that answers
    `faster`."""
    calls = []
    monkeypatch.setattr(gemm, "_kept_layouts", {})
    monkeypatch.setattr(gemm, "_products", {})
    monkeypatch.setattr(gemm, "LAYOUT_TRIAL_FLOPS", 1)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)

    def timed(faster):
        monkeypatch.setattr(gemm, "_other_is_faster",
                            lambda a, other, b, out: calls.append(other().stride()) or faster)
        return calls
    return timed


def _reads_a_as(product) -> int:
    """How the planned cuBLAS calls read ``a``: _OP_N row-major, _OP_T column-major."""
    return product.calls[0].args[1]


@pytest.mark.parametrize("faster", [False, True])
def test_layout_is_timed_once_per_shape_and_then_kept(trials, faster):
    calls = trials(faster)
    a, b = _column_major_weight(), torch.randn(8, 3, 4, 6, dtype=torch.float64)
    out = torch.empty(8, 3, 5, 6, dtype=torch.float64)
    for _ in range(3):
        product = gemm._product(a, b, out)
        assert product.copied is faster
        assert _reads_a_as(product) == (gemm._OP_N if faster else gemm._OP_T)
    assert calls == [(0, 20, 4, 1)]                      # a row-major copy, timed once
    gemm._product(a[:, :2], b[:, :2], out[:, :2])       # another shape: timed again
    assert len(calls) == 2
    unchosen = gemm._product(a, b, out, choose_layout=False)
    assert not unchosen.copied and _reads_a_as(unchosen) == gemm._OP_T and len(calls) == 2


@pytest.mark.parametrize("copy_ms, faster", [(0.5, True), (3.0, False)])
def test_layout_trial_times_the_copy_with_the_product(monkeypatch, copy_ms, faster):
    """Each call of a copied product makes its copy, so the trial times the copy inside the
    copied layout's events: a product 2 ms faster on the copy loses to one whose copy takes
    3 ms."""
    log = []

    class Event:   # a stand-in whose clock advances by what ran since the last record
        clock = 0.0

        def __init__(self, enable_timing):
            self.at = None

        def record(self):
            log.append("record")
            self.at = Event.clock

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return end.at - self.at

    def matmul(a, b, out):
        log.append("matmul")
        Event.clock += 3.0 if a.stride()[-1] != 1 else 1.0   # the row-major copy: 2 ms faster

    def copy(a, distinct):
        log.append("copy")
        Event.clock += copy_ms
        return distinct.contiguous().expand(a.shape)

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(gemm, "_cublas_matmul", matmul)
    monkeypatch.setattr(gemm, "_other_layout", copy)
    monkeypatch.setattr(gemm._cuda, "on_device", lambda device: contextlib.nullcontext())
    a, b = _column_major_weight(), torch.randn(8, 3, 4, 6, dtype=torch.float64)
    out = torch.empty(8, 3, 5, 6, dtype=torch.float64)
    assert gemm._other_is_faster(a, lambda: gemm._other_layout(a, gemm._distinct(a)), b, out) \
        is faster
    assert log == ["record", "matmul", "record", "record", "copy", "matmul", "record"] * \
        gemm.LAYOUT_TRIALS


def test_layout_is_not_timed_for_small_products_or_deterministic_algorithms(trials, monkeypatch):
    calls = trials(True)
    a, b = _column_major_weight(), torch.randn(8, 3, 4, 6, dtype=torch.float64)
    out = torch.empty(8, 3, 5, 6, dtype=torch.float64)
    monkeypatch.setattr(gemm, "LAYOUT_TRIAL_FLOPS", 2 * 8 * 3 * 5 * 6 * 4 + 1)
    assert gemm._layout_choice(a, b, out) is False and not gemm._product(a, b, out).copied
    monkeypatch.setattr(gemm, "_products", {})
    monkeypatch.setattr(gemm, "LAYOUT_TRIAL_FLOPS", 1)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert gemm._layout_choice(a, b, out) is None
        assert not gemm._product(a, b, out).copied
    finally:
        torch.use_deterministic_algorithms(before)
    assert calls == [] and gemm._kept_layouts == {} and gemm._products == {}   # none kept
    assert gemm._product(a, b, out).copied and len(calls) == 1    # chosen once it can be


def test_precision_policy_setting_and_context():
    assert gemmconv.get_float32_precision() == "torch"
    with gemmconv.float32_precision("ieee"):
        assert gemmconv.get_float32_precision() == "ieee" and not gemm.uses_tf32()
        with gemmconv.float32_precision("tf32"):
            assert gemm.uses_tf32()
        assert gemmconv.get_float32_precision() == "ieee"
    assert gemmconv.get_float32_precision() == "torch"
    with pytest.raises(ValueError, match="'torch', 'tf32' or 'ieee'"):
        gemmconv.set_float32_precision("fast")


def test_torch_policy_follows_torch_convolution_flag_without_changing_it():
    conv = torch.backends.cudnn.conv
    before = conv.fp32_precision
    try:
        for setting, expected in (("tf32", True), ("ieee", False)):
            conv.fp32_precision = setting
            assert gemm.uses_tf32() is expected
            assert conv.fp32_precision == setting                          # read, never written
    finally:
        conv.fp32_precision = before
    assert gemm.torch_convolutions_use_tf32() is (before == "tf32")


@pytest.mark.skipif(not hasattr(torch.backends.cudnn, "conv"), reason="torch < 2.9: allow_tf32 only")
def test_torch_policy_reads_the_most_specific_precision_setting():
    """Set through torch's public properties: cuDNN's convolutions', cuDNN's, all backends'."""
    levels = (torch.backends.cudnn.conv, torch.backends.cudnn, torch.backends)
    before = [level.fp32_precision for level in levels]
    try:
        for settings in itertools.product(("none", "tf32", "ieee"), repeat=3):
            for level, setting in zip(reversed(levels), reversed(settings)):
                level.fp32_precision = setting
            read = [level.fp32_precision for level in levels]
            expected = next((p for p in read if p != "none"), "none") == "tf32"
            assert gemm.torch_convolutions_use_tf32() is expected, read
    finally:
        for level, setting in zip(reversed(levels), reversed(before)):
            level.fp32_precision = setting


def _host_matrix(pointer, rows, cols, ld, op):
    """Column-major (rows x cols) float64 host memory at ``pointer``, then ``op``."""
    reach = (cols - 1) * ld + rows
    t = torch.frombuffer((ctypes.c_double * reach).from_address(pointer), dtype=torch.float64)
    t = t.as_strided((cols, rows), (ld, 1)).t()
    return t.t() if op == gemm._OP_T else t


def _host_gemm(op_a, op_b, m, n, k, pa, lda, sa, pb, ldb, sb, pc, ldc, sc, count):
    """A strided-batched column-major GEMM, C = op(A) @ op(B), carried out on host memory."""
    for i in range(count):
        a = _host_matrix(pa + 8 * i * sa, *((m, k) if op_a == gemm._OP_N else (k, m)), lda, op_a)
        b = _host_matrix(pb + 8 * i * sb, *((k, n) if op_b == gemm._OP_N else (n, k)), ldb, op_b)
        _host_matrix(pc + 8 * i * sc, m, n, ldc, gemm._OP_N).copy_(a @ b)


class _HostBlas:
    """cuBLAS's cublasGemmStridedBatchedEx and cuBLASLt's matmul carried out on host memory,
    for float64 operands on the CPU: the calls gemm.run issues, run as the libraries define
    them (column-major, op_T transposes; Lt's descriptors as their attributes say), so that
    the planned offsets, leading dimensions, strides and descriptors are checked by the
    results they give. ``lt``: whether cuBLASLt's heuristic finds an algorithm (else
    gemm.run takes the legacy call)."""

    def __init__(self, lt: bool, algorithms: int = 1):
        self.lt, self.calls, self.legacy, self.queries = lt, [], [], []
        self.algorithms, self.requested, self.algos = algorithms, [], []
        self.objects: dict[int, dict] = {}

    def cublasSetMathMode(self, handle, mode):
        return 0

    def cublasGemmStridedBatchedEx(self, handle, op_a, op_b, m, n, k, alpha, pa, ta, lda, sa,
                                   pb, tb, ldb, sb, beta, pc, tc, ldc, sc, count, compute, algo):
        self.legacy.append((pa, pb, pc))
        assert (ta, tb, tc) == (gemm._DATA_TYPE[torch.float64],) * 3 and \
            compute == gemm._COMPUTE_64F
        _host_gemm(op_a, op_b, m, n, k, pa, lda, sa, pb, ldb, sb, pc, ldc, sc, count)
        return 0

    def _create(self, ref, **fields):
        ref._obj.value = len(self.objects) + 1
        self.objects[ref._obj.value] = fields
        return 0

    def _set(self, descriptor, attribute, value, size):
        assert size == ctypes.sizeof(value._obj)
        self.objects[descriptor.value][attribute] = value._obj.value
        return 0

    def cublasLtMatmulDescCreate(self, ref, compute, scale):
        return self._create(ref, compute=compute, scale=scale)

    def cublasLtMatrixLayoutCreate(self, ref, data_type, rows, cols, ld):
        return self._create(ref, type=data_type, rows=rows, cols=cols, ld=ld)

    def cublasLtMatmulPreferenceCreate(self, ref):
        return self._create(ref)

    cublasLtMatmulDescSetAttribute = cublasLtMatrixLayoutSetAttribute = _set
    cublasLtMatmulPreferenceSetAttribute = _set

    def cublasLtMatmulPreferenceDestroy(self, preference):
        return 0

    def cublasLtMatmulAlgoGetHeuristic(self, handle, desc, la, lb, lc, ld, preference, requested,
                                       result, found):
        self.queries.append(dict(self.objects[preference.value]))
        self.requested.append(requested)
        found._obj.value = min(requested, self.algorithms) if self.lt else 0
        for i in range(found._obj.value):   # candidate i: algorithm i
            result._obj[i].workspace, result._obj[i].algo[0] = 64, i
        return 0

    def cublasLtMatmul(self, handle, desc, alpha, pa, la, pb, lb, beta, pc, lc, pd, ld, algo,
                       workspace, workspace_size, stream):
        self.calls.append((pa, pb, pc))
        self.algos.append(algo._obj[0])
        d = self.objects[desc.value]
        a, b, c = (self.objects[layout.value] for layout in (la, lb, lc))
        assert pc == pd and lc is ld and d["compute"] == gemm._COMPUTE_64F and d["scale"] == 1
        assert workspace_size == 64 and workspace is not None
        assert a[gemm._LT_BATCH_COUNT] == b[gemm._LT_BATCH_COUNT] == c[gemm._LT_BATCH_COUNT]
        op_a, op_b = d[gemm._LT_TRANSA], d[gemm._LT_TRANSB]
        m, k = (a["rows"], a["cols"]) if op_a == gemm._OP_N else (a["cols"], a["rows"])
        n = b["cols"] if op_b == gemm._OP_N else b["rows"]
        assert (c["rows"], c["cols"]) == (m, n)
        _host_gemm(op_a, op_b, m, n, k, pa, a["ld"], a[gemm._LT_BATCH_STRIDE], pb, b["ld"],
                   b[gemm._LT_BATCH_STRIDE], pc, c["ld"], c[gemm._LT_BATCH_STRIDE],
                   c[gemm._LT_BATCH_COUNT])
        return 0


@pytest.fixture(params=[True, False], ids=["cublasLt", "legacy"])
def host_blas(request, monkeypatch):
    return _installed(_HostBlas(lt=request.param), monkeypatch)


def _installed(blas: _HostBlas, monkeypatch) -> _HostBlas:
    from gemmconv import _cuda
    for name in ("cublas", "cublas_lt"):
        monkeypatch.setattr(_cuda, name, lambda: blas)
    monkeypatch.setattr(_cuda, "cublas_lt_handle", lambda index: None)
    monkeypatch.setattr(_cuda, "raw_stream", lambda device: 0)
    monkeypatch.setattr(_cuda, "on_device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_blas_handle", lambda: 0)
    monkeypatch.setattr(gemm, "_products", {})
    return blas


@pytest.mark.parametrize("b1, b2, broadcast_a, transpose_b, copy_b", [
    (3, 2, False, False, False), (4, 3, True, False, False), (2, 5, True, True, False),
    (5, 1, False, True, False), (2, 3, False, False, True), (1, 1, False, False, False),
    (1, 1, False, True, True)])
def test_planned_cublas_calls_compute_the_product_and_are_reused(
        host_blas, b1, b2, broadcast_a, transpose_b, copy_b):
    """The cuBLAS calls are worked out once per operand layout: a second product of the same
    layouts on fresh tensors runs the kept plan at the new addresses (cuBLASLt's algorithms
    too, chosen once per alignment), and gives its own product; an operand cuBLAS cannot
    read (copy_b: every other column) is copied first. Where cuBLASLt has no algorithm,
    the legacy call computes it."""
    for attempt in range(2):
        a, b = _operands(b1, b2, 5, 4, 6, broadcast_a, transpose_b)
        if copy_b:
            b = torch.randn(b1, b2, 4, 12, dtype=torch.float64)[..., ::2]
        out = torch.full((b1, b2, 5, 6), float("nan"), dtype=torch.float64)
        host_blas.calls.clear(), host_blas.legacy.clear(), host_blas.queries.clear()
        gemm._cublas_matmul(a, b, out)
        assert rel_error(out, torch.matmul(a, b)) < 1e-14
        assert len(gemm._products) == 1
        product = next(iter(gemm._products.values()))
        # cuBLASLt takes every call where it has an algorithm; the legacy call the rest.
        lt_calls = len(product.calls) if host_blas.lt else 0
        assert len(host_blas.calls) == lt_calls
        assert len(host_blas.legacy) == len(product.calls) - lt_calls
        calls = host_blas.calls + host_blas.legacy
        assert all(pc >= out.data_ptr() for _, _, pc in calls)
        # cuBLASLt is asked once a call and alignment, whether or not it has an algorithm.
        assert len(host_blas.queries) == (len(product.calls) if attempt == 0 else 0)
        if attempt == 0:
            # The alignment passed for A, B, C and D: the pointers', leading dims' and batch
            # strides' (the output's rows of 6 float64: 16 bytes).
            assert [(q[5] % 8, q[6] % 8, q[7], q[8]) for q in host_blas.queries] == \
                [(0, 0, 16, 16)] * len(product.calls)
    out_t = torch.empty(b1, b2, 6, 5, dtype=torch.float64).transpose(-1, -2)
    with pytest.raises(AssertionError, match="row-major"):
        gemm._cublas_matmul(a, b, out_t)
    gemm._cublas_matmul(a, b, torch.empty(b1, b2, 5, 8, dtype=torch.float64)[..., :6])
    assert len(gemm._products) == 2     # another output stride: another plan


@pytest.mark.parametrize("deterministic", [False, True])
def test_large_products_keep_the_fastest_of_cublaslts_candidates(monkeypatch, deterministic):
    """A product of at least ALGORITHM_TRIAL_FLOPS asks cuBLASLt for ALGORITHM_TRIALS
    candidates, times each on its own operands, and runs the fastest from then on; under
    torch.use_deterministic_algorithms (the choice could differ between processes) it runs
    the first without timing any. Smaller products ask for one."""
    blas = _installed(_HostBlas(lt=True, algorithms=3), monkeypatch)
    monkeypatch.setattr(gemm, "ALGORITHM_TRIAL_FLOPS", 2 * 5 * 4 * 6 * 3)
    timed = []

    def fake_timed(run, count, device):
        for i in range(count):
            run(i)
        timed.append(count)
        return [3.0, 1.0, 2.0][:count]
    monkeypatch.setattr(gemm, "_timed", fake_timed)
    monkeypatch.setattr(torch, "are_deterministic_algorithms_enabled", lambda: deterministic)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    fastest = 0 if deterministic else 1
    for attempt in range(2):
        a, b = _operands(3, 1, 5, 4, 6, False, False)
        out = torch.full((3, 1, 5, 6), float("nan"), dtype=torch.float64)
        blas.algos.clear()
        gemm._cublas_matmul(a, b, out)
        assert rel_error(out, torch.matmul(a, b)) < 1e-14
        if attempt == 0 and not deterministic:
            assert blas.algos == [0, 1, 2, fastest] and timed == [3]
        else:
            assert blas.algos == [fastest]
    assert blas.requested == [gemm.ALGORITHM_TRIALS]
    assert timed == ([] if deterministic else [3])
    gemm._cublas_matmul(*_operands(3, 1, 5, 4, 5, False, False),
                        torch.empty(3, 1, 5, 5, dtype=torch.float64))
    assert blas.requested[-1] == 1   # below the threshold


def test_alignment_is_the_largest_power_of_two_dividing_each():
    assert gemm._alignment(48, 32) == 16 and gemm._alignment(0, 24) == 8
    assert gemm._alignment(1 << 20) == gemm.MAX_ALIGNMENT and gemm._alignment() == gemm.MAX_ALIGNMENT
