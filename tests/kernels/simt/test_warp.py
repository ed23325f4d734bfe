"""Atomics, warp shuffles and the measurements the kernel puzzles grade with.

Expected values are derived by hand in the comments (CUDA's documented semantics: the
Programming Guide's "Atomic Functions" and "Warp Shuffle Functions"), or come from NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons.kernels import simt
from gpu_lessons.kernels.lang import KernelLanguageError
from gpu_lessons.kernels.simt import run

# -- shuffles -----------------------------------------------------------------------------------


def test_shfl_down_tree_reduction_of_0_to_31():
    # offsets 16, 8, 4, 2, 1: lane 0 ends with 0 + 1 + ... + 31 = 31 * 32 / 2 = 496.
    def k(t, out):
        v = t.lane + 0
        for offset in (16, 8, 4, 2, 1):
            v = v + t.shfl_down(v, offset)
        out[t.lane] = v

    out = np.zeros(32, np.int64)
    r = run(k, 1, 32, out)
    assert out[0] == 496
    # lane 31 never receives anything but its own value: 31 doubled five times = 31 * 32
    assert out[31] == 31 * 32
    assert r.totals.shuffle_instructions == 5
    assert r.totals.by_kind["shfl"] == 5 and r.totals.shuffle_inactive_reads == 0
    assert r.shuffle_reads == () and r.notes == ()


def test_shuffle_sources_and_edges():
    # down 16: lanes 0-15 get lane + 16, lanes 16-31 (source past 31) keep their own value.
    # up 3: lanes 0-2 keep their own, lane i >= 3 gets i - 3.  xor 5: lane i gets i ^ 5.
    # idx 37: every lane gets lane 37 % 32 = 5; idx 31 - lane: reversed.
    def k(t, out):
        v = t.lane * 10
        out[0, t.lane] = t.shfl_down(v, 16)
        out[1, t.lane] = t.shfl_up(v, 3)
        out[2, t.lane] = t.shfl_xor(v, 5)
        out[3, t.lane] = t.shfl_idx(v, 37)
        out[4, t.lane] = t.shfl_idx(v, 31 - t.lane)
        out[5, t.lane] = t.shfl_down(v, t.lane % 4)      # per-lane delta
        out[6, t.lane] = t.shfl_down(v, 40)              # the low 5 bits: 40 acts as 8

    lane = np.arange(32)
    out = np.zeros((7, 32), np.int64)
    run(k, 1, 32, out)
    assert list(out[0]) == [10 * (i + 16) if i < 16 else 10 * i for i in lane]
    assert list(out[1]) == [10 * i if i < 3 else 10 * (i - 3) for i in lane]
    assert list(out[2]) == [10 * (i ^ 5) for i in lane]
    assert list(out[3]) == [50] * 32
    assert list(out[4]) == [10 * (31 - i) for i in lane]
    assert list(out[5]) == [10 * (i + i % 4) if i + i % 4 < 32 else 10 * i for i in lane]
    # PTX ISA, shfl.sync: the lane offset is b[4:0]; on an H200 shfl_down(v, 33) gave
    # shfl_down(v, 1)'s values
    assert list(out[6]) == [10 * (i + 8) if i + 8 < 32 else 10 * i for i in lane]


def test_shfl_xor_butterfly_gives_every_lane_the_sum():
    def k(t, x, out):
        v = x[t.lane]
        for m in (16, 8, 4, 2, 1):
            v = v + t.shfl_xor(v, m)
        out[t.lane] = v

    x = np.arange(32, dtype=np.float32) * 0.5
    out = np.zeros(32, np.float32)
    run(k, 1, 32, x, out)
    assert np.array_equal(out, np.full(32, 248.0, np.float32))   # 496 / 2


@settings(max_examples=10, deadline=None)
@given(values=st.lists(st.integers(-100, 100), min_size=32, max_size=32))
def test_shfl_up_inclusive_scan_matches_cumsum(values):
    # Hillis-Steele inside a warp: after offsets 1, 2, 4, 8, 16 lane i holds x[0] + ... + x[i].
    def k(t, x, out):
        v = x[t.lane]
        for offset in (1, 2, 4, 8, 16):
            up = t.shfl_up(v, offset)
            v = v + t.where(t.lane >= offset, up, 0)
        out[t.lane] = v

    x = np.array(values, np.int64)
    out = np.zeros(32, np.int64)
    run(k, 1, 32, x, out)
    assert np.array_equal(out, np.cumsum(x))


def test_shuffle_reading_an_inactive_lane_is_recorded():
    # Lanes 0-15 active; shfl_down by 8: lanes 0-7 read lanes 8-15 (active), lanes 8-15 read
    # lanes 16-23, which the branch switched off: 8 reads of inactive lanes.  The value
    # returned is that lane's register (lane * 3), as the simulator documents.
    def k(t, out):
        v = t.lane * 3
        with t.if_(t.lane < 16):
            out[t.lane] = t.shfl_down(v, 8)

    out = np.full(32, -1, np.int64)
    r = run(k, 1, 32, out)
    assert list(out[:16]) == [3 * (i + 8) for i in range(16)]
    assert r.totals.shuffle_inactive_reads == 8
    assert [(s.lane, s.src_lane, s.op) for s in r.shuffle_reads] == \
        [(i, i + 8, "shfl_down") for i in range(8, 16)]
    line = k.__code__.co_firstlineno + 3
    assert r.shuffle_reads[0].line == line
    assert any(f"line {line}: shfl_down read lane 16, which was not active" in n
               for n in r.notes)
    assert "read lane 16" in r.hazards[0]
    ev = [e for e in r.events if e.kind == "shfl"]
    assert len(ev) == 1 and ev[0].inactive_reads == 8 and ev[0].active == 16


def test_returned_lanes_count_as_inactive_for_shuffles():
    # Block of 40 threads: warp 1 has lanes 0-7 only; shfl_down by 8 from lane 0-7 reads
    # lanes 8-15, which do not exist -> 8 inactive reads.  Warp 0 is full: none.
    def k(t, out):
        tid = t.thread_idx.x
        out[tid] = t.shfl_down(tid + 0, 8)

    r = run(k, 1, 40, np.zeros(40, np.int64))
    assert r.totals.shuffle_inactive_reads == 8
    assert {s.warp for s in r.shuffle_reads} == {1}


def test_shuffle_offsets_use_their_low_5_bits_and_must_be_integers():
    # CUDA's delta is an unsigned int: -1 is 0xffffffff, whose low 5 bits are 31
    def neg(t, out):
        out[t.lane] = t.shfl_down(t.lane * 10, -1)

    out = np.zeros(32, np.int64)
    r = run(neg, 1, 32, out)
    assert list(out) == [310] + [10 * i for i in range(1, 32)]
    assert any("delta=-1 is outside 0..31" in n and "low 5 bits, 31" in n for n in r.notes)

    def floaty(t, out):
        out[t.lane] = t.shfl_idx(t.lane + 0, t.lane * 0.5)

    with pytest.raises(TypeError, match="src_lane must be an integer"):
        run(floaty, 1, 32, np.zeros(32, np.int64))


def test_syncwarp_issues_one_instruction():
    def k(t, out):
        out[t.lane] = t.lane
        t.syncwarp()

    r = run(k, 1, 64, np.zeros(64, np.int64))
    assert r.totals.by_kind["bar.warp"] == 2          # one per warp
    assert r.totals.barrier_instructions == 0 and r.barriers == 0


# -- atomics ------------------------------------------------------------------------------------

def test_atomic_add_on_one_counter_returns_lane_order_prefix():
    # 32 lanes add lane + 1 to counter[0], applied in lane order: lane l sees the sum of
    # (j + 1) for j < l = l (l + 1) / 2, and the counter ends at 32 * 33 / 2 = 528.
    def k(t, counter, old):
        o = t.atomic_add(counter, 0, t.lane + 1)
        old[t.lane] = o

    counter = np.zeros(1, np.int32)
    old = np.zeros(32, np.int32)
    r = run(k, 1, 32, counter, old)
    lane = np.arange(32)
    assert np.array_equal(old, lane * (lane + 1) // 2)
    assert counter[0] == 528
    t = r.totals
    # one instruction, 32 lanes on one address: serialisation 32; one 32-byte sector
    assert (t.atomic_instructions, t.atomic_lanes, t.atomic_serialisation) == (1, 32, 32)
    assert t.mean_serialisation == 32
    ev = next(e for e in r.events if e.kind == "atom.global")
    assert (ev.serialisation, ev.sectors, ev.requests, ev.array) == (32, 1, 1, "counter")


def test_atomic_add_distinct_addresses_is_not_serialised():
    def k(t, a):
        t.atomic_add(a, t.lane, 1.5)

    a = np.arange(32, dtype=np.float32)
    r = run(k, 1, 32, a)
    assert np.array_equal(a, np.arange(32, dtype=np.float32) + 1.5)
    assert r.totals.atomic_serialisation == 1
    assert r.stats(kind="atom.global").global_sectors == 4   # 32 consecutive floats


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 700), bins=st.sampled_from([1, 7, 64]), seed=st.integers(0, 10**6))
def test_global_atomic_histogram_equals_bincount(n, bins, seed):
    keys = np.random.default_rng(seed).integers(0, bins, n).astype(np.int32)

    def hist(t, keys, counts, n):
        i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
        with t.if_(i < n):
            t.atomic_add(counts, keys[i], 1)

    counts = np.zeros(bins, np.int32)
    r = run(hist, -(-n // 128), 128, keys, counts, n)
    assert np.array_equal(counts, np.bincount(keys, minlength=bins))
    assert r.totals.atomic_lanes == n
    assert r.races == ()


def test_shared_atomic_histogram_has_no_race_and_matches_bincount():
    # Privatised histogram: every warp adds into the block's shared bins between the same
    # two barriers.  Atomics on one word from different warps are not a race.
    def hist(t, keys, counts, n):
        local = t.shared(16, np.int32, name="local")
        tid = t.thread_idx.x
        with t.if_(tid < 16):
            local[tid] = 0
        t.sync()
        i = t.block_idx.x * t.block_dim.x + tid
        with t.if_(i < n):
            t.atomic_add(local, keys[i], 1)
        t.sync()
        with t.if_(tid < 16):
            t.atomic_add(counts, tid, local[tid])

    keys = np.random.default_rng(3).integers(0, 16, 1000).astype(np.int32)
    counts = np.zeros(16, np.int32)
    r = run(hist, 4, 256, keys, counts, 1000)
    assert np.array_equal(counts, np.bincount(keys, minlength=16))
    assert r.races == () and r.uninitialised_reads == ()
    assert r.stats(kind="atom.shared").atomic_lanes == 1000
    assert r.arrays["local"].atomic_elements == 1000
    assert r.arrays["counts"].atomics == 4   # one warp per block adds the 16 bins


def test_plain_access_mixed_with_another_warps_atomic_is_a_race():
    # Warp 0 atomically bumps s[0] while warp 1 reads it with a plain load, no barrier.
    def k(t, out):
        s = t.shared(1, np.int32, name="s")
        with t.if_(t.thread_idx.x == 0):
            s[0] = 0
        t.sync()
        with t.if_(t.thread_idx.x < 32):
            t.atomic_add(s, 0, 1)
        with t.else_():
            out[t.thread_idx.x] = s[0]

    r = run(k, 1, 64, np.zeros(64, np.int32))
    assert len(r.races) == 1
    race = r.races[0]
    assert (race.array, race.index, race.writer_warp, race.writer_access,
            race.other_warp, race.other_access) == ("s", (0,), 0, "atomic", 1, "read")
    assert "updates (atomically)" in str(race)


def test_atomic_max_and_cas():
    # atomic_max: lanes offer (lane * 7) % 32 to m[0], starting at 10: lane 0 sees 10;
    # the running maximum after lane l is max(10, 7*0 % 32, ..., 7*l % 32).
    # atomic_cas(lock, 0, 0, lane + 1): lane 0 finds 0 and stores 1; every later lane finds 1.
    def k(t, m, lock, old_m, old_cas):
        om = t.atomic_max(m, 0, (t.lane * 7) % 32)
        old_m[t.lane] = om
        oc = t.atomic_cas(lock, 0, 0, t.lane + 1)
        old_cas[t.lane] = oc

    m = np.array([10], np.int32)
    lock = np.zeros(1, np.int32)
    old_m, old_cas = np.zeros(32, np.int32), np.zeros(32, np.int32)
    r = run(k, 1, 32, m, lock, old_m, old_cas)
    offers = (np.arange(32) * 7) % 32
    running = np.maximum.accumulate(np.r_[10, offers])
    assert np.array_equal(old_m, running[:-1]) and m[0] == 31
    assert list(old_cas) == [0] + [1] * 31 and lock[0] == 1
    assert r.totals.atomic_instructions == 2 and r.totals.atomic_serialisation == 64


def test_atomics_respect_the_mask_and_take_2d_indices():
    # Only even lanes add; grid[lane % 4, lane // 16] += 1 for lanes 0, 2, ..., 30.
    def k(t, grid):
        with t.if_(t.lane % 2 == 0):
            t.atomic_add(grid, (t.lane % 4, t.lane // 16), 1)

    grid = np.zeros((4, 2), np.int32)
    r = run(k, 1, 32, grid)
    expected = np.zeros((4, 2), np.int32)
    for lane in range(0, 32, 2):
        expected[lane % 4, lane // 16] += 1
    assert np.array_equal(grid, expected)
    # even lanes hit 4 elements ((0|2) x (0|1)), 4 lanes each
    assert r.totals.atomic_serialisation == 4 and r.totals.atomic_lanes == 16


def test_atomic_types_follow_cuda():
    def k(t, a):
        t.atomic_add(a, 0, 1)

    with pytest.raises(TypeError, match=r"int64.*int32, uint32, uint64, float32, float64"):
        run(k, 1, 32, np.zeros(4, np.int64))

    def kmax(t, a):
        t.atomic_max(a, 0, 1.0)

    with pytest.raises(TypeError, match="float32"):
        run(kmax, 1, 32, np.zeros(4, np.float32))

    def not_array(t, a):
        t.atomic_add(5, 0, 1)

    with pytest.raises(KernelLanguageError, match="first argument is an array"):
        run(not_array, 1, 32, np.zeros(4, np.int32))


def test_out_of_range_atomic_is_a_kernel_error():
    def k(t, a):
        t.atomic_add(a, t.lane + 1, 1)

    with pytest.raises(IndexError, match=r"lane 31 .* updates a\[32\]") as info:
        run(k, 1, 32, np.zeros(32, np.int32))
    assert info.value.lineno == k.__code__.co_firstlineno + 1


# -- what the puzzle checker measures -----------------------------------------------------------

def _matmul_naive(t, a, b, c, n):
    row = t.block_idx.y * t.block_dim.y + t.thread_idx.y
    col = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    acc = 0.0
    for k in range(n):
        acc = acc + a[row * n + k] * b[k * n + col]
    c[row * n + col] = acc


def _matmul_tiled(t, a, b, c, n):
    sa = t.shared((8, 8), np.float32, name="sa")
    sb = t.shared((8, 8), np.float32, name="sb")
    tx, ty = t.thread_idx.x, t.thread_idx.y
    row = t.block_idx.y * 8 + ty
    col = t.block_idx.x * 8 + tx
    acc = 0.0
    for k0 in range(0, n, 8):
        sa[ty, tx] = a[row * n + k0 + tx]
        sb[ty, tx] = b[(k0 + ty) * n + col]
        t.sync()
        for k in range(8):
            acc = acc + sa[ty, k] * sb[k, tx]
        t.sync()
    c[row * n + col] = acc


def test_per_array_loads_per_element_show_reuse():
    # n = 16, blocks of 8 x 8.  Naive: each of the n^2 threads loads n elements of a and n of
    # b -> n^3 element loads per input = n loads per element (16).  Tiled with 8 x 8 tiles:
    # each block loads every element of its 8 rows of a once per tile step... in total each
    # element of a is loaded by the n/8 blocks of its block row -> n / 8 = 2 per element.
    n = 16
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, n * n).astype(np.float32)
    b = rng.integers(0, 5, n * n).astype(np.float32)
    expected = (a.reshape(n, n) @ b.reshape(n, n)).ravel()
    for kernel, per_element in ((_matmul_naive, 16), (_matmul_tiled, 2)):
        c = np.zeros(n * n, np.float32)
        r = run(kernel, (2, 2), (8, 8), a, b, c, n)
        assert np.array_equal(c, expected)
        for name in ("a", "b"):
            s = r.arrays[name]
            assert s.space == "global" and s.shape == (n * n,)
            assert s.load_elements == per_element * n * n
            assert s.loads_per_element == per_element
        assert r.arrays["c"].store_elements == n * n and r.arrays["c"].loads == 0
    # tiled: sa is read 8 times per tile step by each of the 2 warps of a block:
    # 4 blocks x 2 warps x 2 steps x 8 = 128 loads (a warp's 4 rows ty read 4 words in
    # banks k, 8 + k, 16 + k, 24 + k: one wavefront), plus 16 stores of one wavefront each
    sa = r.arrays["sa"]
    assert (sa.space, sa.shape, sa.loads, sa.stores, sa.bank_conflicts) == \
        ("shared", (8, 8), 128, 16, 0)
    assert sa.ideal_wavefronts == sa.wavefronts == 128 + 16
    assert r.totals.shared_ideal_wavefronts == r.totals.shared_wavefronts


def test_array_stats_sectors_per_request():
    # transpose-style store: lane l writes out[l, 0] of a 32 x 32 float matrix -> lanes
    # 128 B apart, one sector each: 32 sectors for one request.  The load a[l] is 4 sectors.
    def k(t, a, out):
        out[t.lane, 0] = a[t.lane]

    r = run(k, 1, 32, np.ones(32, np.float32), np.zeros((32, 32), np.float32))
    assert r.arrays["a"].sectors_per_request == 4
    assert r.arrays["out"].sectors_per_request == 32
    assert r.stats(array="out").global_sectors == 32


def test_record_indices_gives_each_lanes_flat_element():
    def k(t, a, out):
        with t.if_(t.lane < 20):
            out[t.lane, 3] = a[31 - t.lane]

    a = np.arange(32, dtype=np.float32)
    out = np.zeros((32, 4), np.float32)
    plain = run(k, 1, 32, a, out)
    assert all(e.indices is None for e in plain.events)
    r = run(k, 1, 32, a, out, record_indices=True)
    ld = next(e for e in r.events if e.kind == "ld.global")
    st_ = next(e for e in r.events if e.kind == "st.global")
    assert ld.indices == tuple([31 - i for i in range(20)] + [None] * 12)
    assert st_.indices == tuple([4 * i + 3 for i in range(20)] + [None] * 12)
    with pytest.raises(TypeError, match="record_indices"):
        run(k, 1, 32, a, out, record_indices="yes")


def test_uninitialised_reads_are_data():
    def k(t, out):
        s = t.shared(64, np.float32, name="s")
        with t.if_(t.lane < 16):
            s[t.lane] = 1.0
        out[t.lane] = s[t.lane]          # lanes 16-31 read words nobody wrote

    r = run(k, 1, 32, np.zeros(32, np.float32))
    (u,) = r.uninitialised_reads
    assert (u.block, u.warp, u.array, u.index, u.elements) == (0, 0, "s", (16,), 16)
    assert u.line == k.__code__.co_firstlineno + 4
    assert "nothing was written" in str(u)


def test_simt_efficiency_per_region_and_barriers_for_the_checker():
    def k(t, out):
        with t.if_(t.lane < 8, "head"):
            out[t.lane] = 1
        t.sync()

    r = run(k, 1, 64, np.zeros(64, np.int32))
    # warp 0: 8 lanes store; warp 1 skips the body (nothing issued)
    assert r.stats(region="head").simt_efficiency == 8 / 32
    assert r.barriers == 1 and r.totals.barrier_instructions == 2
    assert isinstance(r.stats(), simt.Stats)
