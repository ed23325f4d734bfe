"""Tests for gpu_lessons.cache.

References, none of them this module's own output:
* pycachesim 0.3.1 (RRZE-HPC, a C implementation): hits, misses, write-backs and write
  traffic for LRU and FIFO over many geometries and traces;
* Nsight Compute on an H200 (tests/data/h200_ncu_memory.json): sectors per one-warp load;
* hand derivations, written out next to each case;
* Mattson's stack-distance result for fully associative LRU (an independent algorithm).
"""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_lessons import traces
from gpu_lessons.cache import Cache, CacheStats, Hierarchy, reuse_distances

cachesim = pytest.importorskip("cachesim")

DATA = Path(__file__).parents[1] / "data"


# -- pycachesim as the reference ---------------------------------------------------------------
def pcs_single(sets, ways, line, policy="LRU", write_back=True, write_allocate=True,
               sink=False):
    """A one-level pycachesim; with ``sink`` a second cache counts what L1 stores onward."""
    mem = cachesim.MainMemory()
    nxt = None
    if sink:
        nxt = cachesim.Cache("SINK", 1, 1, line, "LRU", write_back=True, write_allocate=False)
    l1 = cachesim.Cache("L1", sets, ways, line, policy, write_back=write_back,
                        write_allocate=write_allocate, store_to=nxt)
    last = nxt if sink else l1
    mem.load_to(l1)
    mem.store_from(last)
    return cachesim.CacheSimulator(l1, mem), l1, nxt


def pcs_feed(sim, addresses, is_write=None):
    if is_write is None:
        sim.load([int(a) for a in addresses])
    else:
        sim.loadstore([(None, [int(a)]) if w else ([int(a)], None)
                       for a, w in zip(addresses, is_write, strict=True)])


def ours(sets, ways, line, policy="lru", **kw):
    return Cache(sets * ways * line, line, ways, policy, **kw)


GEOMETRIES = [  # (sets, ways, line bytes)
    (64, 4, 128),    # the contract's 32 KiB example
    (1, 1, 64),      # one line
    (128, 1, 32),    # direct-mapped
    (1, 64, 64),     # fully associative
    (1, 256, 128),   # fully associative 32 KiB
    (3, 2, 16),      # set count that is not a power of two
    (5, 8, 32),
    (16, 16, 256),
    (256, 2, 8),
]


def lesson_traces():
    return [
        traces.random_access(20_000, 64 * 1024, seed=1),
        traces.strided(5_000, 512),
        traces.matrix_traversal(64, 64, order="column"),
        traces.transpose(64),
        traces.transpose(64, tile=8),
        traces.gemm(16, tile=4),
        traces.stencil_2d(32, 32),
        traces.field_access(2_000, 4, (0, 3)),
    ]


