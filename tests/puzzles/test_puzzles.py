"""Kernel puzzles: the contract, every worked kernel passes, every stub is "not attempted", and
each budget is failed — with its own name — by a kernel that is correct but breaks it.

The budgets' limits are checked against hand derivations written next to each test, not
against the package's own numbers.  Worked kernels live outside the package, in
``solutions/puzzle_kernels.py``; the last tests keep them, the notebooks and the package apart.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import linecache
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

from gpu_lessons import checks, puzzles
from gpu_lessons.kernels.simt.examples import KERNELS as LESSON_KERNELS
from gpu_lessons.occupancy import occupancy
from gpu_lessons.puzzles import _metrics
from gpu_lessons.puzzles._core import ERROR_SECTION, RACE_SECTION, SHARED_SECTION
from gpu_lessons.puzzles._section import NOTEBOOKS

ROOT = Path(__file__).resolve().parents[2]


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REF = _load("puzzle_kernels", ROOT / "solutions" / "puzzle_kernels.py")
TOOL = _load("puzzle_cells", ROOT / "tools" / "puzzle_cells.py")
LADDER = _load("ladder_kernels", Path(__file__).with_name("ladder_kernels.py"))
MMA = _load("mma_kernels", Path(__file__).with_name("mma_kernels.py"))
ATTN = _load("attention_kernels", Path(__file__).with_name("attention_kernels.py"))
ALL = puzzles.puzzles()
IDS = [p.id for p in ALL]


def ref(pid):
    return getattr(REF, puzzles.find(pid).kernel_name)


def choices_of(p):
    return {name: getattr(REF, name.upper()) for name in p.choices}


def failure(pid, kernel, **choices):
    r = puzzles.evaluate(pid, kernel, **choices)
    return r.failure, r


# -- the registry and the contract -------------------------------------------------------------------

def test_at_least_24_puzzles_in_lesson_order():
    assert len(ALL) >= 24
    assert len(set(IDS)) == len(IDS)
    lessons = [p.lesson for p in ALL]
    assert lessons == sorted(lessons)
    assert set(lessons) == set(range(2, 9))            # every exercise notebook 02-08 has some
    assert all(p.title and p.goal for p in ALL)
    assert {"transpose", "reduce", "matmul_tiled"} <= set(IDS)
    assert puzzles.puzzles(4) == tuple(p for p in ALL if p.lesson == 4)
    with pytest.raises(ValueError, match="lesson"):
        puzzles.puzzles(11)


def test_the_issue_s_ideas_are_all_there():
    wanted = ["map", "zip", "guard", "map_2d", "broadcast", "blocks", "grid_stride", "stencil",
              "dot", "reduce_tree", "reduce_warp_uniform", "reduce", "reduce_shuffle",
              "scan_hillis_steele", "scan_blelloch", "histogram_global", "histogram_shared",
              "transpose_naive", "transpose_tiled", "transpose", "aos_to_soa", "matmul_naive",
              "matmul_tiled", "matmul_register", "softmax", "occupancy"]
    assert set(wanted) <= set(IDS)
    assert puzzles.find("occupancy").choices              # the launch is the learner's


def test_contract_signatures_and_launches():
    t = puzzles.find("transpose")
    assert t.params == ("a", "out", "n")
    assert t.launch(n=128) == ((4, 4), (32, 32))
    r = puzzles.find("reduce")
    assert r.params == ("x", "out")
    assert r.launch(n=1024) == (4, 256)
    m = puzzles.find("matmul_tiled")
    assert m.params == ("a", "b", "c", "n")
    assert m.launch(n=64) == ((4, 4), (16, 16))
    with pytest.raises(ValueError, match="multiple of 32"):
        t.make_inputs({"n": 40})
    with pytest.raises(ValueError, match="multiple of 16"):
        m.make_inputs({"n": 40})


def test_contract_specs_against_loops():
    """The specs the grader runs, against the issue's definitions written as loops."""
    t = puzzles.find("transpose")
    args = t.make_inputs({"n": 32})
    a, n = args["a"], 32
    out = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            out[j * n + i] = a[i * n + j]
    assert np.array_equal(t.expected(args)["out"], out)

    r = puzzles.find("reduce")
    args = r.make_inputs({"n": 768})
    x = args["x"]
    sums = [sum(float(v) for v in x[256 * b:256 * (b + 1)]) for b in range(3)]
    assert r.expected(args)["out"].tolist() == sums

    m = puzzles.find("matmul_tiled")
    args = m.make_inputs({"n": 16})
    a, b = args["a"].reshape(16, 16), args["b"].reshape(16, 16)
    c = [[sum(float(a[i, k]) * float(b[k, j]) for k in range(16)) for j in range(16)]
         for i in range(16)]
    assert np.array_equal(m.expected(args)["c"], np.array(c, np.float32).ravel())


# -- worked kernels pass, stubs are not attempted ----------------------------------------------------

@pytest.mark.parametrize("pid", IDS)
def test_worked_kernel_passes(pid):
    p = puzzles.find(pid)
    r = puzzles.evaluate(pid, ref(pid), **choices_of(p))
    assert r.passed and r.correct, r.message
    assert r.status == puzzles.PASSED and r.score == 1.0 and r.failure is None
    assert r.message.startswith(f"✓ {pid}: correct")
    assert len(r.measures) >= len(p.budgets)


@pytest.mark.parametrize("pid", ["transpose", "reduce", "matmul_tiled", "stencil",
                                 "histogram_shared", "softmax", "segmented_sum"])
@pytest.mark.parametrize("seed", [1, 12345])
def test_worked_kernel_passes_other_seeds(pid, seed):
    p = puzzles.find(pid)
    assert puzzles.evaluate(pid, ref(pid), seed=seed, **choices_of(p)).passed


def _stub(p):
    """The stub, defined as a notebook cell defines it (its source readable by inspect)."""
    namespace = {"np": np}
    filename = f"<stub {p.id}>"
    linecache.cache[filename] = (len(p.stub()), None, p.stub().splitlines(True), filename)
    exec(compile(p.stub(), filename, "exec"), namespace)
    return namespace[p.kernel_name], {k: namespace[k.upper()] for k in p.choices}


@pytest.mark.parametrize("pid", IDS)
def test_stub_is_not_attempted(pid, capsys):
    p = puzzles.find(pid)
    kernel, choices = _stub(p)
    r = puzzles.evaluate(pid, kernel, **choices)
    assert r.status == puzzles.NOT_ATTEMPTED and not r.passed and not r.correct
    assert "not attempted" in r.message and r.score == 0
    puzzles.check(pid, kernel, **choices)                 # prints, never raises
    assert "not attempted" in capsys.readouterr().out
    with pytest.raises(puzzles.PuzzleFailed):
        puzzles.check(pid, kernel, strict=True, **choices)
    # the stub cell's own text, as the grader would pass it
    assert puzzles.evaluate(pid, p.stub()).status == puzzles.NOT_ATTEMPTED


