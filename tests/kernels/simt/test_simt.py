"""Tests for the SIMT simulator and its teaching kernels.

Every expected number is derived by hand from the kernel's code and the simulator's documented
rules (one warp instruction per operator on lane values, per branch test, per memory access,
per barrier), or from NumPy.  The derivations are in the comments.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons.kernels import simt
from gpu_lessons.kernels.lang import KernelLanguageError
from gpu_lessons.kernels.simt import SimtError, run
from gpu_lessons.kernels.simt import examples as K
from gpu_lessons.kernels.simt import launch as _run_module

FAST = settings(max_examples=15, deadline=None)


# -- divergence ----------------------------------------------------------------------------------

def test_parity_branch_is_half_efficient_inside_the_branch():
    # lanes 0,2,4,... take the then-path and 1,3,5,... the else-path: every instruction in
    # either body runs with 16 of 32 lanes.
    r = K.simulate("branch_by_parity")
    assert r.correct
    region = r.sim.stats(region="parity")
    assert region.simt_efficiency == 0.5
    # per warp, iters=1: then = mul, add, store; else the same -> 6 instructions x 8 warps
    assert region.instructions == 6 * 8
    assert r.sim.stats(region="parity:then").instructions == 3 * 8


def test_parity_branch_whole_kernel_efficiency():
    # Per warp, at 32 lanes: i = .. + tid (1 alu); i >= n (1 alu) + return test (1 branch);
    # x[i] (1 load); tid % 2, == 0 (2 alu); the if test (1 branch) = 7 instructions.
    # At 16 lanes: 3 in the then-body + 3 in the else-body = 6.
    # Efficiency = (7*32 + 6*16) / (13*32) = 320/416 = 10/13.
    r = K.simulate("branch_by_parity")
    assert r.sim.instructions == 8 * 13
    assert Fraction(r.sim.totals.active_lanes, 32 * r.sim.instructions) == Fraction(10, 13)


def test_branch_by_warp_is_fully_efficient():
    # warp_id = tid // 32 is the same for all 32 lanes, so each warp runs one body whole.
    r = K.simulate("branch_by_warp")
    assert r.correct
    assert r.sim.stats(region="by_warp").simt_efficiency == 1.0
    assert r.sim.simt_efficiency == 1.0
    # even warps ran only the then-path, odd warps only the else-path
    then_warps = {e.warp for e in r.sim.events if e.in_region("by_warp:then")}
    else_warps = {e.warp for e in r.sim.events if e.in_region("by_warp:else")}
    assert then_warps == {0, 2, 4, 6} and else_warps == {1, 3, 5, 7}


@pytest.mark.parametrize("iters", [0, 3])
def test_longer_paths_keep_the_branch_region_at_half(iters):
    r = K.simulate("branch_by_parity", iters=iters)
    assert r.correct
    # then-body: 2 alu per iteration + 1 store, 16 lanes each
    assert r.sim.stats(region="parity:then").instructions == 8 * (2 * iters + 1)
    assert r.sim.stats(region="parity").simt_efficiency == 0.5


def test_divergent_branch_records_reconvergence_after_the_else():
    r = K.simulate("branch_by_parity")
    evs = [e for e in r.sim.events if e.block == 0 and e.warp == 0]
    kinds = [e.kind for e in evs]
    assert kinds.count("reconverge") == 1
    k = kinds.index("reconverge")
    assert evs[k - 1].in_region("parity:else")        # right after the last else instruction
    assert evs[k].mask == 0xFFFFFFFF                     # all lanes together again
    assert not evs[k].issued
    # the uniform by-warp branch never diverges, so nothing reconverges
    assert not [e for e in K.simulate("branch_by_warp").sim.events if e.kind == "reconverge"]


def test_lane_matrix_shows_the_two_halves():
    r = K.simulate("branch_by_parity").sim
    m = r.lane_matrix(0, 0)
    assert m.shape == (32, 13)
    body = [e.in_region("parity") for e in r.warp_events(0, 0)]
    then_cols = [i for i, e in enumerate(r.warp_events(0, 0)) if e.in_region("parity:then")]
    assert m[:, then_cols].sum(axis=0).tolist() == [16] * 3
    assert m[0::2, then_cols].all() and not m[1::2, then_cols].any()
    assert m[:, [i for i, b in enumerate(body) if not b]].all()


# -- reductions (Harris kernels 1, 2, 3) ---------------------------------------------------------

def test_interleaved_reduction_divergence():
    # 256 threads, 8 warps. Step s keeps lanes with tid % 2s == 0:
    #   s = 1, 2, 4, 8, 16: every warp has 16, 8, 4, 2, 1 active lanes   -> 5 x 8 = 40 warp-steps
    #   s = 32: tids 0, 64, 128, 192 (warps 0, 2, 4, 6); s = 64: warps 0, 4; s = 128: warp 0
    #   -> 47 warp-steps in total, 8*(16+8+4+2+1) + 4 + 2 + 1 = 255 lanes (one per addition).
    # Every instruction of the body has the same mask, so the body's efficiency is
    # 255 / (32 * 47) whatever its instruction count.
    r = K.simulate("reduce_interleaved")
    assert r.correct
    s = r.sim.stats(region="add")
    assert Fraction(s.active_lanes, 32 * s.instructions) == Fraction(255, 32 * 47)
    assert s.instructions == 5 * 47   # ld, tid + s, ld, add, st


@pytest.mark.parametrize("name", ["reduce_interleaved_strided", "reduce_sequential"])
def test_compact_reductions_divergence(name):
    # Kernel 2 keeps tid < 128/s (index = 2*s*tid < 256), kernel 3 keeps tid < s: both use
    # full warps while they can: 4+2+1 full warps for 128, 64, 32 active threads, then
    # warp 0 alone with 16, 8, 4, 2, 1 lanes -> 12 warp-steps, 255 lanes.
    r = K.simulate(name)
    assert r.correct
    s = r.sim.stats(region="add")
    assert Fraction(s.active_lanes, 32 * s.instructions) == Fraction(255, 32 * 12)


def test_bank_conflicts_interleaved_vs_sequential():
    # Kernel 2: lane l of a full warp touches word 2*s*l (+s): bank (2*s*l) % 32, so 2s lanes
    # share a bank with different words -> 2s-way conflict (wavefronts - 1 = 2s - 1 each).
    #   s=1: 4 warps x 1 = 4;  s=2: 2 warps x 3 = 6;  s=4: 1 x 7 = 7;
    #   s=8: 16 lanes, banks 0/16 with 8 words each -> 7;  s=16: 8 lanes in bank 0 -> 7;
    #   s=32: 4 lanes -> 3;  s=64: 2 -> 1;  s=128: 1 lane -> 0.      Sum = 35 per access.
    # Each step loads twice (sdata[index], sdata[index+s]) and stores once.
    k2 = K.simulate("reduce_interleaved_strided").sim
    assert k2.stats(kind="ld.shared").bank_conflicts == 2 * 35
    assert k2.stats(kind="st.shared").bank_conflicts == 35
    # Kernel 1: active lanes l = 2s*k read words tid and tid+s -> distinct banks.
    # Kernel 3: lanes read consecutive words tid and tid+s -> distinct banks.
    assert K.simulate("reduce_interleaved").sim.bank_conflicts == 0
    assert K.simulate("reduce_sequential").sim.bank_conflicts == 0


def test_reduction_global_traffic():
    # x[i]: 32 consecutive floats from a 256-byte aligned array -> 4 sectors, 8 requests;
    # out[block] = sdata[0]: one lane, one sector.
    r = K.simulate("reduce_sequential").sim
    assert r.stats(kind="ld.global").sectors_per_request == 4.0
    assert r.stats(kind="ld.global").global_requests == 8
    assert r.stats(kind="st.global").global_sectors == 1
    assert r.barriers == 9   # one after the load, one per step s = 128 .. 1


@settings(max_examples=12, deadline=None)
@given(name=st.sampled_from(["reduce_interleaved", "reduce_interleaved_strided",
                             "reduce_sequential"]),
       log_block=st.integers(5, 9), blocks=st.integers(1, 3), seed=st.integers(0, 1000))
def test_reductions_sum_like_numpy(name, log_block, blocks, seed):
    block = 2 ** log_block
    r = K.simulate(name, n=block * blocks, block=block, seed=seed)
    # small integers as float32: every partial sum is exact, so == is fair
    assert np.array_equal(r.output, r.expected)
    assert not r.sim.races


# -- the missing __syncthreads() -------------------------------------------------------------------

def test_missing_sync_is_reported_as_a_race():
    # After the first barrier nothing separates the steps.  s=128: warps 0-3 write sdata[0..127];
    # s=64: warps 0,1 read sdata[64..127], written by warps 2,3 in the same phase;
    # s=32: warp 0 reads sdata[32..63], written by warp 1.  Steps s <= 16 stay inside warp 0,
    # where lanes race too: s=1 has lane 0 read sdata[1], which lane 1 wrote at s=128 (each
    # lane tid writes sdata[tid]), with no t.syncwarp() between - the first such word.
    r = K.simulate("reduce_missing_sync").sim
    racy = {race.index[0] for race in r.races if not race.within_warp}
    assert racy == set(range(32, 128))
    (lanes,) = [race for race in r.races if race.within_warp]
    assert (lanes.index, lanes.writer_warp, lanes.other_warp, lanes.writer_lane,
            lanes.other_lane, lanes.other_access) == ((1,), 0, 0, 1, 0, "read")
    assert "lane 1 of warp 0 writes it" in str(lanes) and lanes.missing == "t.syncwarp()"
    race = next(x for x in r.races if x.index == (64,))
    assert (race.array, race.writer_warp, race.other_warp, race.other_access, race.phase) == \
        ("sdata", 2, 0, "read", 1)
    assert "sdata[64]" in str(race)


@pytest.mark.parametrize("name", sorted(set(K.KERNELS) - {"reduce_missing_sync"}))
def test_correct_kernels_have_no_race(name):
    r = K.simulate(name)
    assert r.correct
    assert r.sim.races == ()


def test_missing_sync_answer_depends_on_the_schedule():
    # Warps in ascending order: warp 0 finishes every step before warp 2 has added its partner
    # (s=64 reads sdata[64..95] before warp 2's s=128 addition), so the sum is wrong.
    # Descending order runs the warps that own the higher words first, so warp 0 finds them
    # finished: the same code happens to be right. Both schedules are legal on a GPU.
    assert not K.simulate("reduce_missing_sync", order="ascending").correct
    assert K.simulate("reduce_missing_sync", order="descending").correct


@settings(max_examples=8, deadline=None)
@given(order=st.one_of(st.sampled_from(["ascending", "descending"]), st.integers(0, 10**6)))
def test_race_free_kernels_do_not_depend_on_the_order(order):
    assert K.simulate("reduce_sequential", n=512, order=order).correct
    assert K.simulate("transpose_tiled_padded", order=order).correct


# -- transposes ---------------------------------------------------------------------------------

def test_transpose_sectors_per_request():
    # 64x64 float32, blocks of 32x8 threads: a warp is 32 consecutive x with one y.
    # Reads a[y+j, x]: 32 consecutive floats on a 128-byte boundary -> 4 sectors.
    # Naive writes out[x, y+j]: lanes 64 floats = 256 B apart -> 32 sectors.
    # Tiled writes out[y+j, x]: consecutive again -> 4 sectors.
    # 4 blocks x 8 warps x 4 rows = 128 loads and 128 stores.
    naive = K.simulate("transpose_naive")
    tiled = K.simulate("transpose_tiled")
    assert naive.correct and tiled.correct
    assert naive.sim.stats(kind="ld.global").sectors_per_request == 4
    assert naive.sim.stats(kind="st.global").sectors_per_request == 32
    assert naive.sim.stats(kind="st.global").global_requests == 128
    assert tiled.sim.stats(kind="st.global").sectors_per_request == 4
    assert naive.sim.sectors_per_request == (4 + 32) / 2
    assert tiled.sim.sectors_per_request == 4


def test_transpose_tile_bank_conflicts_and_padding():
    # tile[tx, ty+j] reads a column: word 32*tx + c -> bank c for every lane: 32-way,
    # 31 conflicts per request, 128 requests.  Padded pitch 33: bank (tx + c) % 32, all distinct.
    # Writing a row tile[ty+j, tx] is conflict-free either way.
    tiled = K.simulate("transpose_tiled").sim
    padded = K.simulate("transpose_tiled_padded").sim
    assert tiled.stats(kind="ld.shared").bank_conflicts == 128 * 31
    assert tiled.stats(kind="ld.shared").shared_wavefronts == 128 * 32
    assert tiled.stats(kind="st.shared").bank_conflicts == 0
    assert padded.bank_conflicts == 0
    assert tiled.barriers == 4   # one per block


def test_transpose_other_sizes():
    r = K.simulate("transpose_tiled_padded", n=96)
    assert r.correct and r.sim.grid == (3, 3, 1)


# -- the execution model ------------------------------------------------------------------------

@FAST
@given(n=st.integers(1, 200), block=st.sampled_from([32, 40, 64, 96, 128]),
       data=st.data())
def test_masked_if_else_matches_numpy(n, block, data):
    x = np.array(data.draw(st.lists(st.integers(-50, 50), min_size=n, max_size=n)),
                 dtype=np.int64)
    out = np.zeros(n, np.int64)

    def k(t, x, out, n):
        i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
        t.return_if(i >= n)
        v = x[i]
        with t.if_(v > 0, "pos"):
            out[i] = v * 2
        with t.else_():
            out[i] = v - 1

    r = run(k, -(-n // block), block, x, out, n)
    assert np.array_equal(out, np.where(x > 0, x * 2, x - 1))
    # lanes in the then-body, summed over its 2 instructions, = 2 x (number of positive x)
    assert r.stats(region="pos:then").active_lanes == 2 * int(np.count_nonzero(x > 0))
    assert r.stats(region="pos:else").active_lanes == 2 * int(np.count_nonzero(x <= 0))
    assert 0 < r.simt_efficiency <= 1
    # no lane beyond the block is ever active, and after the return only threads i < n are
    for e in r.events:
        tid = e.warp * 32 + np.flatnonzero(e.lanes)
        assert (tid < block).all()
        if e.kind != "alu" and e.kind != "branch":
            assert (e.block * block + tid < n).all()


@FAST
@given(counts=st.lists(st.integers(0, 6), min_size=1, max_size=64))
def test_while_loop_with_per_lane_trip_counts(counts):
    x = np.array(counts, dtype=np.int64)
    out = np.full(len(x), -1, np.int64)

    def k(t, x, out):
        tid = t.thread_idx.x
        limit = x[tid]
        i = t.local(0)
        for _ in t.while_(lambda: i < limit, "loop"):
            i[...] = i + 1
        out[tid] = i

    r = run(k, 1, len(x), x, out)
    assert np.array_equal(out, x)
    # the body (one add) runs once per lane per trip: active lanes summed = sum of counts
    assert r.stats(region="loop").active_lanes == int(x.sum())
    # each warp tests the condition (max trips in that warp + 1) times
    tests = [e for e in r.events if e.kind == "branch" and e.line is not None
             and not e.in_region("loop") and e.path == ()]
    per_warp = [int(x[w * 32:(w + 1) * 32].max()) + 1 for w in range(-(-len(x) // 32))]
    assert len(tests) == sum(per_warp)


def test_barrier_waits_for_the_slowest_warp():
    # Each warp: tid < 32 (alu), if-test (branch) = steps 0, 1.  Warp 0 then issues 5 adds
    # (steps 2-6) and reaches the barrier at step 7; warps 1-3 skip the body and reach it at
    # step 2, so they wait 5 slots.  After the barrier every warp is at time 8.
    def k(t, x):
        tid = t.thread_idx.x
        with t.if_(tid < 32):
            v = tid + 1
            for _ in range(4):
                v = v + 1
        t.sync()
        x[tid] = tid

    x = np.zeros(128, np.int64)
    r = run(k, 1, 128, x)
    bars = sorted((e.warp, e.step, e.wait) for e in r.events if e.kind == "bar.sync")
    assert bars == [(0, 7, 0), (1, 2, 5), (2, 2, 5), (3, 2, 5)]
    after = {e.warp: e.time for e in r.events if e.kind == "st.global"}
    assert after == {0: 8, 1: 8, 2: 8, 3: 8}
    assert r.totals.barrier_wait == 15
    assert r.barriers == 1


def test_partial_last_warp_and_2d_blocks():
    # block (10, 5) = 50 threads: warp 0 = threads 0-31, warp 1 = 32-49 (18 lanes).
    out = np.zeros((5, 10), np.int64)

    def k(t, out):
        out[t.thread_idx.y, t.thread_idx.x] = t.thread_idx.y * 100 + t.thread_idx.x

    r = run(k, 1, (10, 5), out)
    assert np.array_equal(out, np.add.outer(np.arange(5) * 100, np.arange(10)))
    assert {e.warp: e.active for e in r.events if e.kind == "st.global"} == {0: 32, 1: 18}


def test_shared_memory_is_per_block_and_uninitialised_reads_are_noted():
    def k(t, out):
        s = t.shared(64, np.int64, name="buf")
        tid = t.thread_idx.x
        s[tid] = tid + t.block_idx.x * 100
        t.sync()
        out[t.block_idx.x, tid] = s[63 - tid]

    out = np.zeros((2, 64), np.int64)
    r = run(k, 2, 64, out)
    assert np.array_equal(out, np.array([np.arange(63, -1, -1), np.arange(163, 99, -1)]))
    assert r.races == () and r.notes == ()

    def uninit(t, out):
        s = t.shared(32, np.float32)
        out[t.thread_idx.x] = s[t.thread_idx.x]

    r = run(uninit, 1, 32, np.zeros(32, np.float32))
    assert any("nothing was written" in n for n in r.notes)


def test_mixed_barrier_lines_are_noted():
    def k(t):
        with t.if_(t.thread_idx.x < 32):
            t.sync()
        with t.else_():
            t.sync()

    r = run(k, 1, 64)
    assert any("different lines" in n for n in r.notes)


def test_where_and_local_merge_branch_values():
    def k(t, out):
        tid = t.thread_idx.x
        y = t.local(0)
        with t.if_(tid % 3 == 0):
            y[...] = tid * 10
        with t.else_():
            y[...] = -tid
        out[tid] = t.where(tid < 8, y, 7)

    out = np.zeros(32, np.int64)
    run(k, 1, 32, out)
    tid = np.arange(32)
    assert np.array_equal(out, np.where(tid < 8, np.where(tid % 3 == 0, tid * 10, -tid), 7))


def test_only_declared_variables_are_assigned_in_place():
    def k(t, out):
        i = t.thread_idx.x
        i[...] = i + 1

    # the kernel language refuses it before the simulator runs, as the translation does
    with pytest.raises(KernelLanguageError, match=r"t\.local\(\.\.\.\)") as info:
        run(k, 1, 32, np.zeros(32, np.int64))
    assert info.value.lineno == k.__code__.co_firstlineno + 2

    def ok(t, out):
        i = t.local(t.thread_idx.x)
        i[...] = i + 1
        out[t.thread_idx.x] = i + t.thread_idx.x   # threadIdx itself is untouched

    out = np.zeros(32, np.int64)
    run(ok, 1, 32, out)
    assert np.array_equal(out, 2 * np.arange(32) + 1)


def test_numpy_ufuncs_are_instructions():
    def k(t, x, out):
        i = t.thread_idx.x
        out[i] = np.sqrt(x[i]) + np.float32(1)

    x = np.arange(32, dtype=np.float32) ** 2
    out = np.zeros(32, np.float32)
    r = run(k, 1, 32, x, out)
    assert np.array_equal(out, np.arange(32, dtype=np.float32) + 1)
    assert r.totals.by_kind["alu"] == 2


def test_worker_threads_are_reused():
    import threading

    K.simulate("reduce_sequential")
    before = threading.active_count()
    for _ in range(5):
        K.simulate("reduce_sequential")
        K.simulate("transpose_naive")
    assert threading.active_count() == before


# -- errors that teach -------------------------------------------------------------------------

def _noop(t):
    pass


@pytest.mark.parametrize("block, match", [
    (0, r"block\.x must be >= 1"),
    (1025, r"block\.x must be <= 1024"),
    ((32, 32, 2), "2048 threads"),
    ((1, 1, 65), r"block\.z must be <= 64"),
    (-5, r"block\.x must be >= 1"),
])
def test_bad_block_sizes(block, match):
    with pytest.raises(ValueError, match=match):
        run(_noop, 1, block)


def test_bad_launch_arguments():
    with pytest.raises(ValueError, match=r"grid\.x must be >= 1"):
        run(_noop, 0, 32)
    with pytest.raises(TypeError, match="grid must be"):
        run(_noop, "2", 32)
    with pytest.raises(TypeError, match=r"block\.x must be an integer, got 32\.5"):
        run(_noop, 1, 32.5)
    with pytest.raises(TypeError, match="kernel must be a function"):
        run("kernel", 1, 32)
    with pytest.raises(ValueError, match="order must be one of"):
        run(_noop, 1, 32, order="random")
    with pytest.raises(TypeError, match="NumPy arrays or numbers"):
        run(lambda t, x: None, 1, 32, [1, 2, 3])
    with pytest.raises(ValueError, match="max_warps"):
        run(_noop, 10_000, 1024)


def test_out_of_bounds_access_names_the_thread():
    def k(t, x):
        x[t.thread_idx.x + 1] = 1.0

    with pytest.raises(IndexError, match=r"lane 31 of warp 0 .* writes x\[32\].*shape \[32\]"):
        run(k, 1, 32, np.zeros(32, np.float32))


def test_masked_off_lanes_are_not_checked():
    # Lane 0 computes sh[-1] and x[-1] but the branch switches it off: no error, no note,
    # and the counts are those of lanes 1-31 only.  Global load x[tid - 1] for tid 1..31:
    # floats 0..30 = bytes 0..123 of a 256-aligned array -> 4 sectors.  Shared load
    # sh[tid - 1]: 31 distinct consecutive words -> 1 wavefront, no conflict.
    def k(t, x, out):
        sh = t.shared(32, np.float32, name="sh")
        tid = t.thread_idx.x
        sh[tid] = x[tid]
        t.sync()
        with t.if_(tid >= 1):
            out[tid] = sh[tid - 1] + x[tid - 1]

    x = np.arange(32, dtype=np.float32)
    out = np.full(32, -1, np.float32)
    r = run(k, 1, 32, x, out)
    assert np.array_equal(out, np.r_[-1, 2 * np.arange(31)].astype(np.float32))
    assert r.notes == () and r.races == ()
    ld = [e for e in r.events if e.kind == "ld.global" and e.active == 31]
    assert [e.sectors for e in ld] == [4]
    sh = [e for e in r.events if e.kind == "ld.shared"]
    assert [(e.active, e.wavefronts, e.bank_conflicts) for e in sh] == [(31, 1, 0)]


def test_active_out_of_range_lane_names_array_lane_index_and_line():
    def k(t, x, out):
        sh = t.shared(32, np.float32, name="sh")
        tid = t.thread_idx.x
        sh[tid] = x[tid]
        t.sync()
        with t.if_(tid >= 1):
            out[tid] = sh[tid + 1]   # lane 31 reads sh[32]

    line = k.__code__.co_firstlineno + 6
    with pytest.raises(simt.KernelError) as info:
        run(k, 1, 32, np.zeros(32, np.float32), np.zeros(32, np.float32))
    err = info.value
    assert isinstance(err, IndexError) and isinstance(err.original, IndexError)
    assert err.__cause__ is err.original
    assert (err.lineno, err.line) == (line, "out[tid] = sh[tid + 1]   # lane 31 reads sh[32]")
    text = str(err)
    assert text.startswith(f"test_simt.py, line {line}, in k: out[tid] = sh[tid + 1]")
    assert "lane 31 of warp 0" in text and "thread (31, 0, 0)" in text and "sh[32]" in text
    # IPython shows only the learner's frame and the message, in red
    assert err._render_traceback_() == [f"\x1b[31m{text}\x1b[0m"]


def test_learners_misspelt_name_points_at_the_learners_line():
    def k(t, out):
        tid = t.thread_idx.x
        out[tid] = tid + offest   # noqa: F821 (the typo is the test)

    # found before the kernel runs: the kernel language knows every name a kernel may use
    with pytest.raises(KernelLanguageError) as info:
        run(k, 1, 32, np.zeros(32, np.int64))
    err = info.value
    assert err.lineno == k.__code__.co_firstlineno + 2
    assert str(err).startswith(f"line {err.lineno}: `offest` is not defined")


def test_kernel_errors_in_a_notebook_cell_name_the_cell():
    # In IPython the cell's source is in linecache and its file maps to "Cell In[n]"; the
    # traceback shown is only the kernel's line and the error (_render_traceback_).
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("import numpy as np\nfrom gpu_lessons.kernels import simt\n"
                       "def k(t, out):\n    out[t.thread_idx.x + 1] = t.thread_idx.x\n")
        shell.run_cell("try:\n    simt.run(k, 1, 32, np.zeros(32, np.int64))\n"
                       "except simt.KernelError as e:\n    err = e\n")
        err = shell.user_ns["err"]
    finally:
        InteractiveShell.clear_instance()
    assert re.match(r"Cell In\[\d+\], line 4, in k: "
                    r"out\[t\.thread_idx\.x \+ 1\] = t\.thread_idx\.x\nIndexError", str(err))
    assert err.line == "out[t.thread_idx.x + 1] = t.thread_idx.x"


def test_errors_in_a_while_condition_list_the_learners_frames():
    def k(t, x):
        i = t.local(0)
        for _ in t.while_(lambda: i < x[i] // 0):   # integer // 0 is fine on lanes ...
            i[...] = i + 1
        t.sync()
        x[i + 32] = 0                                  # ... a store past the end is not

    with pytest.raises(IndexError) as info:
        run(k, 1, 32, np.ones(32, np.int64))
    err = info.value
    assert err.lineno == k.__code__.co_firstlineno + 5
    assert [f[2] for f in err.frames] == ["k"]

    def k2(t, x):
        i = t.local(0)
        for _ in t.while_(lambda: i < 1 / 0):
            i[...] = i + 1

    with pytest.raises(ZeroDivisionError) as info:
        run(k2, 1, 32, np.ones(32, np.int64))
    err = info.value
    assert [f[2] for f in err.frames] == ["k2", "<lambda>"]
    assert err.lineno == k2.__code__.co_firstlineno + 2
    assert err._render_traceback_()[0] == "In the kernel:"


def test_python_if_on_lane_values_runs_both_paths():
    def k(t, out):
        if t.thread_idx.x < 16:
            out[t.thread_idx.x] = 1
        else:
            out[t.thread_idx.x] = 2

    out = np.zeros(32, np.int64)
    r = run(k, 1, 32, out)
    assert list(out) == [1] * 16 + [2] * 16
    # the compare and the branch with 32 lanes, each store with 16
    assert r.simt_efficiency == (2 * 32 + 2 * 16) / (4 * 32)


def test_value_from_inside_a_branch_cannot_leak_out():
    def k(t, out):
        with t.if_(t.thread_idx.x < 16):
            y = t.thread_idx.x * 2
        out[t.thread_idx.x] = y

    with pytest.raises(SimtError, match=r"t\.local\(0\)"):
        run(k, 1, 32, np.zeros(32, np.int64))


def test_divergent_barrier_is_an_error():
    def k(t):
        with t.if_(t.thread_idx.x < 16):
            t.sync()

    with pytest.raises(SimtError, match="divergent"):
        run(k, 1, 32)


def test_else_after_an_if_whose_body_has_a_barrier():
    # A uniform branch may contain __syncthreads(); the other warps run at the barrier,
    # and the else still belongs to this warp's if.
    def k(t, out, flag):
        with t.if_(flag > 0):
            out[t.thread_idx.x] = 1
            t.sync()
        with t.else_():
            out[t.thread_idx.x] = 2

    out = np.zeros(64, np.int64)
    run(k, 1, 64, out, 1)
    assert (out == 1).all()
    run(k, 1, 64, out, 0)
    assert (out == 2).all()


def test_an_error_in_one_warp_unwinds_the_warps_waiting_at_a_barrier():
    # Warps 0 and 1 wait at the first barrier when warp 2 fails; they are unwound (their
    # code after the barrier never runs) and the next launch starts clean.
    def k(t, out):
        tid = t.thread_idx.x
        with t.if_(tid >= 64):
            out[tid + 1000] = 1          # warp 2 writes past the end
        t.sync()
        out[tid] = 7

    out = np.zeros(96, np.int64)
    with pytest.raises(IndexError) as info:
        run(k, 1, 96, out)
    assert info.value.lineno == k.__code__.co_firstlineno + 3
    assert "warp 2" in str(info.value)
    assert not out.any()
    ok = run(K.reduce_sequential, 1, 64, np.ones(64, np.float32), np.zeros(1, np.float32))
    assert ok.barriers == 7


def test_else_needs_an_if():
    def k(t):
        with t.else_():
            pass

    with pytest.raises(KernelLanguageError, match=r"must directly follow"):
        run(k, 1, 32)


def test_shared_memory_limit_and_runaway_loops():
    def big(t):
        s = t.shared(13000, np.float32)
        s[0] = 1.0

    with pytest.raises(ValueError, match="48 KB"):
        run(big, 1, 32)

    def forever(t):
        i = t.local(0)
        for _ in t.while_(lambda: i >= 0):
            i[...] = i + 1

    with pytest.raises(SimtError, match="max_instructions"):
        run(forever, 1, 32, max_instructions=500)


def test_result_reports_the_shared_memory_a_block_declared():
    """What the occupancy calculator needs as shared_mem_per_block, measured from the kernel:
    a float tile of 264 (1,056 B) at byte 0, then 10 doubles from the next 128-byte boundary
    (1,152): 1,152 + 80 = 1,232 B per block, each array with the line that declared it."""
    def two_arrays(t, x):
        tile = t.shared(264, np.float32, name="tile")
        spare = t.shared(10, np.float64, name="spare")
        tile[t.thread_idx.x] = x[t.thread_idx.x]
        spare[0] = 1.0

    r = run(two_arrays, 2, 64, np.ones(64, np.float32))
    first = two_arrays.__code__.co_firstlineno
    assert r.shared_bytes_per_block == 1_232
    assert [(a.name, a.nbytes, a.line) for a in r.shared_arrays] == [
        ("tile", 1_056, first + 1), ("spare", 80, first + 2)]
    rows = {row.label: row.value for row in r.readout_rows()}
    assert rows["shared memory declared per block"] == 1_232
    # 1,056 B = 1.03125 KiB
    assert rows["shared arrays"] == (f"tile: 1.031 KiB (line {first + 1}), "
                                     f"spare: 80 B (line {first + 2})")

    def none(t, x):
        x[t.thread_idx.x] = 0.0

    r = run(none, 1, 32, np.ones(32, np.float32))
    assert r.shared_bytes_per_block == 0 and r.shared_arrays == ()
    assert "shared memory declared per block" not in [row.label for row in r.readout_rows()]

    def block_zero_only(t, x):       # every block declares the same: __shared__ is top-level
        if t.block_idx.x == 0:
            big = t.shared(1000, np.float32, name="big")
            big[0] = 1.0
        x[t.thread_idx.x] = 0.0

    with pytest.raises(KernelLanguageError, match="top level of the kernel"):
        run(block_zero_only, 2, 32, np.ones(32, np.float32))


def test_teaching_kernel_inputs_are_checked():
    with pytest.raises(ValueError, match="power of two"):
        K.simulate("reduce_sequential", block=96)
    with pytest.raises(ValueError, match="multiple of block"):
        K.simulate("reduce_sequential", n=300)
    with pytest.raises(ValueError, match="multiple of 32"):
        K.simulate("transpose_naive", n=48)
    with pytest.raises(ValueError, match="name must be one of"):
        K.simulate("reduce_magic")


# -- CUDA twins ---------------------------------------------------------------------------------

def test_every_kernel_has_a_cuda_twin():
    assert set(K.SIMT_CUDA_SOURCES) == set(K.KERNELS)
    for name, src in K.SIMT_CUDA_SOURCES.items():
        assert f'extern "C" __global__ void {name}(' in src
        launch = K.cuda_launch(name)
        # the CUDA signature lists the same arguments, in the same order, as the Python one
        params = _run_module._kernel_params(K.KERNELS[name])
        assert list(launch.args) == params
        for p in params:
            assert f" {p}," in src or f" {p})" in src


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) not installed")
def test_cuda_sources_compile(tmp_path):
    src = tmp_path / "kernels.cu"
    src.write_text("\n".join(K.SIMT_CUDA_SOURCES.values()))
    done = subprocess.run(["nvcc", "-ptx", str(src), "-o",
                           str(tmp_path / "k.ptx")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    for name in K.SIMT_CUDA_SOURCES:
        assert f".entry {name}(" in ptx


def test_launch_shapes():
    red = K.cuda_launch("reduce_sequential", 1024, block=256)
    assert (red.grid, red.block, red.shared_bytes) == ((4, 1, 1), (256, 1, 1), 1024)
    tr = K.cuda_launch("transpose_naive", 128)
    assert (tr.grid, tr.block, tr.shared_bytes) == ((4, 4, 1), (32, 8, 1), 0)
    br = K.cuda_launch("branch_by_warp", 1000)
    assert br.grid == (4, 1, 1) and br.inputs[2:] == (1000, 1)


def test_a_teaching_kernels_run_says_whether_it_matches_numpy():
    r = K.simulate("transpose_naive")
    assert r.readout_rows()[-1].value == "matches NumPy"
    assert r.readout_rows()[:-1] == r.sim.readout_rows()