@pytest.mark.parametrize("policy", ["lru", "fifo"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "x".join(map(str, g)))
def test_loads_agree_with_pycachesim(geometry, policy):
    sets, ways, line = geometry
    for tr in lesson_traces():
        sim, l1, _ = pcs_single(sets, ways, line, policy.upper())
        pcs_feed(sim, tr.addresses)
        got = ours(sets, ways, line, policy).run(tr.addresses)
        ref = l1.stats()
        assert (got.hits, got.misses) == (ref["HIT_count"], ref["MISS_count"]), tr.name
        assert got.bytes_from_next == ref["MISS_count"] * line


@given(line_log=st.integers(2, 8), ways_log=st.integers(0, 5), sets=st.integers(1, 40),
       policy=st.sampled_from(["lru", "fifo"]), data=st.data())
def test_random_traces_agree_with_pycachesim(line_log, ways_log, sets, policy, data):
    line, ways = 1 << line_log, 1 << ways_log
    span = 3 * sets * ways * line
    addrs = data.draw(st.lists(st.integers(0, span), max_size=300))
    sim, l1, _ = pcs_single(sets, ways, line, policy.upper())
    pcs_feed(sim, addrs)
    c = ours(sets, ways, line, policy)
    got = c.run(np.array(addrs, dtype=np.int64))
    ref = l1.stats()
    assert (got.hits, got.misses) == (ref["HIT_count"], ref["MISS_count"])


def _mixed(n, span, seed, rmw):
    """Random loads and stores; with ``rmw`` every store follows a load of the same address.

    pycachesim does not refresh LRU order on a store hit; after a load of the same address
    the line is already most recent, so LRU agrees on such traces.  FIFO never reorders on
    a hit, so it agrees on any trace.
    """
    rng = np.random.default_rng(seed)
    a = rng.integers(0, span, n)
    if rmw:
        w = rng.random(n) < 0.4
        addr = np.repeat(a, np.where(w, 2, 1))
        is_w = np.zeros(addr.size, bool)
        is_w[np.cumsum(np.where(w, 2, 1))[w] - 1] = True
        return addr, is_w
    return a, rng.random(n) < 0.4


@pytest.mark.parametrize("policy,rmw", [("fifo", False), ("lru", True), ("fifo", True)])
@pytest.mark.parametrize("geometry", [(64, 4, 128), (128, 1, 32), (1, 64, 64), (5, 8, 32)],
                         ids=lambda g: "x".join(map(str, g)))
def test_write_back_traffic_agrees_with_pycachesim(geometry, policy, rmw):
    sets, ways, line = geometry
    addr, is_w = _mixed(6_000, 4 * sets * ways * line, seed=sets + ways, rmw=rmw)
    sim, l1, _ = pcs_single(sets, ways, line, policy.upper())
    pcs_feed(sim, addr, is_w)
    got = ours(sets, ways, line, policy).run(addr, is_w)
    ref = l1.stats()
    # pycachesim counts a write-allocate store miss as a load miss and a store hit as nothing.
    assert got.misses == ref["MISS_count"]
    assert got.hits - (got.stores - got.store_misses) == ref["HIT_count"]
    assert got.writebacks == ref["EVICT_count"] > 0
    assert got.bytes_to_next == ref["EVICT_byte"]
    assert got.bytes_from_next == ref["MISS_count"] * line


@pytest.mark.parametrize("policy,rmw", [("fifo", False), ("lru", True)])
@pytest.mark.parametrize("geometry", [(64, 4, 128), (128, 1, 32), (1, 64, 64)],
                         ids=lambda g: "x".join(map(str, g)))
def test_write_through_traffic_agrees_with_pycachesim(geometry, policy, rmw):
    sets, ways, line = geometry
    addr, is_w = _mixed(6_000, 4 * sets * ways * line, seed=ways, rmw=rmw)
    sim, l1, sink = pcs_single(sets, ways, line, policy.upper(), write_back=False,
                               write_allocate=False, sink=True)
    pcs_feed(sim, addr, is_w)
    got = ours(sets, ways, line, policy, write_policy="write-through",
               write_allocate=False).run(addr, is_w)
    ref = l1.stats()
    assert got.bytes_to_next == sink.stats()["STORE_byte"] == int(is_w.sum())
    assert got.misses - got.store_misses == ref["MISS_count"]
    assert got.hits - (got.stores - got.store_misses) == ref["HIT_count"]
    assert got.writebacks == 0


def _pcs_two_levels(l1_geom, l2_geom, policy1, policy2):
    mem = cachesim.MainMemory()
    l2 = cachesim.Cache("L2", *l2_geom, policy2)
    l1 = cachesim.Cache("L1", *l1_geom, policy1, load_from=l2, store_to=l2)
    mem.load_to(l2)
    mem.store_from(l2)
    return cachesim.CacheSimulator(l1, mem), l1, l2


@pytest.mark.parametrize("mixed", [False, True])
def test_hierarchy_agrees_with_pycachesim(mixed):
    l1g, l2g = (16, 2, 64), (32, 4, 128)
    # L2 sees L1's write-backs as stores, which pycachesim does not count in LRU order; FIFO
    # keeps the comparison exact.
    p1, p2 = ("LRU", "FIFO") if mixed else ("LRU", "LRU")
    if mixed:
        addr, is_w = _mixed(20_000, 64 * 1024, seed=3, rmw=True)
    else:
        addr, is_w = traces.random_access(20_000, 64 * 1024, seed=3).addresses, None
    sim, r1, r2 = _pcs_two_levels(l1g, l2g, p1, p2)
    pcs_feed(sim, addr, is_w)
    h = Hierarchy([ours(*l1g, p1.lower(), name="L1"), ours(*l2g, p2.lower(), name="L2")])
    got = h.run(addr, is_w)
    for mine, ref in zip(got.levels, (r1.stats(), r2.stats()), strict=True):
        assert mine.misses == ref["MISS_count"]
        assert mine.hits - (mine.stores - mine.store_misses) == ref["HIT_count"]
        assert mine.writebacks == ref["EVICT_count"]
    assert got.dram_bytes_read == r2.stats()["MISS_count"] * 128
    assert got.dram_bytes_written == r2.stats()["EVICT_byte"]
    assert (got.dram_bytes_written > 0) == mixed


# -- hardware: sectors per warp-wide load, measured with Nsight Compute on an H200 ------------
def test_sectored_misses_match_h200_sectors_per_request():
    # A cold cache with 32-byte sectors misses once per distinct sector a request touches,
    # which is what l1tex__t_sectors_pipe_lsu_mem_global_op_ld counts per request.
    patterns = json.loads((DATA / "h200_ncu_memory.json").read_text())["global"]
    assert len(patterns) > 50
    for p in patterns:
        lanes = [a for a in p["addresses"] if a is not None]
        c = Cache(64 * 1024, 128, 4, sector_bytes=32)
        got = c.run(np.array(lanes), access_bytes=p["bytes_per_thread"])
        assert got.misses == p["sectors"] * p["requests"], p["name"]
        assert got.bytes_from_next == 32 * p["sectors"]


# -- hand-derived cases -----------------------------------------------------------------------
def test_row_major_float_scan_misses_once_per_line():
    # 1024 floats = 4096 B = 32 lines of 128 B; each line: 1 miss, then 31 hits.
    st_ = Cache(size_bytes=32768, line_bytes=128, ways=4, policy="lru").run(
        np.arange(0, 4096, 4))
    assert (st_.accesses, st_.hits, st_.misses) == (1024, 992, 32)
    assert st_.hit_rate == pytest.approx(31 / 32)
    assert st_.bytes_from_next == 4096
    # With 32-byte sectors the same scan misses once per sector: 4096 / 32 = 128.
    st_ = Cache(32768, 128, 4, sector_bytes=32).run(np.arange(0, 4096, 4))
    assert (st_.misses, st_.bytes_from_next, st_.evictions) == (128, 4096, 0)


def test_direct_mapped_ping_pong_and_two_ways():
    # Addresses 0 and 32768 share set 0 of a 32 KiB cache with 128-byte lines.  Direct-mapped:
    # each access evicts the other line, so all 10 miss; 2-way: 2 cold misses, 8 hits.
    trace = np.array([0, 32768] * 5)
    dm = Cache(32768, 128, 1).run(trace)
    assert (dm.misses, dm.evictions) == (10, 9)
    two = Cache(32768, 128, 2).run(trace)
    assert (two.misses, two.hits, two.evictions) == (2, 8, 0)


def test_fifo_and_lru_differ_on_a_hand_trace():
    # One set of two 64-byte ways; lines A, B, C at 0, 64, 128.  Trace A B A C A.
    # LRU:  A miss, B miss, A hit, C miss evicts B (least recent), A hit  -> 2 hits, 3 misses.
    # FIFO: A miss, B miss, A hit, C miss evicts A (first in),     A miss -> 1 hit, 4 misses.
    trace = np.array([0, 64, 0, 128, 0])
    lru = Cache(128, 64, 2, "lru").run(trace)
    fifo = Cache(128, 64, 2, "fifo").run(trace)
    assert (lru.hits, lru.misses) == (2, 3)
    assert (fifo.hits, fifo.misses) == (1, 4)


def test_random_policy_is_reproducible_and_fills_empty_ways_first():
    rng = np.random.default_rng(0)
    trace = rng.integers(0, 1 << 16, 5_000)
    a = Cache(4096, 64, 8, "random", seed=7)
    b = Cache(4096, 64, 8, "random", seed=7)
    assert a.run(trace) == b.run(trace)
    assert np.array_equal(a.contents(), b.contents())
    # Reset restarts the generator: the same run again gives the same result.
    first = a.stats
    a.reset()
    assert a.run(trace) == first
    # Some other seed evicts differently.
    others = [Cache(4096, 64, 8, "random", seed=s).run(trace).misses for s in range(1, 6)]
    assert any(m != first.misses for m in others)
    # 8 distinct lines in an 8-way set: 8 cold misses and no evictions, then all hits.
    lines = np.arange(8) * 512  # 4096 / (64 x 8) = 8 sets; stride 512 B = same set
    st_ = Cache(4096, 64, 8, "random").run(np.tile(lines, 10))
    assert (st_.misses, st_.evictions) == (8, 0)


WRITE_CASES = [
    # One set, two 64-byte ways.  Ten 4-byte stores into line A (address 0..36), then loads
    # of B (64) and C (128) evict A, the least recently used line.
    # policy, allocate: misses, from_next, to_next, writebacks
    # write-back + allocate: A filled once (64), 9 store hits, B and C filled (128);
    #   C evicts dirty A -> one 64-byte write-back.
    ("write-back", True, 3, 192, 64, 1),
    # write-through + allocate: same fills; every store's 4 bytes go on: 10 x 4 = 40.
    ("write-through", True, 3, 192, 40, 0),
    # write-through, no allocate: the 10 stores miss and go on (40 B); only B, C filled.
    ("write-through", False, 12, 128, 40, 0),
    # write-back, no allocate: the same 10 store misses forwarded; nothing dirty.
    ("write-back", False, 12, 128, 40, 0),
]


@pytest.mark.parametrize("policy,allocate,misses,from_next,to_next,wbs", WRITE_CASES)
def test_write_policies_on_a_hand_trace(policy, allocate, misses, from_next, to_next, wbs):
    addr = np.array([4 * k for k in range(10)] + [64, 128])
    is_w = np.array([True] * 10 + [False, False])
    c = Cache(128, 64, 2, write_policy=policy, write_allocate=allocate)
    st_ = c.run(addr, is_w, access_bytes=4)
    assert (st_.misses, st_.bytes_from_next, st_.bytes_to_next, st_.writebacks) == (
        misses, from_next, to_next, wbs)
    assert st_.stores == 10


def test_sectored_write_back_moves_only_dirty_sectors():
    # One 4-byte store into a 128-byte line, then a flush: a sectored cache writes back one
    # 32-byte sector, an unsectored one the whole line.
    for sector, expect in ((32, 32), (None, 128)):
        c = Cache(1024, 128, 2, sector_bytes=sector)
        c.run([200], [True], access_bytes=4)
        fl = c.flush()
        assert (fl.writebacks, fl.bytes_to_next) == (1, expect)
        assert c.flush().bytes_to_next == 0  # clean now


def test_sector_miss_on_a_resident_line_does_not_evict():
    # One 128-byte way with 32-byte sectors: 0 then 64 are two sector misses of one line.
    c = Cache(128, 128, 1, sector_bytes=32)
    st_ = c.run([0, 64, 0, 64, 127])
    assert (st_.misses, st_.hits, st_.evictions, st_.bytes_from_next) == (3, 2, 0, 96)


def test_sector_miss_on_a_resident_line_refreshes_lru():
    # One set of two 128-byte ways, 32-byte sectors; lines A (0), B (128), C (256).
    # 0: A miss; 128: B miss; 64: sector miss in A, A becomes most recent; 256: C evicts B;
    # 0: hit (A's first sector is still there) -> 1 hit, 4 misses, 1 eviction.
    st_ = Cache(256, 128, 2, "lru", sector_bytes=32).run([0, 128, 64, 256, 0])
    assert (st_.hits, st_.misses, st_.evictions) == (1, 4, 1)


def test_access_spanning_lines_counts_each_line():
    # An 8-byte access at 124 touches lines 0 and 1 (bytes 124..131): 2 lookups, 2 misses.
    c = Cache(4096, 128, 4)
    st_ = c.run([124], access_bytes=8)
    assert (st_.requests, st_.accesses, st_.misses, st_.bytes_requested) == (1, 2, 2, 8)
    assert c.run([0, 128]).hits == 2


def test_state_persists_between_runs_and_reset_empties():
    c = Cache(4096, 128, 4)
    assert c.run(np.arange(0, 1024, 4)).misses == 8
    assert c.run(np.arange(0, 1024, 4)).misses == 0  # still cached
    assert c.stats.accesses == 512 and c.stats.misses == 8
    c.reset()
    assert c.stats.accesses == 0
    assert c.run(np.arange(0, 1024, 4)).misses == 8


def test_hierarchy_streams_and_writes_reach_dram():
    # 1 MiB of floats streamed through a 32 KiB L1 and a 1 MiB L2, both with 32-byte
    # sectors: L1 misses once per sector (2^20 / 32 = 32768), L2 sees exactly those
    # requests and misses on all of them; DRAM moves the 1 MiB once.
    l1 = Cache(32 * 1024, 128, 4, sector_bytes=32, name="L1")
    l2 = Cache(1 << 20, 128, 16, sector_bytes=32, name="L2")
    h = Hierarchy([l1, l2])
    got = h.run(np.arange(0, 1 << 20, 4))
    assert got[0].misses == got[1].accesses == got[1].misses == 32768
    assert got.dram_bytes_read == 1 << 20 and got.dram_bytes_written == 0
    # Writing 64 KiB with write-back caches sends nothing to DRAM until lines are evicted or
    # flushed; after the flush DRAM has received every written byte exactly once.
    h.reset()
    w = np.arange(0, 64 * 1024, 4)
    run = h.run(w, np.ones(w.size, bool))
    fl = h.flush()
    assert run.dram_bytes_written + fl.dram_bytes_written == 64 * 1024
    assert run.dram_bytes_read == 64 * 1024  # write-allocate fetches each sector once


# -- invariants -----------------------------------------------------------------------------------
geometry = st.tuples(st.integers(2, 7), st.integers(0, 4), st.integers(1, 8))  # log2 line, ...


def _trace(data, span, writes=False):
    addrs = np.array(data.draw(st.lists(st.integers(0, span), max_size=200)), dtype=np.int64)
    is_w = (np.array(data.draw(st.lists(st.booleans(), min_size=addrs.size,
                                        max_size=addrs.size)), dtype=bool)
            if writes else None)
    return addrs, is_w


@given(g=geometry, policy=st.sampled_from(["lru", "fifo", "random"]),
       wp=st.sampled_from(["write-back", "write-through"]), alloc=st.booleans(),
       sector=st.sampled_from([None, 4]), nbytes=st.sampled_from([1, 4, 8]), data=st.data())
def test_counting_invariants(g, policy, wp, alloc, sector, nbytes, data):
    line_log, ways_log, sets = g
    line, ways = 1 << line_log, 1 << ways_log
    addrs, is_w = _trace(data, 3 * sets * ways * line, writes=True)
    c = Cache(sets * ways * line, line, ways, policy, sector_bytes=sector, write_policy=wp,
              write_allocate=alloc)
    s = c.run(addrs, is_w, access_bytes=nbytes)
    assert s.hits + s.misses == s.accesses >= s.requests == addrs.size
    assert s.store_misses <= min(s.misses, s.stores)
    assert s.writebacks <= s.evictions <= s.misses
    assert s.bytes_requested == nbytes * addrs.size
    if wp == "write-through":
        # Every stored byte goes to the next level once, and nothing is ever dirty.
        assert s.bytes_to_next == nbytes * int(is_w.sum())
        assert s.writebacks == 0 and c.flush().bytes_to_next == 0


@given(line_log=st.integers(2, 7), lines=st.integers(1, 40), extra=st.integers(1, 40),
       data=st.data())
def test_lru_inclusion_property_and_stack_distances(line_log, lines, extra, data):
    # Mattson et al. (1970): a fully associative LRU cache of C lines holds a subset of what
    # one of C + k lines holds, so it never misses less; and it misses exactly on accesses
    # whose stack distance is -1 or >= C.
    line = 1 << line_log
    addrs, _ = _trace(data, 4 * (lines + extra) * line)
    small = Cache(lines * line, line, None).run(addrs)
    big = Cache((lines + extra) * line, line, None).run(addrs)
    assert big.misses <= small.misses
    d = reuse_distances(addrs, line)
    assert small.misses == int(np.sum((d < 0) | (d >= lines)))
    assert big.misses == int(np.sum((d < 0) | (d >= lines + extra)))


def test_reuse_distances_hand_case():
    # Lines A B C A B B: A, B, C first uses -> -1; A again after B, C -> 2; B after C, A -> 2;
    # B right after B -> 0.
    d = reuse_distances(np.array([0, 64, 128, 0, 64, 64]), 64)
    assert d.tolist() == [-1, -1, -1, 2, 2, 0]


@given(g=geometry, policy=st.sampled_from(["lru", "fifo", "random"]), data=st.data())
def test_split_runs_equal_one_run(g, policy, data):
    line_log, ways_log, sets = g
    line, ways = 1 << line_log, 1 << ways_log
    addrs, is_w = _trace(data, 3 * sets * ways * line, writes=True)
    cut = data.draw(st.integers(0, addrs.size))
    whole = Cache(sets * ways * line, line, ways, policy, seed=3)
    parts = Cache(sets * ways * line, line, ways, policy, seed=3)
    one = whole.run(addrs, is_w)
    two = parts.run(addrs[:cut], is_w[:cut]) + parts.run(addrs[cut:], is_w[cut:])
    assert one == two == parts.stats
    assert np.array_equal(whole.contents(), parts.contents())


@given(g=geometry, policy=st.sampled_from(["lru", "fifo", "random"]),
       sector_log=st.integers(0, 2), data=st.data())
def test_sectors_change_traffic_not_tag_behaviour(g, policy, sector_log, data):
    # A sectored cache allocates and evicts lines exactly when the unsectored one does (a
    # sector miss on a resident line refreshes LRU just as a hit would); it only fetches less.
    line_log, ways_log, sets = g
    line, ways = 1 << line_log, 1 << ways_log
    sector = max(line >> sector_log, 1)
    addrs, _ = _trace(data, 3 * sets * ways * line)
    plain = Cache(sets * ways * line, line, ways, policy, seed=1)
    sect = Cache(sets * ways * line, line, ways, policy, seed=1, sector_bytes=sector)
    a, b = plain.run(addrs), sect.run(addrs)
    assert np.array_equal(plain.contents(), sect.contents())
    assert a.evictions == b.evictions
    assert b.misses >= a.misses and b.bytes_from_next <= a.bytes_from_next


# -- results read well ---------------------------------------------------------------------------
def test_reprs_carry_units():
    c = Cache(32768, 128, 4, name="L1")
    s = c.run(np.arange(0, 8192, 4))
    assert s.hit_rate == pytest.approx(31 / 32)
    assert "32 KiB" in repr(c) and "4-way" in repr(c) and "64 sets" in repr(c)
    assert "fully associative" in repr(Cache(4096, 128, None))
    assert "direct-mapped" in repr(Cache(4096, 128, 1))
    h = Hierarchy([c, Cache(1 << 20, 128, 8, name="L2")])
    assert "DRAM" in repr(h.run([0])) and "DRAM" in h.run([0])._repr_html_()
    empty = Cache(4096, 128, 4).run(np.zeros(0, np.int64))
    assert empty.accesses == 0 and np.isnan(empty.hit_rate)
    assert dict((r.label, r.text) for r in empty.readout_rows())["hit rate"] == "n/a"
    assert isinstance(s + s, CacheStats)


def test_contents_shows_resident_lines():
    c = Cache(1024, 128, 2)  # 4 sets x 2 ways
    c.run([0, 128 * 4, 128])  # lines 0 and 4 -> set 0; line 1 -> set 1
    got = c.contents()
    assert got.shape == (4, 2)
    assert sorted(got[0].tolist()) == [0, 4] and 1 in got[1].tolist()
    assert not got.flags.writeable


# -- bad input --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(size_bytes=0, line_bytes=128, ways=4), ValueError, ["size_bytes", "0"]),
    (dict(size_bytes=4096.5, line_bytes=128, ways=4), TypeError, ["size_bytes", "4096.5"]),
    (dict(size_bytes=4096, line_bytes=96, ways=4), ValueError, ["line_bytes", "96", "power"]),
    (dict(size_bytes=4096, line_bytes=8192, ways=1), ValueError, ["line_bytes", "8192"]),
    (dict(size_bytes=4096, line_bytes=128, ways=0), ValueError, ["ways", "0"]),
    (dict(size_bytes=4096, line_bytes=128, ways=64), ValueError, ["ways", "64", "32"]),
    (dict(size_bytes=4096, line_bytes=128, ways=3), ValueError, ["size_bytes", "3", "384"]),
    (dict(size_bytes=4096, line_bytes=128, ways=4, policy="plru"), ValueError,
     ["policy", "plru", "lru"]),
    (dict(size_bytes=4096, line_bytes=128, ways=4, sector_bytes=256), ValueError,
     ["sector_bytes", "256"]),
    (dict(size_bytes=4096, line_bytes=128, ways=4, sector_bytes=24), ValueError,
     ["sector_bytes", "24"]),
    (dict(size_bytes=4096, line_bytes=128, ways=4, write_policy="write-around"), ValueError,
     ["write_policy", "write-around"]),
    (dict(size_bytes=4096, line_bytes=128, ways=4, write_allocate="yes"), TypeError,
     ["write_allocate", "yes"]),
    (dict(size_bytes=4096, line_bytes=128, ways=4, seed=-1), ValueError, ["seed", "-1"]),
])
def test_bad_geometry_is_refused_clearly(kwargs, exc, words):
    with pytest.raises(exc) as err:
        Cache(**kwargs)
    for w in words:
        assert w in str(err.value)