def test_stubs_say_roughly_how_long_the_worked_kernel_is():
    text = (ROOT / "solutions" / "puzzle_kernels.py").read_text(encoding="utf-8")
    lines = text.splitlines()
    for fn in (n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)):
        p = next(p for p in ALL if p.kernel_name == fn.name)
        body = [line for line in lines[fn.lineno:fn.end_lineno] if line.split("#")[0].strip()]
        assert abs(p.lines - len(body)) <= max(1, len(body) // 4), (p.id, p.lines, len(body))


def test_stub_text_says_roughly_how_long():
    p = puzzles.find("map")
    assert p.stub() == ("def map_kernel(t, a, out):\n"
                        "    raise NotImplementedError  # your kernel here (roughly 2 lines)\n")
    assert puzzles.find("occupancy").stub().startswith("BLOCK = ...")


# -- the reduction contract: four kernels, four verdicts ---------------------------------------------

def reduce_divergent(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    t.sync()
    s = 1
    while s < 256:
        with t.if_(tid % (2 * s) == 0):
            sdata[tid] += sdata[tid + s]
        t.sync()
        s *= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def reduce_interleaved(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    s = 1
    while s < 256:
        t.sync()
        index = 2 * s * tid
        with t.if_(index < 256):
            sdata[index] += sdata[index + s]
        s *= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def reduce_sequential(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    s = 128
    while s > 0:
        t.sync()
        with t.if_(tid < s):
            sdata[tid] += sdata[tid + s]
        s //= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def reduce_no_barrier(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    t.sync()
    s = 128
    while s > 0:
        with t.if_(tid < s):
            sdata[tid] += sdata[tid + s]
        s //= 2
    t.sync()
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def test_no_coalescing_budget_that_no_kernel_can_break():
    """A sectors-per-request budget on an array of at most that many 32-byte sectors holds
    however a warp reads it (broadcast's 16-float row b is 64 B, 2 sectors): such a budget
    would be a check that cannot fail, so every measured size must give the array more
    sectors than the limit."""
    for p in ALL:
        for b in p.budgets:
            if b.metric not in ("load_sectors", "store_sectors"):
                continue
            for size in p.sizes:
                nbytes = p.make_inputs(size)[b.array].nbytes
                assert -(-nbytes // 32) > b.limit_for(size, choices_of(p)), (p.id, b.array, size)


def test_reduce_contract():
    assert puzzles.evaluate("reduce", reduce_sequential).passed
    f, r = failure("reduce", reduce_divergent)
    assert f == "simt_efficiency" and r.correct and "SIMT efficiency" in r.message
    f, r = failure("reduce", reduce_interleaved)
    assert f == "bank_conflicts" and r.correct and "bank conflicts" in r.message
    f, r = failure("reduce", reduce_no_barrier)
    assert f == "race" and not r.correct and "race on" in r.message
    # the Harris kernels the H200 record timed (blockDim-generic) get the same verdicts,
    # except that their barrier after the last step is one more than a sound kernel needs
    verdicts = {name: puzzles.evaluate("reduce", LESSON_KERNELS[name]).failure
                for name in ("reduce_interleaved", "reduce_interleaved_strided",
                             "reduce_sequential", "reduce_missing_sync")}
    assert verdicts == {"reduce_interleaved": "simt_efficiency",
                        "reduce_interleaved_strided": "bank_conflicts",
                        "reduce_sequential": "barriers", "reduce_missing_sync": "race"}


def test_reduce_simt_budget_derivation():
    """Sequential addressing, per block of 8 warps (hand count, see lesson07.WARP_UNIFORM):
    8 x 29 full-warp instructions, loop bodies of 5 instructions in 4 + 2 + 1 full warps and in
    warp 0 with 16, 8, 4, 2, 1 lanes, the final load and store with 1 lane:
    (267 x 32 + 5 x 31 + 2) / (294 x 32) = 8701 / 9408."""
    r = puzzles.evaluate("reduce", ref("reduce"))
    simt = next(m for m in r.measures if m.name == "SIMT efficiency")
    assert simt.value == pytest.approx(8701 / 9408)
    divergent = puzzles.evaluate("reduce", reduce_divergent).measures
    assert 8701 / 9408 >= simt.limit > next(m.value for m in divergent
                                            if m.name == "SIMT efficiency")
    # the interleaved kernel keeps warps whole too: it passes step 2 and fails step 3
    assert puzzles.evaluate("reduce_warp_uniform", reduce_interleaved).passed


# -- the transpose and matmul contracts --------------------------------------------------------------

def transpose_naive(t, a, out, n):
    i = t.block_idx.y * 32 + t.thread_idx.y
    j = t.block_idx.x * 32 + t.thread_idx.x
    out[j * n + i] = a[i * n + j]


def transpose_column_reads(t, a, out, n):
    i = t.block_idx.y * 32 + t.thread_idx.x
    j = t.block_idx.x * 32 + t.thread_idx.y
    out[j * n + i] = a[i * n + j]


def transpose_unpadded(t, a, out, n):
    tile = t.shared((32, 32), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    tile[ty, tx] = a[(t.block_idx.y * 32 + ty) * n + t.block_idx.x * 32 + tx]
    t.sync()
    out[(t.block_idx.x * 32 + ty) * n + t.block_idx.y * 32 + tx] = tile[tx, ty]


def test_transpose_contract():
    f, r = failure("transpose", transpose_naive)
    # a warp's 32 stores land in 32 rows of out: one sector each
    assert f == "store_sectors" and r.correct
    assert "global stores to out: 32.0 sectors per request, the budget is 4.0" in r.message
    f, r = failure("transpose", transpose_column_reads)
    assert f == "load_sectors" and "global loads of a: 32.0 sectors per request" in r.message
    f, r = failure("transpose", transpose_unpadded)
    # reading a tile column: 32 lanes, one bank, 31 extra wavefronts per request;
    # n = 64: 4 blocks x 32 warps = 128 requests -> 3,968
    assert f == "bank_conflicts" and "3,968" in r.message
    assert puzzles.evaluate("transpose_tiled", transpose_unpadded).passed
    assert puzzles.evaluate("transpose_naive", transpose_naive).passed


def matmul_tiled_column_tiles(t, a, b, c, n):
    """Tiles in shared memory, but each tile is loaded down its columns (uncoalesced)."""
    sa = t.shared((16, 16), np.float32)
    sb = t.shared((16, 16), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * 16 + ty
    col = t.block_idx.x * 16 + tx
    acc = 0.0
    for k0 in range(0, n, 16):
        sa[tx, ty] = a[(t.block_idx.y * 16 + tx) * n + k0 + ty]
        sb[tx, ty] = b[(k0 + tx) * n + t.block_idx.x * 16 + ty]
        t.sync()
        for k in range(16):
            acc = acc + sa[ty, k] * sb[k, tx]
        t.sync()
    c[row * n + col] = acc


def test_matmul_tiled_contract():
    r = puzzles.evaluate("matmul_tiled", ref("matmul_tiled"))
    # n = 32: every element is read by the n / 16 = 2 blocks of its block row (a) or column (b)
    loads = [m for m in r.measures if m.name in ("global loads of a", "global loads of b")
             and "per element" in m.text]
    assert [m.value for m in loads] == [2.0, 2.0] and all(m.limit == 2.0 for m in loads)
    f, r = failure("matmul_tiled", ref("matmul_naive"))
    assert f == "loads_per_element" and r.correct
    assert "global loads of a: 32 per element, the budget is 2" in r.message
    f, r = failure("matmul_tiled", matmul_tiled_column_tiles)
    assert f == "load_sectors" and r.correct


# -- every budget is failed, with its own name, by a correct kernel that breaks it ---------------------

def map_2d_columns(t, a, out, n):
    row = t.thread_idx.x
    col = t.thread_idx.y
    t.return_if((row >= n) | (col >= n))
    out[row * n + col] = a[row * n + col] + 10


def split_work_parity(t, a, b, out_a, out_b, n):
    g = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    j = g // 2
    with t.if_(g % 2 == 0):
        out_a[j] = a[j] * 2
    with t.else_():
        out_b[j] = b[j] + 1


def stencil_from_global(t, x, out, n):
    i = t.block_idx.x * 128 + t.thread_idx.x
    t.return_if(i >= n)
    acc = t.local(x[i])
    with t.if_(i > 0):
        acc[...] = acc + x[i - 1]
    with t.if_(i + 1 < n):
        acc[...] = acc + x[i + 1]
    out[i] = acc


def dot_two_barriers_per_step(t, a, b, out):
    cache = t.shared(t.block_dim.x, np.float32)
    tid = t.thread_idx.x
    cache[tid] = a[tid] * b[tid]
    t.sync()
    s = t.block_dim.x // 2
    while s > 0:
        v = t.local(0.0, np.float32)
        with t.if_(tid < s):
            v[...] = cache[tid + s]
        t.sync()
        with t.if_(tid < s):
            cache[tid] = cache[tid] + v
        t.sync()
        s //= 2
    with t.if_(tid == 0):
        out[0] = cache[0]


def scan_exclusive_hillis_steele(t, x, out):
    """Correct exclusive scan with 64 threads, but O(n log n) updates: 8 stores per value."""
    buf = t.shared((2, 128), np.float32)
    tid = t.thread_idx.x
    base = t.block_idx.x * 128
    buf[0, tid] = x[base + tid]
    buf[0, tid + 64] = x[base + tid + 64]
    t.sync()
    src = 0
    offset = 1
    while offset < 128:
        dst = 1 - src
        for h in range(0, 128, 64):
            j = tid + h
            with t.if_(j >= offset):
                buf[dst, j] = buf[src, j] + buf[src, j - offset]
            with t.else_():
                buf[dst, j] = buf[src, j]
        t.sync()
        src = dst
        offset *= 2
    out[base + tid] = buf[src, tid] - x[base + tid]
    out[base + tid + 64] = buf[src, tid + 64] - x[base + tid + 64]


def matmul_register_reloading(t, a, b, c, n):
    """2 x 2 outputs per thread, but a's values are loaded again for each column: 6 shared
    loads per 4 multiply-adds."""
    sa = t.shared((16, 17), np.float32)
    sb = t.shared((16, 16), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * 16 + ty
    col = t.block_idx.x * 16 + tx
    c00 = 0.0
    c01 = 0.0
    c10 = 0.0
    c11 = 0.0
    for k0 in range(0, n, 16):
        for di in range(0, 16, 8):
            for dj in range(0, 16, 8):
                sa[ty + di, tx + dj] = a[(row + di) * n + k0 + tx + dj]
                sb[ty + di, tx + dj] = b[(k0 + ty + di) * n + col + dj]
        t.sync()
        for k in range(16):
            b0 = sb[k, tx]
            b1 = sb[k, tx + 8]
            c00 = c00 + sa[ty, k] * b0
            c01 = c01 + sa[ty, k] * b1
            c10 = c10 + sa[ty + 8, k] * b0
            c11 = c11 + sa[ty + 8, k] * b1
        t.sync()
    c[row * n + col] = c00
    c[row * n + col + 8] = c01
    c[(row + 8) * n + col] = c10
    c[(row + 8) * n + col + 8] = c11


def reduce_shuffle_shared_finish(t, x, out):
    totals = t.shared(8, np.float32)
    tid = t.thread_idx.x
    v = x[t.block_idx.x * 256 + tid]
    d = 16
    while d > 0:
        v = v + t.shfl_down(v, d)
        d //= 2
    with t.if_(t.lane == 0):
        totals[t.warp] = v
    t.sync()
    with t.if_(tid == 0):
        acc = totals[0]
        for w in range(1, 8):
            acc = acc + totals[w]
        out[t.block_idx.x] = acc


def reduce_shuffle_inactive(t, x, out):
    totals = t.shared(8, np.float32)
    tid = t.thread_idx.x
    v = x[t.block_idx.x * 256 + tid]
    d = 16
    while d > 0:
        v = v + t.shfl_down(v, d)
        d //= 2
    with t.if_(t.lane == 0):
        totals[t.warp] = v
    t.sync()
    with t.if_(tid < 8):                      # lanes 8..31 are not active: shfl reads them
        w = totals[tid]
        d = 4
        while d > 0:
            w = w + t.shfl_down(w, d)
            d //= 2
        with t.if_(tid == 0):
            out[t.block_idx.x] = w


def reduce_shuffle_after_return(t, x, out):
    totals = t.shared(8, np.float32)
    tid = t.thread_idx.x
    v = x[t.block_idx.x * 256 + tid]
    d = 16
    while d > 0:
        v = v + t.shfl_down(v, d)
        d //= 2
    with t.if_(t.lane == 0):
        totals[t.warp] = v
    t.sync()
    t.return_if(tid >= 8)                     # lanes 8..31 have exited: no partial-warp hazard,
    w = totals[tid]
    d = 4
    while d > 0:
        w = w + t.shfl_down(w, d)             # but lanes 4..7 read exited lanes 8..11
        d //= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = w


def ilp_one_at_a_time(t, x, out, n):
    i = t.block_idx.x * 512 + t.thread_idx.x
    for k in range(4):
        out[i + 128 * k] = x[i + 128 * k] * 2 + 1


def ilp_one_at_a_time_behind_dummy_loads(t, x, out, n):
    # four loads of out, whose values nothing uses, before the first store: they counted as
    # the four loads in flight; only loads of x do
    i = t.block_idx.x * 512 + t.thread_idx.x
    _d0 = out[i]
    _d1 = out[i + 128]
    _d2 = out[i + 256]
    _d3 = out[i + 384]
    for k in range(4):
        out[i + 128 * k] = x[i + 128 * k] * 2 + 1


def stencil_staged_in_out(t, x, out, n):
    # no shared memory: each value is staged in out and the neighbours read back from there;
    # x is loaded once (plus the halo), so every budget on x held
    i = t.block_idx.x * 128 + t.thread_idx.x
    tid = t.thread_idx.x
    mid = t.local(0.0, np.float32)
    with t.if_(i < n):
        mid[...] = x[i]
        out[i] = mid
    t.sync()
    left = t.local(0.0, np.float32)
    right = t.local(0.0, np.float32)
    with t.if_((tid == 0) & (i > 0) & (i < n)):
        left[...] = x[i - 1]
    with t.if_((tid > 0) & (i < n)):
        left[...] = out[i - 1]
    with t.if_((tid == 127) & (i + 1 < n)):
        right[...] = x[i + 1]
    with t.if_((tid < 127) & (i + 1 < n)):
        right[...] = out[i + 1]
    t.sync()
    with t.if_(i < n):
        out[i] = left + mid + right


def transpose_through_a(t, a, out, n):
    # no shared tile: each block transposes its tile inside a (strided stores to the input,
    # which no budget on out saw), then reads it back row by row and stores out coalesced
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    r0 = t.block_idx.y * 32
    c0 = t.block_idx.x * 32
    v = a[(r0 + ty) * n + c0 + tx]
    t.sync()
    a[(r0 + tx) * n + c0 + ty] = v
    t.sync()
    out[(c0 + ty) * n + r0 + tx] = a[(r0 + ty) * n + c0 + tx]


def occupancy_spare_shared(t, x, out, n):
    size = t.block_dim.x
    tile = t.shared(size + 8, np.float32)
    spare = t.shared(11000, np.float32, name="spare")   # 44,000 B the filter does not need
    tid = t.thread_idx.x
    spare[tid] = 0.0
    start = t.block_idx.x * size
    i = start + tid
    with t.if_(i < n):
        tile[tid + 4] = x[i]
    with t.else_():
        tile[tid + 4] = 0.0
    with t.if_(tid < 4):
        left = start - 4 + tid
        with t.if_(left >= 0):
            tile[tid] = x[left]
        with t.else_():
            tile[tid] = 0.0
        right = start + size + tid
        with t.if_(right < n):
            tile[size + 4 + tid] = x[right]
        with t.else_():
            tile[size + 4 + tid] = 0.0
    t.sync()
    with t.if_(i < n):
        acc = tile[tid]
        for k in range(1, 9):
            acc = acc + tile[tid + k]
        out[i] = acc


def histogram_twice(t, x, hist, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    b = x[i]
    t.atomic_add(hist, b, 0)
    t.atomic_add(hist, b, 1)


def histogram_shared_merge_twice(t, x, hist, n):
    bins = t.shared(16, np.int32)
    tid = t.thread_idx.x
    with t.if_(tid < 16):
        bins[tid] = 0
    t.sync()
    i = t.block_idx.x * 128 + tid
    with t.if_(i < n):
        t.atomic_add(bins, x[i], 1)
    t.sync()
    with t.if_(tid < 16):
        t.atomic_add(hist, tid, bins[tid] - 1)
        t.atomic_add(hist, tid, 1)



def dot_by_atomics(t, a, b, out):
    # correct, but every lane waits its turn on out[0]: the tree is the point of the puzzle
    tid = t.thread_idx.x
    with t.if_(tid == 0):
        out[0] = 0.0
    t.sync()
    t.atomic_add(out, 0, a[tid] * b[tid])


def stencil_reading_by_atomics(t, x, out, n):
    # an atomic that adds 0 is a load that returns the old value: it counts as one
    i = t.block_idx.x * 128 + t.thread_idx.x
    t.return_if(i >= n)
    acc = t.local(x[i])
    with t.if_(i > 0):
        left = t.atomic_add(x, i - 1, 0.0)
        acc[...] = acc + left
    with t.if_(i + 1 < n):
        right = t.atomic_add(x, i + 1, 0.0)
        acc[...] = acc + right
    out[i] = acc

# One thread does its block's work while the others wait: each of its loads touches one sector,
# it needs no barrier, no shared memory and no atomic, so every other budget of these puzzles
# holds; only the busiest warp's instruction count gives it away.
def dot_by_one_thread(t, a, b, out):
    with t.if_(t.thread_idx.x == 0):
        s = t.local(0.0, np.float32)
        for i in range(len(a)):
            s[...] = s + a[i] * b[i]
        out[0] = s


def reduce_by_one_thread(t, x, out):
    base = t.block_idx.x * 256
    with t.if_(t.thread_idx.x == 0):
        s = t.local(0.0, np.float32)
        for i in range(256):
            s[...] = s + x[base + i]
        out[t.block_idx.x] = s


def segmented_sum_by_one_thread(t, x, offsets, out):
    seg = t.block_idx.x
    with t.if_(t.thread_idx.x == 0):
        i = t.local(offsets[seg])
        end = offsets[seg + 1]
        s = t.local(0.0, np.float32)
        for _ in t.while_(lambda: i < end):
            s[...] = s + x[i]
            i[...] = i + 1
        out[seg] = s


def scan_by_one_thread(t, x, out):
    base = t.block_idx.x * 128
    with t.if_(t.thread_idx.x == 0):
        s = t.local(0.0, np.float32)
        for i in range(128):
            s[...] = s + x[base + i]
            out[base + i] = s


def reduce_divergent_padded(t, x, out):
    # the divergent tid % (2s) tree (63.6 % SIMT efficiency) with 300 full-warp instructions
    # of padding in warps 1-7 reaches 92.6 %: the busiest warp's count is what it cannot hide
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    t.sync()
    if t.warp > 0:
        z = t.local(0)
        for _k in range(300):
            z[...] = z + 1
    s = 1
    while s < 256:
        with t.if_(tid % (2 * s) == 0):
            sdata[tid] += sdata[tid + s]
        if s < 128:
            t.sync()
        s *= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def transpose_naive_diluted(t, a, out, n):
    # the strided store (32 sectors), then ten one-sector stores of lane 0's value to its own
    # place: an average over requests fell to (32 + 10) / 11 = 3.8 and passed; the worst
    # request still costs 32 sectors
    i = t.block_idx.y * 32 + t.thread_idx.y
    j = t.block_idx.x * 32 + t.thread_idx.x
    v = a[i * n + j]
    out[j * n + i] = v
    w = t.shfl_idx(v, 0)
    k = t.shfl_idx(j * n + i, 0)
    for _r in range(10):
        out[k] = w


def reduce_by_lanes_taking_turns(t, x, out):
    # one-lane atomics in a loop: no instruction is contended, but the warp's 32 lanes update
    # out[b] one after another (the atomic's old value is never used, so it is no read of out)
    tid = t.thread_idx.x
    v = x[t.block_idx.x * 256 + tid]
    with t.if_(tid == 0):
        out[t.block_idx.x] = 0.0
    t.sync()
    for k in range(32):
        with t.if_(t.lane == k):
            t.atomic_add(out, t.block_idx.x, v)


def map_read_back_by_atomic(t, a, out):
    i = t.thread_idx.x
    out[i] = a[i] + 10
    t.sync()
    v = t.atomic_add(out, i, 0.0)             # an atomic whose old value is used reads out
    out[i] = v


def map_read_back_beside_a_statement(t, a, out):
    # an atomic statement and a used one on one line: the line counts as reading
    i = t.thread_idx.x
    out[i] = a[i] + 10
    t.sync()
    t.atomic_add(out, i, 0.0); v = t.atomic_add(out, (i + 32) % len(out), 0.0)  # noqa: E702
    t.sync()
    out[(i + 32) % len(out)] = v


def histogram_shared_by_one_thread(t, x, hist, n):
    # thread 0 counts the block's 128 values; a loop over the 16 bins is allowed, this is not
    bins = t.shared(16, np.int32)
    tid = t.thread_idx.x
    with t.if_(tid < 16):
        bins[tid] = 0
    t.sync()
    base = t.block_idx.x * 128
    with t.if_(tid == 0):
        for k in range(128):
            with t.if_(base + k < n):
                t.atomic_add(bins, x[base + k], 1)
    t.sync()
    with t.if_(tid < 16):
        t.atomic_add(hist, tid, bins[tid])


def scan_blelloch_pairs(t, x, out):
    # GPU Gems 3's first listing: thread tid loads 2 tid and 2 tid + 1, a stride of 2 words
    # GPU Gems 3 Example 39-1: each thread loads two neighbours 2*tid, 2*tid + 1
    temp = t.shared(128, np.float32)
    tid = t.thread_idx.x
    base = t.block_idx.x * 128
    temp[2 * tid] = x[base + 2 * tid]
    temp[2 * tid + 1] = x[base + 2 * tid + 1]
    offset = 1
    d = 64
    while d > 0:
        t.sync()
        with t.if_(tid < d):
            ai = offset * (2 * tid + 1) - 1
            bi = offset * (2 * tid + 2) - 1
            temp[bi] = temp[bi] + temp[ai]
        offset *= 2
        d //= 2
    with t.if_(tid == 0):
        temp[127] = 0.0
    d = 1
    while d < 128:
        offset //= 2
        t.sync()
        with t.if_(tid < d):
            ai = offset * (2 * tid + 1) - 1
            bi = offset * (2 * tid + 2) - 1
            left = temp[ai]
            right = temp[bi]
            temp[ai] = right
            temp[bi] = right + left
        d *= 2
    t.sync()
    out[base + 2 * tid] = temp[2 * tid]
    out[base + 2 * tid + 1] = temp[2 * tid + 1]


def occupancy_halo_misaligned(t, x, out, n):
    # the tile and its halo loaded as one run from start - 4: every warp's 128 B start 16 B
    # off a sector boundary, 5 sectors per request
    size = t.block_dim.x
    tile = t.shared(size + 8, np.float32)
    tid = t.thread_idx.x
    start = t.block_idx.x * size - 4
    j = t.local(tid)
    for _ in t.while_(lambda: j < size + 8):
        g = start + j
        with t.if_((g >= 0) & (g < n)):
            tile[j] = x[g]
        with t.else_():
            tile[j] = 0.0
        j[...] = j + size
    t.sync()
    i = start + 4 + tid
    t.return_if(i >= n)
    s = tile[tid] + tile[tid + 1] + tile[tid + 2] + tile[tid + 3] + tile[tid + 4]
    out[i] = s + tile[tid + 5] + tile[tid + 6] + tile[tid + 7] + tile[tid + 8]


def grid_stride_reading_twice(t, x, out, n):
    # x[i] + x[i]: two loads in the simulator (a compiler would often merge them; the message
    # says to read it once into a local)
    stride = t.grid_dim.x * t.block_dim.x
    i = t.local(t.block_idx.x * t.block_dim.x + t.thread_idx.x)
    for _ in t.while_(lambda: i < n):
        out[i] = x[i] + x[i] + 1
        i[...] = i + stride


def scan_brent_kung(t, x, out):
    # work-efficient, but 2 log2 n - 1 steps: the puzzle asks for log2 n (its next puzzle is the
    # work-efficient tree)
    temp = t.shared(128, np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * 128 + tid
    temp[tid] = x[i]
    t.sync()
    stride = 1
    while stride < 128:                        # up-sweep
        j = (tid + 1) * stride * 2 - 1
        with t.if_(j < 128):
            temp[j] = temp[j] + temp[j - stride]
        t.sync()
        stride *= 2
    stride = 32
    while stride > 0:                          # down-sweep, inclusive
        j = (tid + 1) * stride * 2 - 1
        with t.if_(j + stride < 128):
            temp[j + stride] = temp[j + stride] + temp[j]
        t.sync()
        stride //= 2
    out[i] = temp[tid]


def dot_barrier_after_the_last_step(t, a, b, out):
    cache = t.shared(t.block_dim.x, np.float32)
    tid = t.thread_idx.x
    cache[tid] = a[tid] * b[tid]
    t.sync()
    s = t.block_dim.x // 2
    while s > 0:
        with t.if_(tid < s):
            cache[tid] = cache[tid] + cache[tid + s]
        t.sync()                              # after the last step too: thread 0 needs none
        s //= 2
    with t.if_(tid == 0):
        out[0] = cache[0]


def reduce_barrier_after_the_last_step(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    t.sync()
    s = 128
    while s > 0:
        with t.if_(tid < s):
            sdata[tid] = sdata[tid] + sdata[tid + s]
        t.sync()
        s //= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def scan_hs_barrier_after_the_last_step(t, x, out):
    buf = t.shared((2, 128), np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * 128 + tid
    buf[0, tid] = x[i]
    t.sync()
    src = 0
    offset = 1
    while offset < 128:
        dst = 1 - src
        with t.if_(tid >= offset):
            buf[dst, tid] = buf[src, tid] + buf[src, tid - offset]
        with t.else_():
            buf[dst, tid] = buf[src, tid]
        t.sync()
        src = dst
        offset *= 2
    out[i] = buf[src, tid]


def matmul_tiled_a_transposed(t, a, b, c, n):
    """Coalesced loads, but the a tile stored transposed: a warp's stores 16 words apart."""
    sa = t.shared((16, 16), np.float32)
    sb = t.shared((16, 16), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * 16 + ty
    col = t.block_idx.x * 16 + tx
    acc = 0.0
    for k0 in range(0, n, 16):
        sa[tx, ty] = a[row * n + k0 + tx]
        sb[ty, tx] = b[(k0 + ty) * n + col]
        t.sync()
        for k in range(16):
            acc = acc + sa[k, ty] * sb[k, tx]
        t.sync()
    c[row * n + col] = acc


def scan_blelloch_unpadded(t, x, out):
    temp = t.shared(128, np.float32)
    tid = t.thread_idx.x
    base = t.block_idx.x * 128
    temp[tid] = x[base + tid]
    temp[tid + 64] = x[base + tid + 64]
    t.sync()
    for level in range(7):                      # up-sweep
        stride = 1 << level
        with t.if_(tid < (64 >> level)):
            bi = (2 * tid + 2) * stride - 1
            temp[bi] += temp[bi - stride]
        t.sync()
    with t.if_(tid == 0):
        temp[127] = 0.0
    t.sync()
    for level in range(6, -1, -1):              # down-sweep
        stride = 1 << level
        with t.if_(tid < (64 >> level)):
            bi = (2 * tid + 2) * stride - 1
            ai = bi - stride
            left = temp[ai]
            temp[ai] = temp[bi]
            temp[bi] = temp[bi] + left
        t.sync()
    out[base + tid] = temp[tid]
    out[base + tid + 64] = temp[tid + 64]


def matmul_register_unpadded(t, a, b, c, n):
    # no padding: 4 rows of a 16-word tile start in banks 0, 16, 0, 16
    sa = t.shared((16, 16), np.float32)
    sb = t.shared((16, 16), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * 16 + ty
    col = t.block_idx.x * 16 + tx
    acc00 = 0.0
    acc01 = 0.0
    acc10 = 0.0
    acc11 = 0.0
    k0 = 0
    while k0 < n:
        sa[ty, tx] = a[row * n + k0 + tx]
        sa[ty, tx + 8] = a[row * n + k0 + tx + 8]
        sa[ty + 8, tx] = a[(row + 8) * n + k0 + tx]
        sa[ty + 8, tx + 8] = a[(row + 8) * n + k0 + tx + 8]
        sb[ty, tx] = b[(k0 + ty) * n + col]
        sb[ty, tx + 8] = b[(k0 + ty) * n + col + 8]
        sb[ty + 8, tx] = b[(k0 + ty + 8) * n + col]
        sb[ty + 8, tx + 8] = b[(k0 + ty + 8) * n + col + 8]
        t.sync()
        for k in range(16):
            a0 = sa[ty, k]
            a1 = sa[ty + 8, k]
            b0 = sb[k, tx]
            b1 = sb[k, tx + 8]
            acc00 += a0 * b0
            acc01 += a0 * b1
            acc10 += a1 * b0
            acc11 += a1 * b1
        t.sync()
        k0 += 16
    c[row * n + col] = acc00
    c[row * n + col + 8] = acc01
    c[(row + 8) * n + col] = acc10
    c[(row + 8) * n + col + 8] = acc11


def matmul_register_flat_loads_pitch_17(t, a, b, c, n):
    sa = t.shared((16, 17), np.float32)
    sb = t.shared((16, 16), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    flat = ty * 8 + tx                        # 0..63: four passes cover a 16 x 16 tile
    row0 = t.block_idx.y * 16
    col0 = t.block_idx.x * 16
    c00 = t.local(0.0, np.float32)
    c01 = t.local(0.0, np.float32)
    c10 = t.local(0.0, np.float32)
    c11 = t.local(0.0, np.float32)
    for k0 in range(0, n, 16):
        for q in range(4):
            e = flat + 64 * q
            r = e // 16
            s = e % 16
            sa[r, s] = a[(row0 + r) * n + k0 + s]
            sb[r, s] = b[(k0 + r) * n + col0 + s]
        t.sync()
        for k in range(16):
            a0 = sa[ty, k]
            a1 = sa[ty + 8, k]
            b0 = sb[k, tx]
            b1 = sb[k, tx + 8]
            c00[...] = c00 + a0 * b0
            c01[...] = c01 + a0 * b1
            c10[...] = c10 + a1 * b0
            c11[...] = c11 + a1 * b1
        t.sync()
    row = row0 + ty
    col = col0 + tx
    c[row * n + col] = c00
    c[row * n + col + 8] = c01
    c[(row + 8) * n + col] = c10
    c[(row + 8) * n + col + 8] = c11


BREAKERS = [
    # (puzzle, kernel, choices, the budget's metric, what the message says)
    ("map_2d", map_2d_columns, {}, "load_sectors", "global loads of a: 16.0 sectors per request"),
    ("transpose", transpose_naive, {}, "store_sectors", "global stores to out: 32.0"),
    ("transpose", transpose_unpadded, {}, "bank_conflicts", "bank conflicts"),
    ("split_work", split_work_parity, {}, "simt_efficiency", "SIMT efficiency"),
    ("stencil", stencil_from_global, {}, "loads_per_element", "global loads of x: 2.99 per element"),
    ("dot", dot_two_barriers_per_step, {}, "barriers", "barriers: 15 per block, the budget is 7"),
    # a barrier after the last halving step too: thread 0 reads only what it wrote
    ("dot", dot_barrier_after_the_last_step, {}, "barriers", "barriers: 8 per block, the budget is 7"),
    ("reduce", reduce_barrier_after_the_last_step, {}, "barriers", "barriers: 9 per block, the budget is 8"),
    ("scan_hillis_steele", scan_hs_barrier_after_the_last_step, {}, "barriers",
     "barriers: 8 per block, the budget is 7"),
    # the tree's strided pairs without a spare word every 32: 240 conflicts
    ("scan_blelloch", scan_blelloch_unpadded, {}, "bank_conflicts",
     "bank conflicts (wavefronts beyond the ideal): 240"),
    ("matmul_register", matmul_register_unpadded, {}, "bank_conflicts",
     "bank conflicts (wavefronts beyond the ideal): 640"),
    # rows 17 words apart, but a warp stores 2 rows of 16: one bank twice in each store
    ("matmul_register", matmul_register_flat_loads_pitch_17, {}, "bank_conflicts", "64"),
    ("matmul_tiled", matmul_tiled_a_transposed, {}, "bank_conflicts", "bank conflicts"),
    ("dot", dot_by_atomics, {}, "atomic_contention",
     "atomic contention (lanes of one warp on one address): 32 lanes"),
    ("stencil", stencil_reading_by_atomics, {}, "loads_per_element",
     "global loads of x: 2.99 per element"),
    ("scan_blelloch", scan_exclusive_hillis_steele, {}, "shared_stores_per_element",
     "shared-memory stores: 8 per element"),
    ("matmul_register", matmul_register_reloading, {}, "shared_loads_per_fma",
     "shared-memory loads: 1.5 per multiply-add"),
    ("reduce_shuffle", reduce_shuffle_shared_finish, {}, "shared_requests_per_block",
     "shared-memory requests: 16 per block, the budget is 9"),
    ("reduce_shuffle", reduce_shuffle_after_return, {}, "shuffle_inactive_reads",
     "shuffle reads of inactive lanes"),
    ("ilp", ilp_one_at_a_time, {}, "loads_before_first_store",
     "global loads issued before the first store: 1 per warp, the budget is at least 4"),
    # blocks of 32: the 32-block limit holds 32 of 64 warps, whatever the registers
    ("occupancy", REF.occupancy_kernel, {"block": 32}, "occupancy", "50 %"),
    # 256 threads, but 1,056 B of tile + 44,000 B of spare shared memory (from byte 1,152):
    # 45,152 + 1,024 reserved = 46,176 -> 46,208 B per block; 233,472 // 46,208 = 5 blocks
    # = 40 of 64 warps
    ("occupancy", occupancy_spare_shared, {"block": 256}, "occupancy", "62.5 %"),
    ("histogram_global", histogram_twice, {}, "atomics_per_element",
     "global atomics per element of x: 2"),
    ("histogram_shared", REF.histogram_global_kernel, {}, "atomic_serialisation",
     "global atomic serialisation"),
    ("histogram_shared", histogram_shared_merge_twice, {}, "global_atomics_per_block",
     "global atomics: 32 per block, the budget is 16"),
    ("matmul_tiled", REF.matmul_naive_kernel, {}, "loads_per_element", "32 per element"),
    # dot: 128 iterations of 4 instructions (2 loads, multiply, add) on one lane of warp 0
    ("dot", dot_by_one_thread, {}, "busiest_warp",
     "instructions issued by the busiest warp: 516 instructions, the budget is 144"),
    ("reduce_tree", reduce_by_one_thread, {}, "busiest_warp", "the budget is 174"),
    ("reduce_shuffle", reduce_by_one_thread, {}, "busiest_warp", "the budget is 76"),
    ("segmented_sum", segmented_sum_by_one_thread, {}, "busiest_warp", "busiest warp"),
    ("scan_hillis_steele", scan_by_one_thread, {}, "busiest_warp", "the budget is 146"),
    ("reduce_warp_uniform", reduce_divergent_padded, {}, "busiest_warp",
     "the budget is 174"),
    ("transpose_tiled", transpose_naive_diluted, {}, "store_sectors",
     "global stores to out: 32.0 sectors per request, the budget is 4.0"),
    ("transpose", transpose_naive_diluted, {}, "store_sectors", "global stores to out: 32.0"),
    ("stencil", stencil_staged_in_out, {}, "output_loads",
     "global loads of the outputs: 508 lane loads, the budget is 0"),
    ("transpose", transpose_through_a, {}, "input_stores",
     "global stores to the inputs: 4,096 lane stores, the budget is 0"),
    ("transpose_tiled", transpose_through_a, {}, "input_stores", "global stores to the inputs"),
    ("ilp", ilp_one_at_a_time_behind_dummy_loads, {}, "loads_before_first_store",
     "global loads issued before the first store: 1 per warp, the budget is at least 4"),
    ("reduce_tree", reduce_by_lanes_taking_turns, {}, "atomic_contention",
     "atomic contention (lanes of one warp on one address): 32 lanes, the budget is 1"),
    ("reduce_shuffle", reduce_by_lanes_taking_turns, {}, "atomic_contention", "32 lanes"),
    ("map", map_read_back_by_atomic, {}, "output_loads",
     "global loads of the outputs: 64 lane loads, the budget is 0"),
    ("map", map_read_back_beside_a_statement, {}, "output_loads",
     "global loads of the outputs: 128 lane loads"),
    # 14 + 16 + 16 bins x 4 = 108; one thread's 128 values cost about 400
    ("histogram_shared", histogram_shared_by_one_thread, {}, "busiest_warp",
     "instructions issued by the busiest warp: 395 instructions, the budget is 108"),
    # 32 lanes x 2 words apart = 256 B = 8 sectors
    ("scan_blelloch", scan_blelloch_pairs, {}, "load_sectors",
     "global loads of x: 8.0 sectors per request, the budget is 4.0"),
    ("occupancy", occupancy_halo_misaligned, {"block": 256}, "load_sectors",
     "5.0 sectors per request, the budget is 4.0"),
    ("grid_stride", grid_stride_reading_twice, {}, "loads_per_element",
     "global loads of x: 2 per element, the budget is 1"),
    ("scan_hillis_steele", scan_brent_kung, {}, "barriers",
     "barriers: 14 per block, the budget is 7"),
    # the ladder: each rung's budget fails a kernel of the rung below, or one slip
    ("sgemm_1d_blocktile", LADDER.sgemm_1d_reloading_b, {}, "shared_loads_per_fma",
     "shared-memory loads: 2 per multiply-add, the budget is 1.12"),
    ("sgemm_2d_blocktile", LADDER.sgemm_2d_contiguous_rows, {}, "bank_conflicts",
     "bank conflicts (wavefronts beyond the ideal): 2,048, the budget is 0"),
    ("sgemm_vectorized", REF.sgemm_2d_blocktile_kernel, {}, "shared_loads_per_fma",
     "shared-memory loads: 0.25 per multiply-add, the budget is 0.0625"),
    # 2 lanes x 4 stores into rows 128 words apart: 2-way in each of 128 store instructions
    ("sgemm_vectorized", LADDER.sgemm_vectorized_unpadded, {}, "bank_conflicts",
     "wavefronts beyond the ideal): 128, the budget is 0"),
    ("sgemm_1d_blocktile", LADDER.sgemm_1d_loading_a_down_columns, {}, "load_sector_use",
     "global loads of a: bytes used of the sectors moved: 12.5 %"),
    # rung 2 with 8 columns side by side: a store touches 16 columns 8 words apart
    ("sgemm_2d_blocktile", LADDER.sgemm_2d_contiguous_columns, {}, "store_sector_use",
     "global stores to c: bytes used of the sectors moved: 12.5 %"),
    # k = 32: 2 barriers for each of 4 tiles against 1 + 4
    ("sgemm_double_buffered", REF.sgemm_vectorized_kernel, {}, "barriers",
     "barriers: 8 per block, the budget is 5"),
    # a 16 x 2 lane grid: 2 + 2 + 4 + 4 wavefronts for 64 multiply-add instructions
    ("sgemm_warptile", REF.sgemm_double_buffered_kernel, {}, "shared_wavefronts_per_fma",
     "shared-memory load wavefronts: 0.188 per warp multiply-add, the budget is 0.125"),
    # tensor cores: 16 x 8 x 16 = 2,048 multiply-adds, one mma instruction's worth
    ("mma_tile", MMA.mma_tile_on_the_fp32_lanes, {}, "tensor_core_share",
     "multiply-adds on the tensor cores: 0 %, the budget is at least 100 %"),
    ("mma_tile", MMA.mma_tile_k_in_two_halves, {}, "mma_instructions",
     "mma instructions: 2 per 16 × 8 × 16 product, the budget is 1"),
    ("mma_tile", MMA.mma_tile_loading_a_twice, {}, "loads_per_element",
     "global loads of a: 2 per element, the budget is 1"),
    # 8 stores of a's rows and one ldmatrix.x4: correct, but shared memory is not needed
    ("mma_tile", MMA.mma_tile_through_ldmatrix, {}, "shared_requests_per_block",
     "shared-memory requests: 9 per block, the budget is 0"),
    # a's rows 64 bytes apart: each ldmatrix matrix's 8 rows fall in 2 groups of banks, 4
    # wavefronts where 1 does: 3 extra x 4 matrices x 4 ldmatrix of a per k step of 16, x 6
    # steps (k = 96) x 8 warps = 2,304
    ("hgemm_mma", MMA.hgemm_mma_unpadded, {}, "bank_conflicts",
     "wavefronts beyond the ideal): 2,304, the budget is 0"),
    # k = 96: 3 tiles of 32, two barriers each where one does
    ("hgemm_mma", MMA.hgemm_mma_two_barriers, {}, "barriers",
     "barriers: 6 per block, the budget is 3"),
    # attention, seq = 128: each lane's 32 scores out and back, 16 rows x 64 keys x 4 warps x 2
    # tiles x 2 blocks = 16,384 lane loads
    ("flash_attention", ATTN.flash_scores_through_global, {}, "output_loads",
     "global loads of the outputs: 16,384 lane loads, the budget is 0"),
    ("flash_attention", ATTN.flash_k_unpadded, {}, "bank_conflicts", "bank conflicts"),
    # 64 extra of 128 mma a warp and tile
    ("flash_attention", ATTN.flash_scores_twice, {}, "mma_instructions",
     "mma instructions: 1.5 per 16 × 8 × 16 product, the budget is 1"),
    # 2 + 4 x 2 tiles = 10, and one more a tile
    ("flash_attention", ATTN.flash_two_barriers_after_v, {}, "barriers",
     "barriers: 12 per block, the budget is 10"),
    # K: the first tile in 8 halves a copy, the second in 4: (1 + 2) / 8 per element and block
    ("flash_attention", ATTN.flash_k_in_8_byte_copies, {}, "loads_per_element",
     "global loads of k: 0.375 per element, the budget is 0.25"),
    # decoding, seq = 128: a warp's two rows 64 words apart, 2-way on every K read
    ("decode_attention", ATTN.decode_k_unpadded, {}, "bank_conflicts",
     "bank conflicts (wavefronts beyond the ideal): 1,024, the budget is 0"),
    # tile 0 in 8 halves a copy, tiles 1-3 in 4: (1 + 3 x 2) / 32 = 0.219 per element
    ("decode_attention", ATTN.decode_v_in_8_byte_copies, {}, "loads_per_element",
     "global loads of v: 0.219 per element, the budget is 0.125"),
    # 4 tiles x 2 + 1
    ("decode_attention", ATTN.decode_two_barriers, {}, "barriers",
     "barriers: 9 per block, the budget is 5"),
]


def test_attention_without_the_rescale_is_wrong():
    r = puzzles.evaluate("flash_attention", ATTN.flash_without_rescale)
    assert not r.correct and r.failure == "wrong", r.message
    assert "6.7 Attention: scores that never leave the chip" in r.message


def test_two_c_fragments_of_p_are_one_a_fragment():
    """The register trick of the worked kernel, from the PTX layouts alone: C element i of
    n8 tile h (columns 8h .. 8h + 7) sits in the lane and register where A element 4h + i of
    the 16 x 16 A fragment does."""
    from gpu_lessons.kernels import mma_layout

    a, c = mma_layout("a"), mma_layout("c")
    for row in range(16):
        for col in range(16):
            h, cc = divmod(col, 8)
            assert a.lane[row, col] == c.lane[row, cc]
            assert a.element[row, col] == 4 * h + c.element[row, cc]


@pytest.mark.parametrize("pid, size, most", [("flash_attention", {"seq": 128, "heads": 1}, 255),
                                             ("decode_attention", {"seq": 64, "heads": 1}, 64)])
def test_the_attention_kernels_compile_for_sm_90_without_spills(pid, size, most):
    """NVRTC, no GPU: the register arrays stay in registers (every index a constant) and the
    static shared memory fits the 48 KiB a block may declare."""
    from gpu_lessons import kernels

    built = kernels.compile(ref(pid), *puzzles.find(pid).make_inputs(size).values(), arch="sm_90")
    assert built.local_bytes == built.spill_store_bytes == built.spill_load_bytes == 0
    assert built.registers_per_thread <= most
    assert built.static_shared_bytes <= 48 * 1024


def test_attention_spec_against_a_loop_over_rows():
    """One head, row by row, the softmax as the textbook writes it (float64)."""
    p = puzzles.find("flash_attention")
    args = p.make_inputs({"seq": 64, "heads": 2})
    qh, kh, vh = (args[x].astype(np.float64).reshape(2, 64, 128) for x in "qkv")
    want = np.empty((2, 64, 128))
    for h in range(2):
        for i in range(64):
            sc = [float(qh[h, i] @ kh[h, j]) / 128 ** 0.5 for j in range(64)]
            e = np.exp(np.array(sc) - max(sc))
            want[h, i] = (e / e.sum()) @ vh[h]
    assert np.allclose(p.expected(args)["o"], want.ravel(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kernel", [MMA.mma_tile_a_registers_swapped,
                                    MMA.mma_tile_b_pairs_split], ids=lambda k: k.__name__)
def test_a_fragment_layout_that_is_not_the_isa_s_gives_wrong_values(kernel):
    """Small whole numbers make every order of the sums exact: only the layout can be wrong."""
    r = puzzles.evaluate("mma_tile", kernel)
    assert not r.correct and r.failure == "wrong", r.message
    assert "6.6 Tensor cores: one warp, one matrix instruction" in r.message


@pytest.mark.parametrize("pid, kernel, choices, metric, text", BREAKERS,
                         ids=[f"{b[0]}-{b[3]}" for b in BREAKERS])
def test_a_correct_kernel_over_a_budget_fails_it_by_name(pid, kernel, choices, metric, text):
    r = puzzles.evaluate(pid, kernel, **choices)
    assert r.correct and not r.passed, r.message
    assert r.failure == metric, r.message
    assert text in r.message
    assert r.score == 0.5
    assert "— see lesson" in r.message
    assert r.line is not None or metric in ("occupancy",)


def test_a_budget_the_statement_does_not_list_says_why():
    # the statement lists its budgets with their derivations; the implicit ones are not there
    r = puzzles.evaluate("reduce_shuffle", reduce_shuffle_after_return)
    assert "must execute it (CUDA leaves the result undefined otherwise)" in r.message
    listed = puzzles.evaluate("transpose", transpose_naive).message
    assert "32 consecutive floats" not in listed


def test_every_metric_has_a_breaker():
    used = {b.metric for p in ALL for b in p.budgets} | {"shuffle_inactive_reads",
                                                           "atomic_contention", "busiest_warp",
                                                           "output_loads", "input_stores"}
    assert used <= {b[3] for b in BREAKERS}
    assert used == set(_metrics.METRICS)


def test_a_shuffle_some_running_lanes_skip_is_a_hazard_not_a_budget():
    """Every lane that has not exited must execute a full-mask shuffle (Programming Guide,
    "Warp Shuffle Functions"): under ``t.if_(tid < 8)`` lanes 8..31 are running and skip it."""
    r = puzzles.evaluate("reduce_shuffle", reduce_shuffle_inactive)
    assert not r.correct and r.failure == "partial_warp", r.message
    assert r.line == reduce_shuffle_inactive.__code__.co_firstlineno + 15
    assert "lanes 8, 9, 10" in r.message and "move it out of the branch" in r.message


def test_busiest_warp_budget_is_the_worked_kernel_s_count():
    """The table the spread budget is built from is what the worked kernels issue: the busiest
    warp's instructions, counted here from the events (reconvergence markers issue nothing)."""
    from collections import Counter

    from gpu_lessons.kernels import simt
    from gpu_lessons.puzzles._core import SERIAL_ROOM, WORKED_BUSIEST_WARP, spread_budget

    assert set(WORKED_BUSIEST_WARP) == set(IDS)
    # one thread may merge the 16 bins: a load, a test, a branch and an atomic per bin
    assert SERIAL_ROOM == {"histogram_shared": 16 * 4}
    for p in ALL:
        busiest = 0
        for case in p.cases(0, choices_of(p)):
            if case.measured:
                r = simt.run(ref(p.id), case.grid, case.block, *case.args.values())
                busiest = max(busiest, *Counter((e.block, e.warp) for e in r.events
                                                if e.kind != "reconverge").values())
        assert WORKED_BUSIEST_WARP[p.id] == busiest, p.id
        assert spread_budget(p).limit == 2 * busiest + 16 + SERIAL_ROOM.get(p.id, 0)


def test_feedback_points_at_the_learner_s_line():
    r = puzzles.evaluate("transpose", transpose_naive)
    # transpose_naive's store is its third body line
    src_line = transpose_naive.__code__.co_firstlineno + 3
    assert r.line == src_line and f"line {src_line}" in r.message


# -- hazards ---------------------------------------------------------------------------------------

def stencil_no_halo(t, x, out, n):
    tile = t.shared(130, np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * 128 + tid
    t.return_if(i >= n)
    tile[tid + 1] = x[i]
    t.sync()
    out[i] = tile[tid] + tile[tid + 1] + tile[tid + 2]


def stencil_no_barrier(t, x, out, n):
    tile = t.shared(130, np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * 128 + tid
    t.return_if(i >= n)
    tile[tid + 1] = x[i]
    with t.if_((tid == 0) & (i > 0)):
        tile[0] = x[i - 1]
    with t.if_((tid == 0) & (i == 0)):
        tile[0] = 0.0
    last = (tid == 127) | (i == n - 1)
    with t.if_(last & (i + 1 < n)):
        tile[tid + 2] = x[i + 1]
    with t.if_(last & (i + 1 >= n)):
        tile[tid + 2] = 0.0
    out[i] = tile[tid] + tile[tid + 1] + tile[tid + 2]


def guard_missing(t, a, out, n):
    i = t.thread_idx.x
    out[i] = a[i] + 10


def test_hazards_fail_as_not_correct():
    f, r = failure("stencil", stencil_no_halo)
    assert f == "uninitialised" and not r.correct and "nothing was written yet" in r.message
    assert str(SHARED_SECTION) in r.message
    f, r = failure("stencil", stencil_no_barrier)
    assert f == "race" and not r.correct and str(RACE_SECTION) in r.message
    f, r = failure("guard", guard_missing)
    assert f == "error" and not r.correct
    assert "outside its shape" in r.message and "n = 100" in r.message
    assert r.message.endswith(f"— see {ERROR_SECTION}")   # where t.return_if is shown
    assert r.line == guard_missing.__code__.co_firstlineno + 2


def reduce_sync_in_branch(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    t.sync()
    s = 128
    while s > 0:
        with t.if_(tid < s):
            sdata[tid] = sdata[tid] + sdata[tid + s]
            t.sync()                          # only the adding threads arrive
        s //= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def test_a_barrier_in_a_branch_points_at_the_lesson_on_barriers():
    from gpu_lessons.puzzles._core import BARRIER_SECTION

    f, r = failure("reduce", reduce_sync_in_branch)
    assert f == "error" and not r.correct and "Move the barrier out of the branch" in r.message
    assert r.message.endswith(f"— see {BARRIER_SECTION}")
    assert r.line == reduce_sync_in_branch.__code__.co_firstlineno + 9


def histogram_shared_plain_merge(t, x, hist, n):
    bins = t.shared(16, np.int32)
    tid = t.thread_idx.x
    with t.if_(tid < 16):
        bins[tid] = 0
    t.sync()
    i = t.block_idx.x * 128 + tid
    with t.if_(i < n):
        t.atomic_add(bins, x[i], 1)
    t.sync()
    with t.if_(tid < 16):
        hist[tid] = hist[tid] + bins[tid]       # every block reads, adds and stores hist


def test_a_race_between_blocks_on_global_memory_is_not_correct():
    """The simulator runs blocks one after another, so the plain read-add-store merge gets the
    right counts there; on a GPU the blocks run at once and lose updates.  It must fail as a
    race (not pass, not score as correct), naming the element, the blocks and the lines."""
    f, r = failure("histogram_shared", histogram_shared_plain_merge)
    assert f == "race" and not r.correct and r.score == 0
    line = histogram_shared_plain_merge.__code__.co_firstlineno + 11
    assert (f"race on hist[0] between blocks: block 1 writes it (line {line}) and block 0 "
            f"reads it (line {line})") in r.message
    assert r.line == line and str(RACE_SECTION) in r.message


def test_global_race_rule_by_hand():
    """Two blocks of 32 threads: a plain store to one element from both is a race; atomics on it
    from both, or loads of an input both read, are not; an element each block stores alone is
    not."""
    from gpu_lessons.kernels import simt
    from gpu_lessons.puzzles._races import global_race

    def both_store(t, a, out):
        out[0] = a[t.thread_idx.x]

    def both_atomic(t, a, out):
        t.atomic_add(out, 0, a[t.thread_idx.x])

    def own_elements(t, a, out):
        i = t.block_idx.x * 32 + t.thread_idx.x
        out[i] = a[t.thread_idx.x] + a[0]

    a = np.ones(32, np.float32)
    verdicts = {}
    for k in (both_store, both_atomic, own_elements):
        out = np.zeros(64, np.float32)
        verdicts[k.__name__] = global_race(simt.run(k, 2, 32, a, out, record_indices=True))
    text, line = verdicts["both_store"]
    assert text.startswith("race on out[0] between blocks: block 1 writes it (line ")
    assert line == both_store.__code__.co_firstlineno + 1
    assert verdicts["both_atomic"] is None and verdicts["own_elements"] is None

    # one block of 64 threads: two warps writing the same elements race unless a t.sync()
    # orders them
    def warps_overwrite(t, a, out):
        i = t.thread_idx.x
        out[i % 32] = a[i % 32]

    def warps_in_turn(t, a, out):
        i = t.thread_idx.x
        with t.if_(i < 32):
            out[i] = a[i]
        t.sync()
        with t.if_(i >= 32):
            out[i - 32] = out[i - 32] + a[i - 32]

    out = np.zeros(64, np.float32)
    text, line = global_race(simt.run(warps_overwrite, 1, 64, a, out, record_indices=True))
    assert text.startswith(f"race on out[0] in block 0: warp 1 writes it (line {line}) and "
                           f"warp 0 writes it (line {line}) with no t.sync() in between")
    assert global_race(simt.run(warps_in_turn, 1, 64, a, out, record_indices=True)) is None


def test_a_warp_overwriting_another_warps_elements_is_a_race():
    """Warp 0 stores junk where warp 1 stores the answer: the simulator runs warp 1 second, so
    the output is right there, but a GPU may run the warps in either order."""
    def map_overwritten(t, a, out):
        i = t.thread_idx.x
        with t.if_(i + 32 < t.block_dim.x):
            out[i + 32] = a[i]                   # junk into the next warp's elements ...
        out[i] = a[i] + 10                       # ... which that warp then overwrites

    f, r = failure("map", map_overwritten)       # (without the race rule: ✓ with full marks)
    assert f == "race" and not r.correct
    line = map_overwritten.__code__.co_firstlineno
    assert (f"race on out[32] in block 0: warp 1 writes it (line {line + 4}) and warp 0 "
            f"writes it (line {line + 3}) with no t.sync() in between") in r.message


def test_an_output_only_updated_by_atomics_is_said_to_start_as_nan():
    def dot_by_atomics(t, a, b, out):
        i = t.thread_idx.x
        t.atomic_add(out, 0, a[i] * b[i])   # out starts as NaN, as every output does

    r = puzzles.evaluate("dot", dot_by_atomics)
    assert r.failure == "wrong" and "out[0] is NaN, expected" in r.message
    assert "starts as NaN, not 0" in r.message and "never written" not in r.message


def test_wrong_output_names_the_first_wrong_element():
    def map_off_by_one(t, a, out):
        i = t.thread_idx.x
        with t.if_(i != 5):
            out[i] = a[i] + 10
        with t.else_():
            out[i] = a[i] + 11

    p = puzzles.find("map")
    r = puzzles.evaluate("map", map_off_by_one)
    assert r.failure == "wrong" and not r.correct and r.score == 0
    expected = p.expected(p.cases()[0].args)["out"][5]
    assert f"out[5] is {expected + 1:g}, expected {expected:g} (n = 64)" in r.message

    def map_skips(t, a, out):
        i = t.thread_idx.x
        with t.if_(i < 60):
            out[i] = a[i] + 10

    r = puzzles.evaluate("map", map_skips)
    assert "out[60] was never written" in r.message and "4 of 64 elements are wrong" in r.message


def test_kernel_language_errors_are_reported():
    def with_import(t, a, out):
        import os  # noqa: F401
        out[t.thread_idx.x] = a[t.thread_idx.x]

    def with_data(t, a, out):
        out.data[0] = 1.0

    for kernel, construct in ((with_import, "import"), (with_data, "data")):
        r = puzzles.evaluate("map", kernel)
        assert r.failure == "language" and not r.correct, r.message
        assert construct in r.message and r.line is not None

    source = ("def map_kernel(t, a, out):\n"
              "    i = t.thread_idx.x\n"
              "    open('x')\n")
    r = puzzles.evaluate("map", source)
    assert r.failure == "language" and "line 3" in r.message


def test_kernels_as_source_text_with_constants():
    source = ("def map_kernel(t, a, out):\n"
              "    i = t.thread_idx.x\n"
              "    out[i] = a[i] + TEN\n")
    assert puzzles.evaluate("map", source, constants={"TEN": 10}).passed
    assert puzzles.evaluate("map", source, constants={"TEN": 11}).failure == "wrong"
    assert puzzles.evaluate("map", source).failure == "language"       # TEN is unknown
    # a whole notebook cell: the launch choice is read from its BLOCK = ... line
    cell = TOOL.solution_source(puzzles.find("occupancy"))
    assert puzzles.evaluate("occupancy", cell).passed
    r = puzzles.evaluate("occupancy", cell.replace(f"BLOCK = {REF.BLOCK}", "BLOCK = 32"))
    assert r.failure == "occupancy"
    assert puzzles.evaluate("occupancy", cell, block=32).failure == "occupancy"  # keyword wins
    assert puzzles.evaluate("occupancy", cell.replace(f"BLOCK = {REF.BLOCK}", "BLOCK = 32"),
                            block=REF.BLOCK).passed
    stub = puzzles.find("occupancy").stub()
    assert puzzles.evaluate("occupancy", stub).status == puzzles.NOT_ATTEMPTED
    r = puzzles.evaluate("occupancy", stub.replace("BLOCK = ...", "BLOCK = 128"))
    assert r.status == puzzles.NOT_ATTEMPTED and "NotImplementedError" in r.message


def test_signature_and_choices_are_checked():
    r = puzzles.evaluate("map", lambda t, a: None)
    assert r.failure in ("language", "signature")

    def transpose_renamed(t, src, dst, n):   # the naive transpose, arrays renamed
        i = t.block_idx.y * 32 + t.thread_idx.y
        j = t.block_idx.x * 32 + t.thread_idx.x
        dst[j * n + i] = src[i * n + j]

    # renamed arrays would be measured as untouched, and every budget would hold
    r = puzzles.evaluate("transpose", transpose_renamed)
    assert r.failure == "signature" and "kernel(t, a, out, n)" in r.message
    r = puzzles.evaluate("occupancy", REF.occupancy_kernel)
    assert r.failure == "choice" and "block=" in r.message
    r = puzzles.evaluate("occupancy", REF.occupancy_kernel, block=100)
    assert r.failure == "choice" and "multiple of 32" in r.message
    with pytest.raises(TypeError, match="no launch choice"):
        puzzles.evaluate("map", REF.map_kernel, block=64)
    with pytest.raises(ValueError, match="no puzzle 'mapp'"):
        puzzles.evaluate("mapp", REF.map_kernel)


def test_check_prints_or_raises_one_line(capsys):
    puzzles.check("map", REF.map_kernel)
    assert capsys.readouterr().out.startswith("✓ map: correct")
    with pytest.raises(checks.CheckFailed) as info:
        puzzles.check("transpose", transpose_naive)
    assert "\n" not in str(info.value)
    assert info.value._render_traceback_() == [f"\x1b[31m{info.value}\x1b[0m"]
    assert isinstance(info.value.result, puzzles.PuzzleResult)


# -- budgets against hand derivations ----------------------------------------------------------------

def _measure(pid, name, kernel=None, **choices):
    r = puzzles.evaluate(pid, kernel or ref(pid), **(choices or choices_of(puzzles.find(pid))))
    return [m for m in r.measures if m.name == name]


def test_budget_limits_by_hand():
    # stencil, n = 256: 2 blocks, 256 values + 1 halo each side of the one inner boundary
    (m,) = [m for m in _measure("stencil", "global loads of x") if "per element" in m.text]
    assert m.value == m.limit == pytest.approx(258 / 256)
    # dot, n = 128: one barrier before each of the log2(128) = 7 halving steps
    assert _measure("dot", "barriers")[0].limit == 7
    # Blelloch: 128 loads + 127 up + 1 clear + 2 x 127 down = 510 stores for 128 values
    (m,) = _measure("scan_blelloch", "shared-memory stores")
    assert m.value == m.limit == pytest.approx(510 / 128)
    # register blocking: n = 32, 4 loads per 4 multiply-adds: 32^3 loads for 32^3 FMAs
    assert _measure("matmul_register", "shared-memory loads")[0].value == 1.0
    # shuffle reduction: 8 stores of warp totals + 1 load of them by the first warp
    assert _measure("reduce_shuffle", "shared-memory requests")[0].value == 9
    assert _measure("reduce_shuffle", "barriers")[0].value == 1
    # privatised histogram: 16 bins merged once per block, each by its own lane
    assert _measure("histogram_shared", "global atomics")[0].value == 16
    assert _measure("histogram_shared", "global atomic serialisation")[0].value == 1
    # Hillis-Steele: 1 barrier before each of the 7 steps, none after the last
    assert _measure("scan_hillis_steele", "barriers")[0].value == 7
    # a transpose's 32 x 32 tile: every warp moves one 128-byte row: 4 sectors each way
    assert [m.value for m in _measure("transpose", "global loads of a")] == [4.0]
    # segmented sums start anywhere: 128 bytes at a 4-byte offset span at most 5 sectors
    assert 4.0 < _measure("segmented_sum", "global loads of x")[0].value <= 5.0


def test_occupancy_is_judged_with_the_shared_memory_the_kernel_declares():
    """The puzzle compiles the kernel for its registers (the simulator cannot count them) and
    measures shared memory: the worked kernel's tile of block + 8 floats costs nothing at 256
    threads, a spare array costs occupancy, and the failure points at the line that declared
    it."""
    r = puzzles.evaluate("occupancy", occupancy_spare_shared, block=256)
    assert r.correct and r.failure == "occupancy"
    assert r.message.index("62.5 %") < r.message.index("the budget is at least 100 %")
    first = occupancy_spare_shared.__code__.co_firstlineno
    assert r.line == first + 3                  # spare = t.shared(11000, ...)
    assert f"line {r.line}" in r.message
    (m,) = [m for m in puzzles.evaluate("occupancy", REF.occupancy_kernel, block=256).measures
            if "occupancy" in m.name]
    assert m.value == m.limit == 1.0            # 20 registers: every warp fits at 256 threads


def test_occupancy_budget_is_the_best_any_block_reaches():
    """The limit is the best occupancy over block sizes at the kernel's own registers: at the
    worked kernel's 20 (24 allocated x 32 lanes = 768 per warp) every block size from 64 holds
    64 of 64 warps; at 40 registers (1,280 per warp) 48 of 64 is the most any block reaches."""
    from gpu_lessons.puzzles import lesson06

    def best(registers):
        return max(occupancy("9.0", threads_per_block=b, registers_per_thread=registers,
                             shared_mem_per_block=4 * (b + 8)).occupancy
                   for b in range(32, 1025, 32))

    assert best(lesson06.BOX_REGISTERS) == 1.0 and best(40) == 48 / 64
    (b,) = [b for b in puzzles.find("occupancy").budgets if b.metric == "occupancy"]
    assert b.params["registers"] == "compiled"
    assert b.params["fallback_registers"] == lesson06.BOX_REGISTERS == 20
    r = puzzles.evaluate("occupancy", REF.occupancy_kernel, block=1024)
    (m,) = [m for m in r.measures if "occupancy" in m.name]
    assert r.passed and m.limit == best(lesson06.BOX_REGISTERS)


# -- lesson sections, notebooks, and what ships ------------------------------------------------------

def _headings(lesson: int) -> set[str]:
    nb = nbformat.read(ROOT / "notebooks" / NOTEBOOKS[lesson], as_version=4)
    return {line.lstrip("#").strip() for c in nb.cells if c.cell_type == "markdown"
            for line in c.source.splitlines() if line.startswith("#")}


def test_every_cited_section_exists():
    from gpu_lessons.puzzles import _core

    cited = {s for p in ALL for s in p.sections}
    cited |= {b.where() for p in ALL for b in p.budgets}
    cited |= {m.section for m in _metrics.METRICS.values()}
    cited |= {_core.RACE_SECTION, _core.SHARED_SECTION, _core.ERROR_SECTION,
              _core.BARRIER_SECTION, _core.WARP_RACE_SECTION,
              _core.SHUFFLES_READ_ACTIVE_LANES.where()}
    for s in cited:
        assert s.heading in _headings(s.lesson), f"{s} is not a heading of {s.notebook}"


def _section_text(s) -> str:
    """The markdown of section ``s``: from its heading to the next heading of any level."""
    nb = nbformat.read(ROOT / "notebooks" / NOTEBOOKS[s.lesson], as_version=4)
    lines = [ln for c in nb.cells if c.cell_type == "markdown" for ln in c.source.splitlines()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("#")
                 and ln.lstrip("#").strip() == s.heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    return "\n".join(lines[start:end])


#: The idea each puzzle turns on, which the section its "read first" (and a wrong answer's
#: feedback) points at first must teach.
KEY_IDEAS = {
    "map": "thread", "zip": "thread", "guard": "active mask", "map_2d": "warp",
    "broadcast": "block", "blocks": "grid", "blocks_2d": "grid", "split_work": "divergence",
    "stencil": "halo", "dot": "reduction", "histogram_global": "atomic",
    "histogram_shared": "shared memory", "aos_to_soa": "SoA", "transpose_naive": "sector",
    "transpose_tiled": "sector", "transpose": "padding", "matmul_naive": "intensity",
    "matmul_tiled": "tile", "ilp": "independent", "occupancy": "occupancy",
    "reduce_tree": "reduction", "reduce_warp_uniform": "reduction", "reduce": "bank conflicts",
    "reduce_shuffle": "shuffles", "scan_hillis_steele": "Hillis", "scan_blelloch": "up-sweep",
    "matmul_register": "register", "grid_stride": "grid-stride", "segmented_sum": "batch",
    "softmax": "fus", "sgemm_1d_blocktile": "register", "sgemm_2d_blocktile": "register",
    "sgemm_vectorized": "float4", "sgemm_double_buffered": "stage",
    "sgemm_warptile": "wavefront", "mma_tile": "fragment", "hgemm_mma": "fragment",
    "flash_attention": "rescaled", "decode_attention": "bandwidth",
}


def test_every_read_first_teaches_the_puzzle_s_key_idea():
    assert set(KEY_IDEAS) == set(IDS)
    for p in ALL:
        text = _section_text(p.sections[0]).lower()
        assert KEY_IDEAS[p.id].lower() in text, f"{p.id}: {p.sections[0]} never says {KEY_IDEAS[p.id]!r}"


def test_every_hazard_points_at_the_section_on_that_hazard():
    from gpu_lessons.puzzles import _core

    between_warps = _section_text(_core.RACE_SECTION)
    assert all(w in between_warps for w in ("race", "t.sync()", "barrier"))
    assert _core.BARRIER_SECTION == _core.SHARED_SECTION == _core.RACE_SECTION
    assert "t.syncwarp()" in _section_text(_core.WARP_RACE_SECTION)
    assert "t.sync()" in _section_text(puzzles.find("dot").budgets[0].where())


def test_notebooks_hold_exactly_the_tool_s_cells():
    """Stubs in exercises/, worked kernels (as in solutions/puzzle_kernels.py) in solutions/,
    statements from the puzzles' own definitions: tools/puzzle_cells.py --check."""
    assert TOOL.main(["--check"]) == 0
    for lesson, name in NOTEBOOKS.items():
        ex = nbformat.read(ROOT / "exercises" / name, as_version=4)
        sol = nbformat.read(ROOT / "solutions" / name, as_version=4)
        for a, b in zip(ex.cells, sol.cells, strict=True):
            meta = a.metadata.get("gpu_lessons", {})
            if meta.get("role") == "kernel":
                p = puzzles.find(meta["puzzle"])
                assert a.source == p.stub().rstrip("\n")
                assert b.source == TOOL.solution_source(p).rstrip("\n")
        ids = [c.metadata["gpu_lessons"]["puzzle"] for c in ex.cells
               if "puzzle" in c.metadata.get("gpu_lessons", {})
               and c.metadata["gpu_lessons"]["role"] == "kernel"]
        assert ids == [p.id for p in puzzles.puzzles(lesson)]


def _instructors_puzzle_section() -> str:
    text = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    start = text.index("\n### Kernel puzzles\n")
    return text[start:text.index("\n### ", start + 1)]


def test_instructors_guide_lists_every_puzzle():
    section = _instructors_puzzle_section()
    for p in ALL:
        assert f"`{p.id}`" in section, p.id


def test_instructors_guide_names_the_puzzles_the_teaching_kernels_answer():
    """The guide warns that lesson 02's teaching kernels answer some puzzles: exactly these, as
    the kernels stand (the transposes need another launch shape, so they are named apart)."""
    from gpu_lessons.kernels.simt import examples as simt_kernels

    answered = {}
    for name, k in simt_kernels.KERNELS.items():
        params = k.__code__.co_varnames[1:k.__code__.co_argcount]
        for p in ALL:
            if tuple(p.params) == params and puzzles.evaluate(p.id, k).passed:
                answered.setdefault(p.id, set()).add(name)
    # as they stand, each keeps a barrier after its last step: one more than the budget
    assert answered == {}
    failing = {name: puzzles.evaluate("reduce_tree", simt_kernels.KERNELS[name]).failure
               for name in ("reduce_interleaved", "reduce_interleaved_strided",
                            "reduce_sequential")}
    assert set(failing.values()) == {"barriers"}
    words = " ".join(_instructors_puzzle_section().split())
    assert ("`reduce_interleaved` (the divergent one), `reduce_interleaved_strided` and "
            "`reduce_sequential` pass `reduce_tree`, the last two `reduce_warp_uniform`, and "
            "`reduce_sequential` (sequential addressing) `reduce`") in words
    assert "the puzzles `transpose_tiled` and `transpose` in a different launch shape" in words
    assert {"transpose_tiled", "transpose_tiled_padded"} <= set(simt_kernels.KERNELS)


def test_solution_cells_are_the_module_s_functions():
    tree = ast.parse((ROOT / "solutions" / "puzzle_kernels.py").read_text(encoding="utf-8"))
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert defined == {p.kernel_name for p in ALL}


def _code_lines(text: str) -> list[str]:
    return [c for c in (line.split("#")[0].strip() for line in text.splitlines()) if c]


def test_the_package_ships_no_worked_kernel():
    """No three consecutive code lines of a worked kernel appear in any file of the package
    (single lines such as ``i = t.block_idx.x * t.block_dim.x + t.thread_idx.x`` are
    everyday indexing, not a solution).

    ``kernels/simt/examples.py`` is left out: it holds the lessons' own demonstration kernels (Harris's
    reductions and transposes), which notebook 02 prints and runs in full.
    """
    package = set()
    for path in (ROOT / "gpu_lessons").rglob("*"):
        if path.suffix in (".py", ".toml", ".json", ".md") and path.name != "examples.py":
            lines = _code_lines(path.read_text(encoding="utf-8"))
            package |= {tuple(lines[i:i + 3]) for i in range(len(lines) - 2)}
    text = (ROOT / "solutions" / "puzzle_kernels.py").read_text(encoding="utf-8")
    lines = text.splitlines()
    for fn in (n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)):
        body = _code_lines("\n".join(lines[fn.lineno:fn.end_lineno]))
        for i in range(len(body) - 2):
            assert tuple(body[i:i + 3]) not in package, f"{fn.name}: {body[i:i + 3]}"


# -- sizes, inputs and the GPU hook --------------------------------------------------------------------

@pytest.mark.parametrize("pid", IDS)
def test_inputs_and_launch_at_other_sizes(pid):
    p = puzzles.find(pid)
    gpu = dict(p.gpu_size)
    if p.valid is not None:
        p.valid(**gpu)                                     # the realistic size is allowed
    grid, block = p.launch(**gpu, **{k: 256 for k in p.choices})
    grid = grid if isinstance(grid, tuple) else (grid,)
    block = block if isinstance(block, tuple) else (block,)
    assert all(g >= 1 for g in grid) and np.prod(block) <= 1024
    # the input maker works at any allowed size (a mid-sized one here), deterministically
    size = {k: max(1, v // 16) if k not in ("n",) else v for k, v in gpu.items()}
    if "n" in size:
        size["n"] = next((n for n in range(min(gpu["n"], 4096), 0, -1)
                          if _allowed(p, {**size, "n": n})), gpu["n"])
    if not _allowed(p, size):
        size = dict(p.sizes[0])
    a, b = p.make_inputs(size, seed=3), p.make_inputs(size, seed=3)
    assert list(a) == list(p.params)
    for k in a:
        assert np.array_equal(a[k], b[k], equal_nan=True) if isinstance(a[k], np.ndarray) \
            else a[k] == b[k]
    expected = p.expected(a)
    assert set(expected) == set(p.outputs)
    assert all(np.isfinite(v).all() for v in expected.values())


def _allowed(p, size) -> bool:
    try:
        p.valid(**size) if p.valid else None
    except ValueError:
        return False
    return True


def test_run_on_gpu_prints_the_skip_line_without_a_gpu(capsys, monkeypatch):
    from gpu_lessons import measure
    from gpu_lessons.measure import gpu

    monkeypatch.setattr(gpu, "skip_line", lambda: measure.SKIP_LINE.format(why="test"))
    assert puzzles.run_on_gpu("map", REF.map_kernel, show_source=False) is None
    assert capsys.readouterr().out.strip() == measure.SKIP_LINE.format(why="test")
    # by default the learner sees the kernel as CUDA C first, each line with its Python line
    assert puzzles.run_on_gpu("map", REF.map_kernel) is None
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith('extern "C" __global__ void map_kernel(const float* a, float* out)')
    assert "out[i] = a[i] + 10" in out[-3] and out[-3].split("//")[1].strip() == \
        "out[i] = a[i] + 10"
    assert out[-1] == measure.SKIP_LINE.format(why="test")
    # the launch choice: left as BLOCK = ... is not attempted; missing or unknown is named
    assert puzzles.run_on_gpu("occupancy", REF.occupancy_kernel, block=...) is None
    assert "not attempted yet — choose BLOCK" in capsys.readouterr().out
    with pytest.raises(TypeError, match=r"occupancy's launch choices are: block=\.\.\."):
        puzzles.run_on_gpu("occupancy", REF.occupancy_kernel)
    with pytest.raises(TypeError, match="map's launch choices are: none; got block="):
        puzzles.run_on_gpu("map", REF.map_kernel, block=32)
    stub, _ = _stub(puzzles.find("map"))                 # the exercise's GPU cell, untouched
    assert puzzles.run_on_gpu("map", stub) is None
    assert "not attempted" in capsys.readouterr().out



@pytest.mark.parametrize("p", [p for p in ALL if p.gpu_launch], ids=lambda p: p.id)
def test_a_gpu_launch_keeps_the_worked_kernel_correct(p):
    """A puzzle's GPU launch differs from its simulated one (grid_stride fills the GPU: 32
    blocks of 64 per SM, 4,224 on an H200's 132 SMs); the kernel must not notice.  Run here
    with the launch for a 2-SM GPU at sizes bigger than that grid covers in one pass."""
    from gpu_lessons.kernels import simt

    assert p.gpu_launch(132, **p.gpu_size) == (4224, 64)
    for size in ({"n": 5000}, {"n": 4096 * 3 + 7}):
        args = p.make_inputs(size, seed=3)
        expected = p.expected(args)
        simt.run(getattr(REF, p.kernel_name), *p.gpu_launch(2, **size), *args.values())
        for name in p.outputs:
            np.testing.assert_allclose(args[name], expected[name], rtol=1e-6)


def test_a_gpu_run_reads_in_units_and_says_when_the_launch_is_all_it_measured():
    from gpu_lessons.puzzles.on_gpu import PuzzleGpuRun

    def run(seconds, moved, predicted):
        return PuzzleGpuRun("map", "NVIDIA H200", {"n": 1024}, (1,), (1024,), True, None,
                            seconds, 20, 4.0, 0, 0, 1.0, moved, predicted, 4.8e12)

    def rows(r):
        return {row.label: row.value for row in r.readout_rows()}

    # 1,024 floats read and written: 8,192 B; 8,192 B / 4.8e12 B/s = 1.71 ns
    tiny = rows(run(8.0e-6, 8192.0, 8192 / 4.8e12))
    assert tiny["launch"] == "grid 1, block 1,024"
    assert tiny["memory model: bytes moved at this size"] == 8192
    assert tiny["memory model: time at the catalog bandwidth"] == pytest.approx(1.7067e-9, rel=1e-4)
    assert tiny["catalog bandwidth"] == 4.8e12
    assert tiny["measured / predicted"] == pytest.approx(4687.5)
    assert "the measured time is the launch's" in tiny["note"]
    # 16 Mi floats in and out: 134 MB in 28.0 µs at 4.8 TB/s; measured 83.0 µs is 2.97x
    big = rows(run(83.0e-6, 134217728.0, 134217728 / 4.8e12))
    assert big["memory model: time at the catalog bandwidth"] == pytest.approx(27.96e-6, rel=1e-3)
    assert big["measured / predicted"] == pytest.approx(2.968, rel=1e-3) and "note" not in big
    # a product of 4,096² matrices: 2 × 4096³ = 137.4 GFLOP; in 16.94 ms that is 8.11 TFLOP/s,
    # 12.1 % of the H200's 66.9 TFLOP/s FP32 peak; the roofline's time is the arithmetic's,
    # 137.4e9 / 66.9e12 = 2.05 ms (memory: 335.5 MB / 4.8 TB/s = 69.9 µs); 16.94 / 2.054 = 8.25
    flops = 2 * 4096**3
    mm = rows(PuzzleGpuRun("matmul_tiled", "NVIDIA H200", {"n": 4096}, (256, 256), (16, 16), True,
                           None, 16.94e-3, 20, 4.0, 0, 0, 1.0, 335.5e6, flops / 66.9e12, 4.8e12,
                           float(flops), 66.9e12))
    assert mm["arithmetic"] == flops and mm["measured rate"] == pytest.approx(8.113e12, rel=1e-3)
    assert mm["of the FP32 peak"] == pytest.approx(0.1213, rel=1e-3)
    assert mm["roofline: time at the catalog peaks"] == pytest.approx(2.054e-3, rel=1e-3)
    assert mm["roofline: memory"] == pytest.approx(69.9e-6, rel=1e-3)
    assert mm["roofline: FP32 arithmetic"] == pytest.approx(2.054e-3, rel=1e-3)
    assert mm["measured / predicted"] == pytest.approx(8.247, rel=1e-3)
    assert puzzles.find("matmul_tiled").flops(n=4096) == flops

def test_show_draws_a_kernel_and_says_when_it_cannot(capsys):
    picture = puzzles.show("transpose_naive", REF.transpose_naive_kernel)
    # the map shows the warp's costliest access to out: the store down a column
    assert "1 instruction (block 0, warp 0, step" in picture.children[1].title.text
    whole = puzzles.show("transpose_naive", REF.transpose_naive_kernel, whole_run=True)
    assert "whole run" in whole.children[1].title.text
    # a notebook draws it as a widget, with no bokeh output_notebook() call beforehand
    assert "application/vnd.jupyter.widget-view+json" in picture._repr_mimebundle_()
    # a puzzle about bank conflicts maps the shared array at the warp's most conflicted access:
    # the strided reduction's index = 2·s·tid puts lanes of one step on a few banks
    conflicted = puzzles.show("reduce", REF.reduce_warp_uniform_kernel).children[1].title.text
    result, _ = puzzles.run("reduce", REF.reduce_warp_uniform_kernel)
    step = int(re.search(r"step (\d+)", conflicted).group(1))
    event = next(e for e in result.warp_events(0, 0) if e.step == step)
    assert conflicted.startswith("shared ") and event.bank_conflicts == max(
        e.bank_conflicts or 0 for e in result.warp_events(0, 0)) > 0
    kernel, _ = _stub(puzzles.find("transpose"))
    assert puzzles.show("transpose", kernel) is None
    assert "not attempted" in capsys.readouterr().out

    def map_reads_past_the_end(t, a, out):
        i = t.thread_idx.x
        out[i] = a[i + 1]

    assert puzzles.show("map", map_reads_past_the_end) is None
    assert "outside its shape" in capsys.readouterr().out


@pytest.mark.parametrize("pid", IDS)
def test_show_draws_every_worked_kernel(pid, capsys):
    """Every puzzle has its picture, with the learner's launch choices passed as for check()
    (``block=`` is occupancy's launch choice; the warp to draw is ``block_index``/``warp``)."""
    p = puzzles.find(pid)
    picture = puzzles.show(pid, getattr(REF, p.kernel_name), **choices_of(p))
    assert capsys.readouterr().out == ""
    lanes, memory = picture.children
    assert lanes.title.text.startswith(f"{p.kernel_name}: block 0, warp 0")
    space, name = memory.title.text.split()[:2]               # "global a[64]: ..."
    drawn = name.split("[")[0]
    if p.picture == "shared":                                 # the bank-conflict puzzles
        assert space == "shared" and drawn not in p.params
    else:                                                     # its own array, else one of its
        assert space == "global" and (drawn == p.picture if p.picture else drawn in p.params)
    # bokeh clips a title wider than its figure: at 13 px a character takes about 6.5 px
    for fig in (lanes, memory):
        assert fig.width >= 6.5 * len(fig.title.text), fig.title.text


def test_show_draws_the_warp_asked_for_with_the_learner_s_block_size():
    picture = puzzles.show("occupancy", REF.occupancy_kernel, block_index=1, warp=3, block=128)
    assert picture.children[0].title.text.startswith("occupancy_kernel: block 1, warp 3")
    with pytest.raises(ValueError, match="warp"):    # 128 threads: warps 0-3 only
        puzzles.show("occupancy", REF.occupancy_kernel, warp=4, block=128)
    with pytest.raises(TypeError, match=r"occupancy's launch choices are: block=\.\.\.; got none"):
        puzzles.run("occupancy", REF.occupancy_kernel)


def test_results_read_well():
    r = puzzles.evaluate("transpose", transpose_naive)
    rows = {row.label: row.value for row in r.readout_rows()}
    assert r.readout_title() == "transpose: failed" and rows["verdict"] == r.message == str(r)
    assert rows["first failure"] == "store_sectors"
    # every budget measured has its row, marked as the kernel met it
    assert [m.name for m in r.measures] == list(rows)[-len(r.measures):]
    assert any(rows[m.name].endswith(" ✗") for m in r.measures if not m.ok)
    p = puzzles.find("transpose")
    assert repr(p) == "Puzzle('transpose': Transpose without bank conflicts, lesson 04)"
    assert "transpose_kernel(t, a, out, n)" in p._repr_html_()
    assert re.search(r"Budgets:\n  - global loads of a ≤ 4\.0 sectors per request", p.describe())


# -- honest variants -------------------------------------------------------------------------------
# Sound kernels a good learner might write that differ from the worked ones: other index
# arithmetic, t.if_ instead of t.return_if, values read once into locals, unrolled or counted
# loops, other tree orders, shuffles, swizzled tiles, online softmax, ...  Each must pass: a
# budget that rejects one of them is unfair, not strict.  (Kernels a budget rightly rejects —
# stride-2 loads in the Blelloch scan, a halo tile loaded from a misaligned start — are among the
# BREAKERS above.)

def honest_map_local(t, a, out):
    i = t.thread_idx.x
    v = a[i]
    out[i] = v + 10


def honest_map_warp_lane(t, a, out):
    i = t.warp * 32 + t.lane
    out[i] = a[i] + 10


def honest_zip_locals(t, a, b, out):
    i = t.thread_idx.x
    x = a[i]
    y = b[i]
    out[i] = x + y


def honest_guard_if(t, a, out, n):
    i = t.thread_idx.x
    with t.if_(i < n):
        out[i] = a[i] + 10


def honest_guard_if_local(t, a, out, n):
    i = t.thread_idx.x
    with t.if_(i < n):
        v = a[i]
        out[i] = v + 10


def honest_map_2d_if(t, a, out, n):
    row = t.thread_idx.y
    col = t.thread_idx.x
    with t.if_(row < n):  # noqa: SIM117 (nested guards, as a learner writes them)
        with t.if_(col < n):
            k = row * n + col
            out[k] = a[k] + 10


def honest_map_2d_two_returns(t, a, out, n):
    i = t.thread_idx.y
    j = t.thread_idx.x
    t.return_if(i >= n)
    t.return_if(j >= n)
    idx = i * n + j
    out[idx] = a[idx] + 10


def honest_broadcast_if(t, a, b, out, n, m):
    i = t.thread_idx.y
    j = t.thread_idx.x
    with t.if_((i < n) & (j < m)):
        ai = a[i]
        bj = b[j]
        out[i * m + j] = ai + bj


def honest_blocks_if(t, a, out, n):
    i = t.block_idx.x * 128 + t.thread_idx.x
    with t.if_(i < n):
        out[i] = a[i] + 10


def honest_blocks_2d_dims(t, a, out, rows, cols):
    col = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    row = t.block_idx.y * t.block_dim.y + t.thread_idx.y
    with t.if_((row < rows) & (col < cols)):
        k = row * cols + col
        v = a[k]
        out[k] = v + v


def honest_split_work_two_ifs(t, a, b, out_a, out_b, n):
    g = t.block_idx.x * 128 + t.thread_idx.x
    with t.if_(g < n):
        out_a[g] = a[g] * 2
    with t.if_(g >= n):
        out_b[g - n] = b[g - n] + 1


def honest_split_work_return(t, a, b, out_a, out_b, n):
    g = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    with t.if_(g >= n):
        j = g - n
        out_b[j] = b[j] + 1
    t.return_if(g >= n)
    out_a[g] = a[g] * 2


def honest_split_work_by_warp(t, a, b, out_a, out_b, n):
    w = t.block_idx.x * 4 + t.warp           # global warp number
    half = n // 32                           # warps of job a
    with t.if_(w < half):
        i = w * 32 + t.lane
        out_a[i] = a[i] * 2
    with t.else_():
        j = (w - half) * 32 + t.lane
        out_b[j] = b[j] + 1


def honest_stencil_where_halo(t, x, out, n):
    tile = t.shared(130, np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * 128 + tid
    t.return_if(i >= n)
    tile[tid + 1] = x[i]
    with t.if_(tid == 0):
        left = t.local(0.0, np.float32)
        with t.if_(i > 0):
            left[...] = x[i - 1]
        tile[0] = left
    last = (tid == 127) | (i == n - 1)
    with t.if_(last):
        right = t.local(0.0, np.float32)
        with t.if_(i + 1 < n):
            right[...] = x[i + 1]
        tile[tid + 2] = right
    t.sync()
    out[i] = tile[tid] + tile[tid + 1] + tile[tid + 2]


def honest_stencil_no_return(t, x, out, n):
    # no early return: the partial block's spare threads store 0s and skip the output
    tile = t.shared(130, np.float32)
    tid = t.thread_idx.x
    start = t.block_idx.x * 128
    i = start + tid
    with t.if_(i < n):
        tile[tid + 1] = x[i]
    with t.else_():
        tile[tid + 1] = 0.0
    with t.if_(tid == 0):
        with t.if_(start > 0):
            tile[0] = x[start - 1]
        with t.else_():
            tile[0] = 0.0
    with t.if_(tid == 1):
        with t.if_(start + 128 < n):
            tile[129] = x[start + 128]
        with t.else_():
            tile[129] = 0.0
    t.sync()
    with t.if_(i < n):
        out[i] = tile[tid] + tile[tid + 1] + tile[tid + 2]


def honest_stencil_in_registers_then_shared(t, x, out, n):
    tile = t.shared(130, np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * 128 + tid
    t.return_if(i >= n)
    mid = x[i]
    tile[tid + 1] = mid
    with t.if_(tid == 0):
        tile[0] = 0.0
        with t.if_(i > 0):
            tile[0] = x[i - 1]
    with t.if_((tid == 127) | (i == n - 1)):
        tile[tid + 2] = 0.0
        with t.if_(i + 1 < n):
            tile[tid + 2] = x[i + 1]
    t.sync()
    out[i] = tile[tid] + mid + tile[tid + 2]


def honest_dot_interleaved(t, a, b, out):
    cache = t.shared(t.block_dim.x, np.float32)
    tid = t.thread_idx.x
    cache[tid] = a[tid] * b[tid]
    s = 1
    while s < t.block_dim.x:
        t.sync()
        with t.if_(tid % (2 * s) == 0):
            cache[tid] = cache[tid] + cache[tid + s]
        s *= 2
    with t.if_(tid == 0):
        out[0] = cache[0]


def honest_dot_shuffle(t, a, b, out):
    totals = t.shared(32, np.float32)
    tid = t.thread_idx.x
    v = a[tid] * b[tid]
    d = 16
    while d > 0:
        v = v + t.shfl_down(v, d)
        d //= 2
    with t.if_(t.lane == 0):
        totals[t.warp] = v
    t.sync()
    warps = t.block_dim.x // 32
    with t.if_(t.warp == 0):
        w = t.local(0.0, np.float32)
        with t.if_(tid < warps):
            w[...] = totals[tid]
        d = 16
        while d > 0:
            w[...] = w + t.shfl_down(w, d)
            d //= 2
        with t.if_(tid == 0):
            out[0] = w


def honest_dot_locals(t, a, b, out):
    cache = t.shared(1024, np.float32)
    tid = t.thread_idx.x
    x = a[tid]
    y = b[tid]
    cache[tid] = x * y
    s = t.block_dim.x // 2
    while s > 0:
        t.sync()
        with t.if_(tid < s):
            cache[tid] += cache[tid + s]
        s = s // 2
    with t.if_(tid == 0):
        out[0] = cache[0]


def honest_histogram_global_if(t, x, hist, n):
    i = t.block_idx.x * 128 + t.thread_idx.x
    with t.if_(i < n):
        b = x[i]
        t.atomic_add(hist, b, 1)


def honest_histogram_shared_nonzero(t, x, hist, n):
    bins = t.shared(16, np.int32)
    tid = t.thread_idx.x
    with t.if_(tid < 16):
        bins[tid] = 0
    t.sync()
    i = t.block_idx.x * t.block_dim.x + tid
    with t.if_(i < n):
        t.atomic_add(bins, x[i], 1)
    t.sync()
    with t.if_(tid < 16):
        c = bins[tid]
        with t.if_(c > 0):                    # skip empty bins
            t.atomic_add(hist, tid, c)


def honest_histogram_shared_return(t, x, hist, n):
    bins = t.shared(16, np.int32)
    tid = t.thread_idx.x
    with t.if_(tid < 16):
        bins[tid] = 0
    t.sync()
    i = t.block_idx.x * 128 + tid
    with t.if_(i < n):
        v = x[i]
        t.atomic_add(bins, v, 1)
    t.sync()
    t.return_if(tid >= 16)
    t.atomic_add(hist, tid, bins[tid])


def honest_histogram_shared_thread0_merge(t, x, hist, n):
    bins = t.shared(16, np.int32)
    tid = t.thread_idx.x
    with t.if_(tid < 16):
        bins[tid] = 0
    t.sync()
    i = t.block_idx.x * 128 + tid
    with t.if_(i < n):
        t.atomic_add(bins, x[i], 1)
    t.sync()
    with t.if_(tid == 0):                     # one thread merges the 16 bins
        for b in range(16):
            t.atomic_add(hist, b, bins[b])


def honest_aos_to_soa_loop(t, aos, x, y, z, n):
    tile = t.shared(384, np.float32)
    tid = t.thread_idx.x
    first = t.block_idx.x * 384
    j = t.local(tid)
    for _ in t.while_(lambda: j < 384):
        with t.if_(first + j < 3 * n):
            tile[j] = aos[first + j]
        j[...] = j + 128
    t.sync()
    i = t.block_idx.x * 128 + tid
    with t.if_(i < n):
        x[i] = tile[3 * tid]
        y[i] = tile[3 * tid + 1]
        z[i] = tile[3 * tid + 2]


def honest_aos_to_soa_2d_tile(t, aos, x, y, z, n):
    tile = t.shared((128, 3), np.float32)
    tid = t.thread_idx.x
    first = t.block_idx.x * 384
    for k in range(3):
        j = k * 128 + tid
        with t.if_(first + j < 3 * n):
            tile[j // 3, j % 3] = aos[first + j]
    t.sync()
    i = t.block_idx.x * 128 + tid
    t.return_if(i >= n)
    x[i] = tile[tid, 0]
    y[i] = tile[tid, 1]
    z[i] = tile[tid, 2]


def honest_aos_to_soa_soa_tiles(t, aos, x, y, z, n):
    # scatter into three field tiles while loading, read them back unit-stride
    sx = t.shared(128, np.float32)
    sy = t.shared(128, np.float32)
    sz = t.shared(128, np.float32)
    tid = t.thread_idx.x
    first = t.block_idx.x * 384
    for k in range(3):
        j = k * 128 + tid
        with t.if_(first + j < 3 * n):
            v = aos[first + j]
            f = j % 3
            with t.if_(f == 0):
                sx[j // 3] = v
            with t.if_(f == 1):
                sy[j // 3] = v
            with t.if_(f == 2):
                sz[j // 3] = v
    t.sync()
    i = t.block_idx.x * 128 + tid
    t.return_if(i >= n)
    x[i] = sx[tid]
    y[i] = sy[tid]
    z[i] = sz[tid]


def honest_transpose_naive_dims(t, a, out, n):
    row = t.block_idx.y * t.block_dim.y + t.thread_idx.y
    col = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if((row >= n) | (col >= n))
    v = a[row * n + col]
    out[col * n + row] = v


def honest_transpose_tiled_locals(t, a, out, n):
    tile = t.shared((32, 32), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    bx = t.block_idx.x * 32
    by = t.block_idx.y * 32
    tile[ty, tx] = a[(by + ty) * n + bx + tx]
    t.sync()
    v = tile[tx, ty]
    out[(bx + ty) * n + by + tx] = v


def honest_transpose_swizzle(t, a, out, n):
    tile = t.shared((32, 32), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    tile[ty, tx ^ ty] = a[(t.block_idx.y * 32 + ty) * n + t.block_idx.x * 32 + tx]
    t.sync()
    out[(t.block_idx.x * 32 + ty) * n + t.block_idx.y * 32 + tx] = tile[tx, ty ^ tx]


def honest_transpose_flat_padded(t, a, out, n):
    tile = t.shared(32 * 33, np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    tile[ty * 33 + tx] = a[(t.block_idx.y * 32 + ty) * n + t.block_idx.x * 32 + tx]
    t.sync()
    out[(t.block_idx.x * 32 + ty) * n + t.block_idx.y * 32 + tx] = tile[tx * 33 + ty]


def honest_matmul_naive_if_local(t, a, b, c, n):
    row = t.block_idx.y * t.block_dim.y + t.thread_idx.y
    col = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    with t.if_((row < n) & (col < n)):
        acc = t.local(0.0, np.float32)
        for k in range(n):
            acc[...] = acc + a[row * n + k] * b[k * n + col]
        c[row * n + col] = acc


def honest_matmul_naive_two_locals(t, a, b, c, n):
    row = t.block_idx.y * 16 + t.thread_idx.y
    col = t.block_idx.x * 16 + t.thread_idx.x
    t.return_if(row >= n)
    t.return_if(col >= n)
    acc = 0.0
    for k in range(n):
        x = a[row * n + k]
        y = b[k * n + col]
        acc = acc + x * y
    c[row * n + col] = acc


def honest_matmul_tiled_while(t, a, b, c, n):
    sa = t.shared((16, 16), np.float32)
    sb = t.shared((16, 16), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * 16 + ty
    col = t.block_idx.x * 16 + tx
    acc = t.local(0.0, np.float32)
    tiles = n // 16
    for m in range(tiles):
        sa[ty, tx] = a[row * n + m * 16 + tx]
        sb[ty, tx] = b[(m * 16 + ty) * n + col]
        t.sync()
        for k in range(0, 16, 4):               # unrolled by 4
            acc[...] = acc + sa[ty, k] * sb[k, tx]
            acc[...] = acc + sa[ty, k + 1] * sb[k + 1, tx]
            acc[...] = acc + sa[ty, k + 2] * sb[k + 2, tx]
            acc[...] = acc + sa[ty, k + 3] * sb[k + 3, tx]
        t.sync()
    c[row * n + col] = acc


def honest_matmul_tiled_flat(t, a, b, c, n):
    sa = t.shared(256, np.float32)
    sb = t.shared(256, np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * t.block_dim.y + ty
    col = t.block_idx.x * t.block_dim.x + tx
    acc = 0.0
    k0 = 0
    while k0 < n:
        sa[ty * 16 + tx] = a[row * n + (k0 + tx)]
        sb[ty * 16 + tx] = b[(k0 + ty) * n + col]
        t.sync()
        for k in range(16):
            acc += sa[ty * 16 + k] * sb[k * 16 + tx]
        t.sync()
        k0 += 16
    c[row * n + col] = acc


def honest_ilp_warp_chunks(t, x, out, n):
    # each warp owns 128 consecutive elements: lane, lane + 32, lane + 64, lane + 96
    i = t.block_idx.x * 512 + t.warp * 128 + t.lane
    x0 = x[i]
    x1 = x[i + 32]
    x2 = x[i + 64]
    x3 = x[i + 96]
    out[i] = x0 * 2 + 1
    out[i + 32] = x1 * 2 + 1
    out[i + 64] = x2 * 2 + 1
    out[i + 96] = x3 * 2 + 1


def honest_ilp_compute_then_store(t, x, out, n):
    i = t.block_idx.x * 512 + t.thread_idx.x
    x0 = x[i]
    x1 = x[i + 128]
    x2 = x[i + 256]
    x3 = x[i + 384]
    y0 = x0 * 2 + 1
    y1 = x1 * 2 + 1
    y2 = x2 * 2 + 1
    y3 = x3 * 2 + 1
    out[i] = y0
    out[i + 128] = y1
    out[i + 256] = y2
    out[i + 384] = y3


def honest_occupancy_ends(t, x, out, n):
    # left halo from the first 4 threads, right halo from the last 4
    size = t.block_dim.x
    tile = t.shared(size + 8, np.float32)
    tid = t.thread_idx.x
    start = t.block_idx.x * size
    i = start + tid
    v = t.local(0.0, np.float32)
    with t.if_(i < n):
        v[...] = x[i]
    tile[tid + 4] = v
    with t.if_(tid < 4):
        g = start - 4 + tid
        h = t.local(0.0, np.float32)
        with t.if_(g >= 0):
            h[...] = x[g]
        tile[tid] = h
    with t.if_(tid >= size - 4):
        g = i + 4
        h = t.local(0.0, np.float32)
        with t.if_(g < n):
            h[...] = x[g]
        tile[tid + 8] = h
    t.sync()
    t.return_if(i >= n)
    acc = t.local(0.0, np.float32)
    for k in range(9):
        acc[...] = acc + tile[tid + k]
    out[i] = acc


def honest_reduce_tree_sequential(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    t.sync()
    for step in range(8):
        s = 128 >> step
        with t.if_(tid < s):
            sdata[tid] += sdata[tid + s]
        if step < 7:                          # the last sum is thread 0's own
            t.sync()
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def honest_reduce_tree_unrolled(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    t.sync()
    with t.if_(tid < 128):
        sdata[tid] += sdata[tid + 128]
    t.sync()
    with t.if_(tid < 64):
        sdata[tid] += sdata[tid + 64]
    t.sync()
    with t.if_(tid < 32):
        sdata[tid] += sdata[tid + 32]
    t.sync()
    with t.if_(tid < 16):
        sdata[tid] += sdata[tid + 16]
    t.sync()
    with t.if_(tid < 8):
        sdata[tid] += sdata[tid + 8]
    t.sync()
    with t.if_(tid < 4):
        sdata[tid] += sdata[tid + 4]
    t.sync()
    with t.if_(tid < 2):
        sdata[tid] += sdata[tid + 2]
    t.sync()
    with t.if_(tid < 1):
        sdata[tid] += sdata[tid + 1]
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def honest_reduce_last_warp_syncwarp(t, x, out):
    # barriers while more than one warp adds, then warp 0 alone with __syncwarp
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    t.sync()
    s = 128
    while s > 32:
        with t.if_(tid < s):
            sdata[tid] = sdata[tid] + sdata[tid + s]
        t.sync()
        s //= 2
    with t.if_(tid < 32):
        while s > 0:
            v = sdata[tid] + sdata[tid + s]
            t.syncwarp()
            sdata[tid] = v
            t.syncwarp()
            s //= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def honest_reduce_last_warp_shuffle(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    t.sync()
    s = 128
    while s > 16:
        with t.if_(tid < s):
            sdata[tid] = sdata[tid] + sdata[tid + s]
        t.sync()
        s //= 2
    with t.if_(t.warp == 0):
        v = sdata[tid]
        d = 16
        while d > 0:
            v = v + t.shfl_down(v, d)
            d //= 2
        with t.if_(tid == 0):
            out[t.block_idx.x] = v


def honest_reduce_shuffle_all_warps_finish(t, x, out):
    totals = t.shared(8, np.float32)
    tid = t.thread_idx.x
    v = x[t.block_idx.x * 256 + tid]
    d = 16
    while d > 0:
        v += t.shfl_down(v, d)
        d = d // 2
    with t.if_(t.lane == 0):
        totals[t.warp] = v
    t.sync()
    with t.if_(tid < 32):
        w = t.local(0.0, np.float32)
        with t.if_(tid < 8):
            w[...] = totals[tid]
        w[...] = w + t.shfl_down(w, 4)
        w[...] = w + t.shfl_down(w, 2)
        w[...] = w + t.shfl_down(w, 1)
        with t.if_(tid == 0):
            out[t.block_idx.x] = w


def honest_scan_hs_where(t, x, out):
    buf = t.shared((2, 128), np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * 128 + tid
    buf[0, tid] = x[i]
    src = 0
    for d in range(7):
        t.sync()
        offset = 1 << d
        dst = 1 - src
        j = t.where(tid >= offset, tid - offset, tid)
        add = t.where(tid >= offset, buf[src, j], 0.0)
        buf[dst, tid] = buf[src, tid] + add
        src = dst
    out[i] = buf[src, tid]


def honest_scan_hs_two_arrays(t, x, out):
    a = t.shared(128, np.float32)
    b = t.shared(128, np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * 128 + tid
    a[tid] = x[i]
    t.sync()
    # 7 steps, alternating a -> b, b -> a; unrolled in pairs with a last odd step
    offset = 1
    while offset < 64:
        with t.if_(tid >= offset):
            b[tid] = a[tid] + a[tid - offset]
        with t.else_():
            b[tid] = a[tid]
        t.sync()
        offset *= 2
        with t.if_(tid >= offset):
            a[tid] = b[tid] + b[tid - offset]
        with t.else_():
            a[tid] = b[tid]
        t.sync()
        offset *= 2
    with t.if_(tid >= 64):
        b[tid] = a[tid] + a[tid - 64]
    with t.else_():
        b[tid] = a[tid]
    out[i] = b[tid]


def honest_scan_warp_shuffle(t, x, out):
    sums = t.shared(4, np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * 128 + tid
    v = x[i]
    d = 1
    while d < 32:                               # scan within the warp
        up = t.shfl_up(v, d)
        v = v + t.where(t.lane >= d, up, 0.0)
        d *= 2
    with t.if_(t.lane == 31):
        sums[t.warp] = v
    t.sync()
    before = t.local(0.0, np.float32)
    for w in range(3):
        with t.if_(t.warp > w):
            before[...] = before + sums[w]
    out[i] = v + before


def honest_reduce_shuffle_xor(t, x, out):
    totals = t.shared(8, np.float32)
    tid = t.thread_idx.x
    v = x[t.block_idx.x * 256 + tid]
    m = 16
    while m > 0:                              # butterfly: every lane ends with the sum
        v = v + t.shfl_xor(v, m)
        m //= 2
    with t.if_(t.lane == 0):
        totals[t.warp] = v
    t.sync()
    with t.if_(t.warp == 0):
        w = t.where(t.lane < 8, totals[t.lane % 8], 0.0)
        m = 4
        while m > 0:
            w = w + t.shfl_xor(w, m)
            m //= 2
        with t.if_(t.lane == 0):
            out[t.block_idx.x] = w


def honest_grid_stride_counted(t, x, out, n):
    start = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    stride = t.grid_dim.x * t.block_dim.x
    for k in range((n + stride - 1) // stride):
        i = start + k * stride
        with t.if_(i < n):
            out[i] = x[i] * 2 + 1


def honest_grid_stride_while_local(t, x, out, n):
    i = t.local(t.block_idx.x * 64 + t.thread_idx.x)
    for _ in t.while_(lambda: i < n):
        v = x[i]
        out[i] = v + v + 1
        i[...] = i + 256


def honest_segmented_sum_shuffle(t, x, offsets, out):
    totals = t.shared(4, np.float32)
    tid = t.thread_idx.x
    seg = t.block_idx.x
    start = offsets[seg]
    end = offsets[seg + 1]
    acc = t.local(0.0, np.float32)
    i = t.local(start + tid)
    for _ in t.while_(lambda: i < end):
        acc[...] = acc + x[i]
        i[...] = i + 128
    v = acc + 0.0
    d = 16
    while d > 0:
        v = v + t.shfl_down(v, d)
        d //= 2
    with t.if_(t.lane == 0):
        totals[t.warp] = v
    t.sync()
    with t.if_(tid == 0):
        out[seg] = totals[0] + totals[1] + totals[2] + totals[3]


def honest_segmented_sum_aligned(t, x, offsets, out):
    # start each pass on a 32-element boundary, so a warp's loads are aligned
    part = t.shared(128, np.float32)
    tid = t.thread_idx.x
    seg = t.block_idx.x
    start = offsets[seg]
    end = offsets[seg + 1]
    acc = t.local(0.0, np.float32)
    i = t.local(start - start % 32 + tid)
    for _ in t.while_(lambda: i < end):
        with t.if_(i >= start):
            acc[...] = acc + x[i]
        i[...] = i + 128
    part[tid] = acc
    t.sync()
    s = 64
    while s > 0:
        with t.if_(tid < s):
            part[tid] += part[tid + s]
        t.sync()
        s //= 2
    with t.if_(tid == 0):
        out[seg] = part[0]


def honest_segmented_sum_counted(t, x, offsets, out):
    # the lane loop as a while over a per-lane count
    part = t.shared(128, np.float32)
    tid = t.thread_idx.x
    seg = t.block_idx.x
    start = offsets[seg]
    length = offsets[seg + 1] - start
    acc = t.local(0.0, np.float32)
    k = t.local(tid)
    for _ in t.while_(lambda: k < length):
        acc[...] = acc + x[start + k]
        k[...] = k + t.block_dim.x
    part[tid] = acc
    t.sync()
    for step in range(7):
        s = 64 >> step
        with t.if_(tid < s):
            part[tid] = part[tid] + part[tid + s]
        t.sync()
    with t.if_(tid == 0):
        out[seg] = part[0]


def honest_softmax_online(t, x, out, cols):
    # one pass keeps a running max and a sum rescaled to it; then one combine of (max, sum)
    row = t.shared(1024, np.float32)
    rm = t.shared(128, np.float32)
    rs = t.shared(128, np.float32)
    tid = t.thread_idx.x
    base = t.block_idx.x * cols
    m = t.local(-np.inf, np.float32)
    s = t.local(0.0, np.float32)
    for j0 in range(0, cols, 128):
        j = j0 + tid
        with t.if_(j < cols):
            v = x[base + j]
            row[j] = v
            new = np.maximum(m, v)
            s[...] = s * np.exp(m - new) + np.exp(v - new)
            m[...] = new
    rm[tid] = m
    rs[tid] = s
    t.sync()
    h = 64
    while h > 0:
        with t.if_(tid < h):
            m1 = rm[tid]
            m2 = rm[tid + h]
            mm = np.maximum(m1, m2)
            s1 = t.where(m1 == -np.inf, 0.0, rs[tid] * np.exp(m1 - mm))
            s2 = t.where(m2 == -np.inf, 0.0, rs[tid + h] * np.exp(m2 - mm))
            rm[tid] = mm
            rs[tid] = s1 + s2
        t.sync()
        h //= 2
    top = rm[0]
    scale = 1.0 / rs[0]
    for j0 in range(0, cols, 128):
        j = j0 + tid
        with t.if_(j < cols):
            out[base + j] = np.exp(row[j] - top) * scale


def honest_softmax_shuffles(t, x, out, cols):
    row = t.shared(1024, np.float32)
    warp_max = t.shared(4, np.float32)
    warp_sum = t.shared(4, np.float32)
    tid = t.thread_idx.x
    base = t.block_idx.x * cols
    m = t.local(-np.inf, np.float32)
    j = t.local(tid)
    for _ in t.while_(lambda: j < cols):
        v = x[base + j]
        row[j] = v
        m[...] = np.maximum(m, v)
        j[...] = j + 128
    d = 16
    while d > 0:
        m[...] = np.maximum(m, t.shfl_xor(m, d))
        d //= 2
    with t.if_(t.lane == 0):
        warp_max[t.warp] = m
    t.sync()
    top = np.maximum(np.maximum(warp_max[0], warp_max[1]), np.maximum(warp_max[2], warp_max[3]))
    total = t.local(0.0, np.float32)
    j[...] = tid
    for _ in t.while_(lambda: j < cols):
        e = np.exp(row[j] - top)
        row[j] = e
        total[...] = total + e
        j[...] = j + 128
    d = 16
    while d > 0:
        total[...] = total + t.shfl_xor(total, d)
        d //= 2
    with t.if_(t.lane == 0):
        warp_sum[t.warp] = total
    t.sync()
    scale = 1.0 / (warp_sum[0] + warp_sum[1] + warp_sum[2] + warp_sum[3])
    j[...] = tid
    for _ in t.while_(lambda: j < cols):
        out[base + j] = row[j] * scale
        j[...] = j + 128


def honest_softmax_recompute_exp(t, x, out, cols):
    # keep x in shared memory and compute exp twice instead of storing it
    row = t.shared(1024, np.float32)
    red = t.shared(128, np.float32)
    tid = t.thread_idx.x
    base = t.block_idx.x * cols
    m = t.local(-np.inf, np.float32)
    for j0 in range(0, cols, 128):
        j = j0 + tid
        with t.if_(j < cols):
            row[j] = x[base + j]
            m[...] = np.maximum(m, row[j])
    red[tid] = m
    t.sync()
    for step in range(7):
        s = 64 >> step
        with t.if_(tid < s):
            red[tid] = np.maximum(red[tid], red[tid + s])
        t.sync()
    top = red[0]
    t.sync()
    total = t.local(0.0, np.float32)
    for j0 in range(0, cols, 128):
        j = j0 + tid
        with t.if_(j < cols):
            total[...] = total + np.exp(row[j] - top)
    red[tid] = total
    t.sync()
    for step in range(7):
        s = 64 >> step
        with t.if_(tid < s):
            red[tid] = red[tid] + red[tid + s]
        t.sync()
    total_all = red[0]
    for j0 in range(0, cols, 128):
        j = j0 + tid
        with t.if_(j < cols):
            out[base + j] = np.exp(row[j] - top) / total_all


def honest_softmax_registers(t, x, out, cols):
    # the 8 values a thread owns stay in registers (cols <= 1024 = 8 x 128)
    red = t.shared(128, np.float32)
    tid = t.thread_idx.x
    base = t.block_idx.x * cols
    v0 = t.local(-np.inf, np.float32)
    v1 = t.local(-np.inf, np.float32)
    v2 = t.local(-np.inf, np.float32)
    v3 = t.local(-np.inf, np.float32)
    v4 = t.local(-np.inf, np.float32)
    v5 = t.local(-np.inf, np.float32)
    v6 = t.local(-np.inf, np.float32)
    v7 = t.local(-np.inf, np.float32)
    with t.if_(tid < cols):
        v0[...] = x[base + tid]
    with t.if_(tid + 128 < cols):
        v1[...] = x[base + tid + 128]
    with t.if_(tid + 256 < cols):
        v2[...] = x[base + tid + 256]
    with t.if_(tid + 384 < cols):
        v3[...] = x[base + tid + 384]
    with t.if_(tid + 512 < cols):
        v4[...] = x[base + tid + 512]
    with t.if_(tid + 640 < cols):
        v5[...] = x[base + tid + 640]
    with t.if_(tid + 768 < cols):
        v6[...] = x[base + tid + 768]
    with t.if_(tid + 896 < cols):
        v7[...] = x[base + tid + 896]
    m = np.maximum(np.maximum(np.maximum(v0, v1), np.maximum(v2, v3)),
                   np.maximum(np.maximum(v4, v5), np.maximum(v6, v7)))
    red[tid] = m
    t.sync()
    s = 64
    while s > 0:
        with t.if_(tid < s):
            red[tid] = np.maximum(red[tid], red[tid + s])
        t.sync()
        s //= 2
    top = red[0]
    t.sync()
    e0 = np.exp(v0 - top)
    e1 = np.exp(v1 - top)
    e2 = np.exp(v2 - top)
    e3 = np.exp(v3 - top)
    e4 = np.exp(v4 - top)
    e5 = np.exp(v5 - top)
    e6 = np.exp(v6 - top)
    e7 = np.exp(v7 - top)
    red[tid] = e0 + e1 + e2 + e3 + e4 + e5 + e6 + e7
    t.sync()
    s = 64
    while s > 0:
        with t.if_(tid < s):
            red[tid] = red[tid] + red[tid + s]
        t.sync()
        s //= 2
    scale = 1.0 / red[0]
    with t.if_(tid < cols):
        out[base + tid] = e0 * scale
    with t.if_(tid + 128 < cols):
        out[base + tid + 128] = e1 * scale
    with t.if_(tid + 256 < cols):
        out[base + tid + 256] = e2 * scale
    with t.if_(tid + 384 < cols):
        out[base + tid + 384] = e3 * scale
    with t.if_(tid + 512 < cols):
        out[base + tid + 512] = e4 * scale
    with t.if_(tid + 640 < cols):
        out[base + tid + 640] = e5 * scale
    with t.if_(tid + 768 < cols):
        out[base + tid + 768] = e6 * scale
    with t.if_(tid + 896 < cols):
        out[base + tid + 896] = e7 * scale


def honest_dot_warp_atomics(t, a, b, out):
    tid = t.thread_idx.x
    v = a[tid] * b[tid]
    d = 16
    while d > 0:
        v = v + t.shfl_down(v, d)
        d //= 2
    with t.if_(tid == 0):
        out[0] = 0.0
    t.sync()
    with t.if_(t.lane == 0):
        t.atomic_add(out, 0, v)


def honest_segmented_sum_warp_atomics(t, x, offsets, out):
    tid = t.thread_idx.x
    seg = t.block_idx.x
    end = offsets[seg + 1]
    acc = t.local(0.0, np.float32)
    i = t.local(offsets[seg] + tid)
    for _ in t.while_(lambda: i < end):
        acc[...] = acc + x[i]
        i[...] = i + 128
    v = acc + 0.0
    d = 16
    while d > 0:
        v = v + t.shfl_down(v, d)
        d //= 2
    with t.if_(tid == 0):
        out[seg] = 0.0
    t.sync()
    with t.if_(t.lane == 0):
        t.atomic_add(out, seg, v)


def honest_reduce_shared_atomic(t, x, out):
    total = t.shared(1, np.float32)
    tid = t.thread_idx.x
    with t.if_(tid == 0):
        total[0] = 0.0
    t.sync()
    v = x[t.block_idx.x * 256 + tid]
    d = 16
    while d > 0:
        v = v + t.shfl_down(v, d)
        d //= 2
    with t.if_(t.lane == 0):
        t.atomic_add(total, 0, v)
    t.sync()
    with t.if_(tid == 0):
        out[t.block_idx.x] = total[0]


def honest_histogram_shared_merge_guarded(t, x, hist, n):
    bins = t.shared(16, np.int32)
    tid = t.thread_idx.x
    with t.if_(tid < 16):
        bins[tid] = 0
    t.sync()
    i = t.block_idx.x * 128 + tid
    with t.if_(i < n):
        t.atomic_add(bins, x[i], 1)
    t.sync()
    with t.if_(tid == 0):
        for b in range(16):
            c = bins[b]
            with t.if_(c != 0):
                t.atomic_add(hist, b, c)


def honest_histogram_shared_serial_zero_and_merge(t, x, hist, n):
    bins = t.shared(16, np.int32)
    tid = t.thread_idx.x
    with t.if_(tid == 0):
        for b in range(16):
            bins[b] = 0
    t.sync()
    i = t.block_idx.x * 128 + tid
    with t.if_(i < n):
        t.atomic_add(bins, x[i], 1)
    t.sync()
    with t.if_(tid == 0):
        for b in range(16):
            c = bins[b]
            with t.if_(c > 0):
                t.atomic_add(hist, b, c)


def honest_occupancy_one_thread_halo(t, x, out, n):
    size = t.block_dim.x
    tile = t.shared(size + 8, np.float32)
    tid = t.thread_idx.x
    start = t.block_idx.x * size
    i = start + tid
    with t.if_(i < n):
        tile[tid + 4] = x[i]
    with t.else_():
        tile[tid + 4] = 0.0
    with t.if_(tid == 0):
        for k in range(4):
            with t.if_(start - 4 + k >= 0):
                tile[k] = x[start - 4 + k]
            with t.else_():
                tile[k] = 0.0
            with t.if_(start + size + k < n):
                tile[size + 4 + k] = x[start + size + k]
            with t.else_():
                tile[size + 4 + k] = 0.0
    t.sync()
    t.return_if(i >= n)
    acc = t.local(0.0, np.float32)
    for k in range(9):
        acc[...] = acc + tile[tid + k]
    out[i] = acc


def honest_broadcast_flat(t, a, b, out, n, m):
    k = t.thread_idx.y * 16 + t.thread_idx.x  # consecutive threads, consecutive elements
    t.return_if(k >= n * m)
    out[k] = a[k // m] + b[k % m]


def honest_blocks_block_dim(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    with t.if_(i < n):
        v = a[i]
        out[i] = v + 10


def honest_histogram_global_return_local(t, x, hist, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    b = x[i]
    t.atomic_add(hist, b, 1)


def honest_zip_warp_lane(t, a, b, out):
    i = 32 * t.warp + t.lane
    out[i] = b[i] + a[i]


def honest_blocks_2d_two_returns(t, a, out, rows, cols):
    col = t.block_idx.x * 16 + t.thread_idx.x
    row = t.block_idx.y * 16 + t.thread_idx.y
    t.return_if(col >= cols)
    t.return_if(row >= rows)
    k = row * cols + col
    out[k] = 2 * a[k]


def honest_transpose_naive_if(t, a, out, n):
    i = t.block_idx.y * 32 + t.thread_idx.y
    j = t.block_idx.x * 32 + t.thread_idx.x
    with t.if_((i < n) & (j < n)):
        v = a[i * n + j]
        out[j * n + i] = v


def honest_scan_blelloch_padded(t, x, out):
    # GPU Gems 3, Example 39-2: one spare word every 32 keeps the tree's accesses off one bank
    temp = t.shared(132, np.float32)
    tid = t.thread_idx.x
    base = t.block_idx.x * 128
    ai0 = tid
    bi0 = tid + 64
    temp[ai0 + ai0 // 32] = x[base + ai0]
    temp[bi0 + bi0 // 32] = x[base + bi0]
    offset = 1
    d = 64
    while d > 0:
        t.sync()
        with t.if_(tid < d):
            ai = offset * (2 * tid + 1) - 1
            bi = offset * (2 * tid + 2) - 1
            ai = ai + ai // 32
            bi = bi + bi // 32
            temp[bi] = temp[bi] + temp[ai]
        offset *= 2
        d //= 2
    with t.if_(tid == 0):
        temp[127 + 127 // 32] = 0.0
    d = 1
    while d < 128:
        offset //= 2
        t.sync()
        with t.if_(tid < d):
            ai = offset * (2 * tid + 1) - 1
            bi = offset * (2 * tid + 2) - 1
            ai = ai + ai // 32
            bi = bi + bi // 32
            left = temp[ai]
            temp[ai] = temp[bi]
            temp[bi] = temp[bi] + left
        d *= 2
    t.sync()
    out[base + ai0] = temp[ai0 + ai0 // 32]
    out[base + bi0] = temp[bi0 + bi0 // 32]


def honest_occupancy_halo_by_eight(t, x, out, n):
    size = t.block_dim.x
    tile = t.shared(size + 8, np.float32)
    tid = t.thread_idx.x
    start = t.block_idx.x * size
    i = start + tid
    with t.if_(i < n):
        tile[tid + 4] = x[i]
    with t.else_():
        tile[tid + 4] = 0.0
    with t.if_(tid < 8):          # 8 threads fetch the halo: 4 left, 4 right
        g = t.where(tid < 4, start - 4 + tid, start + size + tid - 4)
        s = t.where(tid < 4, tid, size + tid)
        with t.if_((g >= 0) & (g < n)):
            tile[s] = x[g]
        with t.else_():
            tile[s] = 0.0
    t.sync()
    t.return_if(i >= n)
    acc = t.local(0.0, np.float32)
    for k in range(9):
        acc[...] = acc + tile[tid + k]
    out[i] = acc


def honest_reduce_warp_atomics(t, x, out):
    tid = t.thread_idx.x
    v = x[t.block_idx.x * 256 + tid]
    d = 16
    while d > 0:
        v = v + t.shfl_down(v, d)
        d //= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = 0.0
    t.sync()
    with t.if_(t.lane == 0):
        t.atomic_add(out, t.block_idx.x, v)


def honest_matmul_tiled_flat_local(t, a, b, c, n):
    sa = t.shared(256, np.float32)
    sb = t.shared(256, np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * 16 + ty
    col = t.block_idx.x * 16 + tx
    acc = t.local(0.0, np.float32)
    for m in range(n // 16):
        sa[ty * 16 + tx] = a[row * n + m * 16 + tx]
        sb[ty * 16 + tx] = b[(m * 16 + ty) * n + col]
        t.sync()
        for k in range(16):
            acc[...] = acc + sa[ty * 16 + k] * sb[k * 16 + tx]
        t.sync()
    c[row * n + col] = acc


def honest_matmul_tiled_guarded(t, a, b, c, n):
    # guards as for any n (n is a multiple of 16 here, so they never skip)
    sa = t.shared((16, 16), np.float32)
    sb = t.shared((16, 16), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * 16 + ty
    col = t.block_idx.x * 16 + tx
    acc = t.local(0.0, np.float32)
    for k0 in range(0, n, 16):
        with t.if_((row < n) & (k0 + tx < n)):
            sa[ty, tx] = a[row * n + k0 + tx]
        with t.else_():
            sa[ty, tx] = 0.0
        with t.if_((col < n) & (k0 + ty < n)):
            sb[ty, tx] = b[(k0 + ty) * n + col]
        with t.else_():
            sb[ty, tx] = 0.0
        t.sync()
        for k in range(16):
            acc[...] = acc + sa[ty, k] * sb[k, tx]
        t.sync()
    with t.if_((row < n) & (col < n)):
        c[row * n + col] = acc


def honest_matmul_naive_flat_idx(t, a, b, c, n):
    row = t.block_idx.y * t.block_dim.y + t.thread_idx.y
    col = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    with t.if_((row < n) & (col < n)):
        acc = t.local(0.0, np.float32)
        ia = t.local(row * n)
        ib = t.local(col)
        for _k in range(n):
            acc[...] = acc + a[ia] * b[ib]
            ia[...] = ia + 1
            ib[...] = ib + n
        c[row * n + col] = acc


def honest_matmul_register_flat_idx(t, a, b, c, n):
    sa = t.shared(16 * 24, np.float32)      # rows 24 words apart
    sb = t.shared(16 * 24, np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * 16 + ty
    col = t.block_idx.x * 16 + tx
    c00 = t.local(0.0, np.float32)
    c01 = t.local(0.0, np.float32)
    c10 = t.local(0.0, np.float32)
    c11 = t.local(0.0, np.float32)
    for k0 in range(0, n, 16):
        for di in range(0, 16, 8):
            for dj in range(0, 16, 8):
                sa[(ty + di) * 24 + tx + dj] = a[(row + di) * n + k0 + tx + dj]
                sb[(ty + di) * 24 + tx + dj] = b[(k0 + ty + di) * n + col + dj]
        t.sync()
        for k in range(16):
            a0 = sa[ty * 24 + k]
            a1 = sa[(ty + 8) * 24 + k]
            b0 = sb[k * 24 + tx]
            b1 = sb[k * 24 + tx + 8]
            c00[...] = c00 + a0 * b0
            c01[...] = c01 + a0 * b1
            c10[...] = c10 + a1 * b0
            c11[...] = c11 + a1 * b1
        t.sync()
    c[row * n + col] = c00
    c[row * n + col + 8] = c01
    c[(row + 8) * n + col] = c10
    c[(row + 8) * n + col + 8] = c11


def honest_segmented_sum_chunk_atomics(t, x, offsets, out):
    # each warp sums 32 values at a time with shuffles; lane 0 adds each chunk's total
    total = t.shared(1, np.float32)
    tid = t.thread_idx.x
    seg = t.block_idx.x
    start = offsets[seg]
    end = offsets[seg + 1]
    with t.if_(tid == 0):
        total[0] = 0.0
    t.sync()
    k = t.local(start + t.warp * 32)          # the same in every lane of a warp
    for _ in t.while_(lambda: k < end):
        i = k + t.lane
        v = t.local(0.0, np.float32)
        with t.if_(i < end):
            v[...] = x[i]
        d = 16
        while d > 0:
            v[...] = v + t.shfl_down(v, d)
            d //= 2
        with t.if_(t.lane == 0):
            t.atomic_add(total, 0, v)
        k[...] = k + 128
    t.sync()
    with t.if_(tid == 0):
        out[seg] = total[0]


def honest_histogram_shared_last_warp(t, x, hist, n):
    # the block's last 16 threads zero and merge the bins, in reverse order
    bins = t.shared(16, np.int32)
    tid = t.thread_idx.x
    b = 127 - tid
    with t.if_(b < 16):
        bins[b] = 0
    t.sync()
    i = t.block_idx.x * 128 + tid
    with t.if_(i < n):
        t.atomic_add(bins, x[i], 1)
    t.sync()
    with t.if_(b < 16):
        t.atomic_add(hist, b, bins[b])


def honest_aos_to_soa_shuffles(t, aos, x, y, z, n):
    # no shared memory: each warp loads its 96 floats as three coalesced rows of 32, then every
    # lane fetches its struct's three fields from the lanes that hold them
    first = (t.block_idx.x * 128 + t.warp * 32) * 3
    lane = t.lane
    r0 = t.local(0.0, np.float32)
    r1 = t.local(0.0, np.float32)
    r2 = t.local(0.0, np.float32)
    with t.if_(first + lane < 3 * n):
        r0[...] = aos[first + lane]
    with t.if_(first + 32 + lane < 3 * n):
        r1[...] = aos[first + 32 + lane]
    with t.if_(first + 64 + lane < 3 * n):
        r2[...] = aos[first + 64 + lane]
    f0 = 3 * lane                              # this lane's fields: f0, f0 + 1, f0 + 2
    a0 = t.shfl_idx(r0, f0 % 32)
    a1 = t.shfl_idx(r1, f0 % 32)
    a2 = t.shfl_idx(r2, f0 % 32)
    b0 = t.shfl_idx(r0, (f0 + 1) % 32)
    b1 = t.shfl_idx(r1, (f0 + 1) % 32)
    b2 = t.shfl_idx(r2, (f0 + 1) % 32)
    c0 = t.shfl_idx(r0, (f0 + 2) % 32)
    c1 = t.shfl_idx(r1, (f0 + 2) % 32)
    c2 = t.shfl_idx(r2, (f0 + 2) % 32)
    vx = t.where(f0 < 32, a0, t.where(f0 < 64, a1, a2))
    vy = t.where(f0 + 1 < 32, b0, t.where(f0 + 1 < 64, b1, b2))
    vz = t.where(f0 + 2 < 32, c0, t.where(f0 + 2 < 64, c1, c2))
    i = t.block_idx.x * 128 + t.thread_idx.x
    t.return_if(i >= n)
    x[i] = vx
    y[i] = vy
    z[i] = vz


HONEST_VARIANTS = [
    # (puzzle, kernel, launch choices)
    ("map", honest_map_local, {}),
    ("map", honest_map_warp_lane, {}),
    ("zip", honest_zip_locals, {}),
    ("zip", honest_zip_warp_lane, {}),
    ("guard", honest_guard_if, {}),
    ("guard", honest_guard_if_local, {}),
    ("map_2d", honest_map_2d_if, {}),
    ("map_2d", honest_map_2d_two_returns, {}),
    ("broadcast", honest_broadcast_if, {}),
    ("broadcast", honest_broadcast_flat, {}),
    ("blocks", honest_blocks_if, {}),
    ("blocks", honest_blocks_block_dim, {}),
    ("blocks_2d", honest_blocks_2d_dims, {}),
    ("blocks_2d", honest_blocks_2d_two_returns, {}),
    ("split_work", honest_split_work_two_ifs, {}),
    ("split_work", honest_split_work_return, {}),
    ("split_work", honest_split_work_by_warp, {}),
    ("stencil", honest_stencil_where_halo, {}),
    ("stencil", honest_stencil_no_return, {}),
    ("stencil", honest_stencil_in_registers_then_shared, {}),
    ("dot", honest_dot_interleaved, {}),
    ("dot", honest_dot_shuffle, {}),
    ("dot", honest_dot_locals, {}),
    # shuffles, then one atomic per warp into the output (once refused as reading it back)
    ("dot", honest_dot_warp_atomics, {}),
    ("histogram_global", honest_histogram_global_if, {}),
    ("histogram_global", honest_histogram_global_return_local, {}),
    ("histogram_shared", honest_histogram_shared_nonzero, {}),
    ("histogram_shared", honest_histogram_shared_return, {}),
    ("histogram_shared", honest_histogram_shared_last_warp, {}),
    ("histogram_shared", honest_histogram_shared_thread0_merge, {}),
    # one thread loops over the 16 bins (once over the busiest-warp budget)
    ("histogram_shared", honest_histogram_shared_merge_guarded, {}),
    ("histogram_shared", honest_histogram_shared_serial_zero_and_merge, {}),
    ("aos_to_soa", honest_aos_to_soa_loop, {}),
    ("aos_to_soa", honest_aos_to_soa_2d_tile, {}),
    ("aos_to_soa", honest_aos_to_soa_soa_tiles, {}),
    ("aos_to_soa", honest_aos_to_soa_shuffles, {}),
    ("transpose_naive", honest_transpose_naive_dims, {}),
    ("transpose_naive", honest_transpose_naive_if, {}),
    ("transpose_tiled", honest_transpose_tiled_locals, {}),
    ("transpose_tiled", honest_transpose_swizzle, {}),
    ("transpose", honest_transpose_swizzle, {}),
    ("transpose", honest_transpose_flat_padded, {}),
    ("matmul_naive", honest_matmul_naive_flat_idx, {}),
    ("matmul_naive", honest_matmul_naive_if_local, {}),
    ("matmul_naive", honest_matmul_naive_two_locals, {}),
    ("matmul_tiled", honest_matmul_tiled_guarded, {}),
    ("matmul_tiled", honest_matmul_tiled_flat_local, {}),
    ("matmul_tiled", honest_matmul_tiled_while, {}),
    ("matmul_tiled", honest_matmul_tiled_flat, {}),
    ("ilp", honest_ilp_warp_chunks, {}),
    ("ilp", honest_ilp_compute_then_store, {}),
    ("occupancy", honest_occupancy_ends, {"block": 256}),
    ("occupancy", honest_occupancy_ends, {"block": 512}),
    ("occupancy", honest_occupancy_ends, {"block": 128}),
    # at ~20 registers only blocks that divide 2,048 threads fill all 64 warps (384: 5 x 12 = 60)
    ("occupancy", honest_occupancy_one_thread_halo, {"block": 512}),
    ("occupancy", honest_occupancy_halo_by_eight, {"block": 64}),
    ("occupancy", honest_occupancy_halo_by_eight, {"block": 1024}),
    ("reduce_tree", honest_reduce_tree_sequential, {}),
    ("reduce_tree", honest_reduce_tree_unrolled, {}),
    ("reduce_tree", honest_reduce_shared_atomic, {}),
    ("reduce_warp_uniform", honest_reduce_tree_sequential, {}),
    ("reduce_warp_uniform", honest_reduce_last_warp_shuffle, {}),
    ("reduce", honest_reduce_tree_sequential, {}),
    ("reduce", honest_reduce_tree_unrolled, {}),
    ("reduce", honest_reduce_last_warp_syncwarp, {}),
    ("reduce", honest_reduce_last_warp_shuffle, {}),
    ("reduce", honest_reduce_shared_atomic, {}),
    ("reduce_shuffle", honest_reduce_shuffle_all_warps_finish, {}),
    ("reduce_shuffle", honest_reduce_shuffle_xor, {}),
    # one atomic per warp into out[b] (once refused as reading the output back)
    ("reduce_shuffle", honest_reduce_warp_atomics, {}),
    ("scan_hillis_steele", honest_scan_hs_where, {}),
    ("scan_hillis_steele", honest_scan_hs_two_arrays, {}),
    ("scan_hillis_steele", honest_scan_warp_shuffle, {}),
    ("scan_blelloch", honest_scan_blelloch_padded, {}),
    ("matmul_register", honest_matmul_register_flat_idx, {}),
    ("sgemm_1d_blocktile", LADDER.honest_sgemm_1d_strided_rows, {}),
    # a faster rung's kernel passes the rung below it
    ("sgemm_2d_blocktile", REF.sgemm_vectorized_kernel, {}),
    ("sgemm_vectorized", REF.sgemm_double_buffered_kernel, {}),
    ("sgemm_double_buffered", LADDER.honest_sgemm_warptile_other_pairs, {}),
    # the stages filled by cp.async: no registers on the way, one barrier a tile
    ("sgemm_double_buffered", LADDER.honest_sgemm_double_buffered_cp_async, {}),
    ("sgemm_warptile", LADDER.honest_sgemm_warptile_other_pairs, {}),
    ("mma_tile", MMA.honest_mma_tile_separate_accumulators, {}),
    ("hgemm_mma", MMA.honest_hgemm_mma_x2_loads, {}),
    ("flash_attention", ATTN.honest_flash_natural_exp, {}),
    ("decode_attention", ATTN.honest_decode_natural_exp, {}),
    ("grid_stride", honest_grid_stride_counted, {}),
    ("grid_stride", honest_grid_stride_while_local, {}),
    ("segmented_sum", honest_segmented_sum_shuffle, {}),
    ("segmented_sum", honest_segmented_sum_aligned, {}),
    ("segmented_sum", honest_segmented_sum_counted, {}),
    # one atomic per warp into out[seg] (once refused as reading the output back)
    ("segmented_sum", honest_segmented_sum_warp_atomics, {}),
    # lane 0 adds each 32-value chunk's total: one lane, several updates
    ("segmented_sum", honest_segmented_sum_chunk_atomics, {}),
    ("softmax", honest_softmax_online, {}),
    ("softmax", honest_softmax_shuffles, {}),
    ("softmax", honest_softmax_recompute_exp, {}),
    ("softmax", honest_softmax_registers, {}),
]


@pytest.mark.parametrize("pid, kernel, choices", HONEST_VARIANTS,
                         ids=[f"{v[0]}-{v[1].__name__[len('honest_'):]}" for v in HONEST_VARIANTS])
def test_an_honest_variant_passes(pid, kernel, choices):
    r = puzzles.evaluate(pid, kernel, **choices)
    assert r.passed, r.message


def test_every_puzzle_has_honest_variants():
    assert {v[0] for v in HONEST_VARIANTS} == set(IDS)


def test_an_atomic_whose_old_value_is_unused_only_writes():
    """An atomic standing alone as a statement drops the old value (CUDA emits a `red`, which
    returns nothing), so it is no read of an output; one whose value is assigned is, and so is
    any line that holds one."""
    from gpu_lessons.kernels import lang, queries

    src = ("def k(t, a, out):\n"
           "    t.atomic_add(out, 0, 1.0)\n"                                   # 2: write only
           "    v = t.atomic_add(out, 1, 0.0)\n"                               # 3: read
           "    t.atomic_add(out, 2, 1.0); w = t.atomic_add(out, 3, 0.0)\n"    # 4: read
           "    with t.if_(v > 0):\n"
           "        t.atomic_max(\n"                                           # 6, 7: write only
           "            out, 4, w)\n"
           "    old = t.atomic_add(out, 5, 1.0)\n")                          # 8: never read
    assert queries.unread_atomic_lines(lang.validate(src)) == {2, 6, 7, 8}
    # the grader's path: the kernel as a cell's text, lines counted from the cell's top
    cell = "BLOCK = 1\n\n" + inspect.getsource(honest_dot_warp_atomics)
    assert puzzles.evaluate("dot", cell.replace("honest_dot_warp_atomics", "dot_kernel")).passed


def test_one_sector_over_a_coalescing_budget_says_misaligned():
    r = puzzles.evaluate("occupancy", occupancy_halo_misaligned, block=256)
    assert "start off a 32-byte boundary" in r.message and "\n" not in r.message
    assert "boundary" not in puzzles.evaluate("transpose", transpose_naive).message


def test_too_many_loads_per_element_says_what_to_do():
    r = puzzles.evaluate("grid_stride", grid_stride_reading_twice)
    assert "keep a value needed again in a local" in r.message and "\n" not in r.message
    assert f"line {r.line}" in r.message


def test_a_sector_budget_missed_before_lesson_04_says_what_a_sector_is():
    early = puzzles.evaluate("map_2d", map_2d_columns)            # lesson 02
    assert "a sector is the 32 B piece memory moves" in early.message
    late = puzzles.evaluate("transpose", transpose_naive)         # lesson 04 teaches sectors
    assert late.failure == "store_sectors" and "a sector is the" not in late.message