@pytest.mark.parametrize("args,kwargs,exc,words", [
    (([-4],), {}, ValueError, ["addresses", "-4"]),
    (([2**62],), {}, ValueError, ["addresses"]),
    ((np.array([0.5, 1.0]),), {}, TypeError, ["addresses", "float64"]),
    ((["a"],), {}, TypeError, ["addresses"]),
    ((np.zeros((2, 2), np.int64),), {}, ValueError, ["addresses", "(2, 2)"]),
    (([0, 4],), dict(is_write=[True]), ValueError, ["is_write", "2"]),
    (([0, 4],), dict(is_write=[2, 0]), TypeError, ["is_write"]),
    (([0, 4],), dict(access_bytes=0), ValueError, ["access_bytes", "0"]),
    (([0, 4],), dict(access_bytes=[4]), ValueError, ["access_bytes", "1"]),
    (([0, 4],), dict(access_bytes=[4, 0]), ValueError, ["access_bytes", "0"]),
])
def test_bad_run_input_is_refused_clearly(args, kwargs, exc, words):
    with pytest.raises(exc) as err:
        Cache(4096, 128, 4).run(*args, **kwargs)
    for w in words:
        assert w in str(err.value)


def test_bad_hierarchy_is_refused_clearly():
    c = Cache(4096, 128, 4)
    with pytest.raises(ValueError, match="at least one"):
        Hierarchy([])
    with pytest.raises(ValueError, match="twice"):
        Hierarchy([c, c])
    with pytest.raises(TypeError, match=r"levels\[1\]"):
        Hierarchy([c, "L2"])
    with pytest.raises(ValueError, match="power of two"):
        reuse_distances([0], 100)


def test_integer_like_inputs_are_accepted():
    c = Cache(4096, 128, 4)
    assert c.run([0, 4, 8], is_write=[0, 1, 0]).stores == 1
    assert c.run(np.array([0], np.uint32)).hits == 1
    assert c.run(np.zeros(0)).accesses == 0  # an empty float array is just "no accesses"


