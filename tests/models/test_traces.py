"""Tests for gpu_lessons.traces.

The expected addresses and miss counts are derived by hand in the comments (loop nests written
out; misses counted from line sizes, set mapping and LRU); agreement of the simulator itself
with pycachesim on these traces is in tests/models/test_cache.py.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_lessons import traces as T
from gpu_lessons.cache import Cache


# -- addresses, written out by hand ----------------------------------------------------------------
def test_matrix_traversal_orders():
    row = T.matrix_traversal(2, 3, element_bytes=4, base=100)
    assert row.addresses.tolist() == [100, 104, 108, 112, 116, 120]
    # Column by column over the same row-major storage: (0,0) (1,0) (0,1) (1,1) (0,2) (1,2).
    col = T.matrix_traversal(2, 3, element_bytes=4, order="column", base=100)
    assert col.addresses.tolist() == [100, 112, 104, 116, 108, 120]
    assert not col.is_write.any() and col.access_bytes == 4


def test_transpose_addresses():
    # A is 2x3 at 0, B (3x2) at the next 4 KiB boundary: 4096.  Loop i, j: load A[i,j] at
    # 4*(3i+j), store B[j,i] at 4096 + 4*(2j+i).
    t = T.transpose(2, 3)
    assert t.addresses.tolist() == [0, 4096, 4, 4104, 8, 4112, 12, 4100, 16, 4108, 20, 4116]
    assert t.is_write.tolist() == [False, True] * 6
    # 5x3 in 2x2 tiles, A's element indices: tile (0,0): 0 1 3 4; (0,1): 2 5; (1,0): 6 7 9 10;
    # (1,1): 8 11; (2,0): 12 13; (2,1): 14.
    tiled = T.transpose(5, 3, tile=2)
    assert (tiled.addresses[::2] // 4).tolist() == [0, 1, 3, 4, 2, 5, 6, 7, 9, 10, 8, 11,
                                                     12, 13, 14]
    # Every pair is still (A[i,j], B[j,i]); a tile as big as the matrix is the naive loop.
    i, j = np.divmod(tiled.addresses[::2] // 4, 3)
    assert np.array_equal(tiled.addresses[1::2], 4096 + 4 * (j * 5 + i))
    assert np.array_equal(T.transpose(5, 3, tile=5).addresses, T.transpose(5, 3).addresses)


def test_field_access_layouts():
    # 3 records of 4 float fields, reading fields 0 and 2.
    # AoS: record i field f at 4*(4i+f): 0 8 | 16 24 | 32 40.  SoA: at 4*(3f+i): 0 24 | 4 28 | 8 32.
    assert T.field_access(3, 4, (0, 2)).addresses.tolist() == [0, 8, 16, 24, 32, 40]
    assert T.field_access(3, 4, (0, 2), "soa").addresses.tolist() == [0, 24, 4, 28, 8, 32]


def test_stencil_addresses():
    # n=5, r=1: i = 1..3 reads in[i-1..i+1], stores out[i]; out starts at 4096.
    s = T.stencil_1d(5)
    assert s.addresses.tolist() == [0, 4, 8, 4100, 4, 8, 12, 4104, 8, 12, 16, 4108]
    assert s.is_write.tolist() == [False, False, False, True] * 3
    # 3x3 grid: the one interior point (1,1) reads elements 1, 3, 4, 5, 7 and stores out[4].
    s2 = T.stencil_2d(3, 3)
    assert s2.addresses.tolist() == [4, 12, 16, 20, 28, 4096 + 16]
    assert len(T.stencil_2d(10, 12, radius=2)) == (10 - 4) * (12 - 4) * (4 * 2 + 2)


def test_gemm_addresses_and_counts():
    # n=2: A at 0, B at 4096, C at 8192.  For (i, j): A[i,0] B[0,j] A[i,1] B[1,j], store C[i,j].
    g = T.gemm(2)
    assert g.addresses.tolist() == [0, 4096, 4, 4104, 8192, 0, 4100, 4, 4108, 8196,
                                    8, 4096, 12, 4104, 8200, 8, 4100, 12, 4108, 8204]
    assert g.is_write.tolist() == [False] * 4 + [True] + [False] * 4 + [True] + \
        [False] * 4 + [True] + [False] * 4 + [True]
    # n=6 in 4-tiles (2 k-blocks): 2·6³ = 432 loads of A and B, one C store per (i, j) and
    # k-block = 72, one C reload per (i, j) for the second k-block = 36 -> 540.
    tiled = T.gemm(6, tile=4)
    assert len(tiled) == 540 and tiled.stores == 72
    naive = T.gemm(6)
    assert len(naive) == 2 * 6**3 + 6**2
    # The same products are formed: A and B loads are the same multiset in both orders.
    def a_and_b(t):
        return np.sort(t.addresses[(~t.is_write) & (t.addresses < 8192)])

    assert np.array_equal(a_and_b(tiled), a_and_b(naive))
    assert np.array_equal(T.gemm(6, tile=6).addresses, naive.addresses)


def test_strided_and_random():
    assert T.strided(4, 3, element_bytes=8).addresses.tolist() == [0, 24, 48, 72]
    r = T.random_access(1000, 4096, element_bytes=4, seed=5)
    assert r.addresses.min() >= 0 and r.addresses.max() <= 4092
    assert (r.addresses % 4 == 0).all()
    assert np.array_equal(r.addresses, T.random_access(1000, 4096, seed=5).addresses)


# -- what the cache makes of them, derived by hand ---------------------------------------------------
def test_row_vs_column_major_hit_rates():
    # 256x256 floats (1 KiB rows), 32 KiB 4-way cache with 128-B lines (64 sets).
    # Row order: one miss per line, 65536 * 4 / 128 = 2048.
    # Column order: rows are 1024 B = 8 lines apart, so a column's 256 lines fall into sets
    # 0, 8, ..., 56: 8 sets x 4 ways = 32 lines for 256 -> every access misses.
    c = Cache(32768, 128, 4)
    assert c.run(T.matrix_traversal(256, 256)).misses == 2048
    c.reset()
    assert c.run(T.matrix_traversal(256, 256, order="column")).hit_rate == 0.0


def test_aos_reads_four_times_the_lines_of_soa():
    # One float field of 4: AoS strides 16 B (a 128-B line serves 8 records), SoA 4 B (32).
    aos = Cache(32768, 128, 4).run(T.field_access(4096, 4, (0,), "aos"))
    soa = Cache(32768, 128, 4).run(T.field_access(4096, 4, (0,), "soa"))
    assert (aos.misses, soa.misses) == (4096 // 8, 4096 // 32)
    assert (aos.bytes_from_next, soa.bytes_from_next) == (64 * 1024, 16 * 1024)


def test_transpose_tiling_cuts_misses():
    # 64x64 floats (2 lines per row), fully associative LRU of 32 lines of 128 B.
    # Naive: A's line is touched every other access, so it never ages out: 128 misses.  A
    # column of B spans 64 lines > 32, so each of the 4096 stores misses.  Total 4224.
    # 8x8 tiles: a tile uses 8 A lines and 8 B lines.  An A line (32 columns) serves 4
    # consecutive tiles -> 128 misses.  A B line serves 4 tiles of different tile-rows, 64
    # other B lines apart -> 4 misses for each of B's 128 lines = 512.  Total 640.
    assert Cache(4096, 128, None).run(T.transpose(64)).misses == 4224
    assert Cache(4096, 128, None).run(T.transpose(64, tile=8)).misses == 640
    # 256x256 in 32 KiB 4-way: B's column lines fall in 8 sets (as above) -> all 65536
    # stores miss; A's line is always most recent -> 2048.
    assert Cache(32768, 128, 4).run(T.transpose(256)).misses == 65536 + 2048


def test_stencil_reuse():
    # 1-D: everything fits, so only first touches miss: in[0..1023] = 32 lines,
    # out[1..1022] = 32 lines.
    assert Cache(32768, 128, 4).run(T.stencil_1d(1024)).misses == 64
    # 2-D 64x64 (a row = 2 lines) in 32 fully associative lines: the three input rows and the
    # output row (8 lines) stay cached, so misses are first touches: 64 rows x 2 input lines
    # + 62 rows x 2 output lines = 252.  In 4 lines the rows above no longer fit.
    st = T.stencil_2d(64, 64)
    assert Cache(4096, 128, None).run(st).misses == 252
    assert Cache(512, 128, None).run(st).misses > 252


def test_gemm_tiling_cuts_misses():
    # n=32 floats (a row = one 128-B line), fully associative LRU of 16 lines.
    # Naive: per (i, j), B's column needs 32 lines > 16, so all 32 loads of B miss; A's row
    # line stays most recent (32 misses, one per i); C[i,j]'s line ages out between stores
    # (1024 misses).  32*1024 + 32 + 1024 = 33824.
    # 4x4 tiles: A's 4 rows and C's 4 rows stay for a whole tile-row (8 tile-rows x 8 lines
    # = 64 misses); B's 32 rows cycle through the 8 remaining lines: 32 misses per (ti, tj),
    # 64 * 32 = 2048.  Total 2112.
    assert Cache(2048, 128, None).run(T.gemm(32)).misses == 33824
    assert Cache(2048, 128, None).run(T.gemm(32, tile=4)).misses == 2112


# -- why 128-byte lines --------------------------------------------------------------------------
def test_line_size_sweep_streaming():
    # A stream with no reuse misses once per line: misses = 256 KiB / L, hit rate 1 - 4/L,
    # and the bytes fetched equal the footprint whatever the line size.
    sweep = T.hit_rate_vs_line_size(T.matrix_traversal(256, 256), 32768, 4,
                                    line_sizes=(16, 32, 64, 128, 256))
    for p in sweep.points:
        assert p.misses == p.compulsory == 256 * 1024 // p.line_bytes
        assert p.hit_rate == pytest.approx(1 - 4 / p.line_bytes)
        assert p.bytes_from_next == 256 * 1024
        assert p.capacity == p.conflict == 0
    assert np.allclose(sweep.traffic_ratio, 1.0)
    assert sweep.line_bytes.tolist() == [16, 32, 64, 128, 256]


def test_line_size_sweep_column_walk_shows_conflict_then_capacity():
    # Column walk of 256x256 floats in 32 KiB, 4-way.  Every access misses at every line
    # size (see test_row_vs_column_major_hit_rates; with 16 B lines the column maps to
    # 8 of 512 sets).  Compulsory = 256 KiB / L.
    # 16 B: a fully associative cache holds 2048 lines, more than a column's 256, so it
    #   misses only on first touches: the other 49152 misses are conflict misses.
    # 256 B: it holds 128 lines < 256, so it misses every time too: capacity misses.
    sweep = T.hit_rate_vs_line_size(T.matrix_traversal(256, 256, order="column"), 32768, 4,
                                    line_sizes=(16, 256))
    small, big = sweep.points
    assert (small.misses, small.compulsory, small.capacity, small.conflict) == (
        65536, 16384, 0, 49152)
    assert (big.misses, big.compulsory, big.capacity, big.conflict) == (65536, 1024, 64512, 0)
    assert big.bytes_from_next == 65536 * 256


def test_line_size_sweep_scattered_access_wastes_bytes():
    # Random 4-byte loads over 64 MiB almost never reuse a line, so each access fetches a
    # whole line: bytes fetched grow with the line size (about 16x from 32 B to 512 B).
    sweep = T.hit_rate_vs_line_size(T.random_access(20_000, 64 << 20, seed=2), 32768, 4,
                                    line_sizes=(32, 128, 512))
    fetched = sweep.bytes_from_next
    assert np.all(np.diff(fetched) > 0)
    assert fetched[-1] / fetched[0] > 15
    assert "× footprint" in repr(sweep) and "<table>" in sweep._repr_html_()


def test_line_size_sweep_capacity_boundary_and_write_traffic():
    # A fully associative LRU cache of C lines cycling over C lines hits after the first
    # round; over C + 1 lines it misses every time (each line was used C lines ago).
    for n_lines, capacity in ((32, 0), (33, 2 * 33)):
        trace = np.tile(np.arange(n_lines) * 128, 3)
        p = T.hit_rate_vs_line_size(trace, 32 * 128, None, line_sizes=(128,)).points[0]
        assert (p.compulsory, p.capacity, p.conflict) == (n_lines, capacity, 0)
    # Naive 64x64 transpose in 32 fully associative lines: every store to B misses (see
    # test_transpose_tiling_cuts_misses), dirties a fresh line, and that line is written back
    # once, by eviction or by the final flush: 4096 x 128 B.
    p = T.hit_rate_vs_line_size(T.transpose(64), 4096, None, line_sizes=(128,)).points[0]
    assert p.bytes_to_next == 4096 * 128


@given(data=st.data(), line_log=st.integers(2, 8))
def test_three_cs_against_independent_counts(data, line_log):
    # Compulsory misses = distinct lines (counted with np.unique); compulsory + capacity =
    # misses of a fully associative LRU cache of the same size (simulated directly).  Eight
    # lines and a small address range make reuse at exactly the capacity common.
    line = 1 << line_log
    size = 8 * line
    addrs = np.array(data.draw(st.lists(st.integers(0, 3 * size), max_size=300)), np.int64)
    p = T.hit_rate_vs_line_size(addrs, size, 2, line_sizes=(line,)).points[0]
    assert p.compulsory == np.unique(addrs // line).size
    assert p.compulsory + p.capacity == Cache(size, line, None).run(addrs).misses
    assert p.compulsory + p.capacity + p.conflict == p.misses


# -- the Trace object --------------------------------------------------------------------------
def test_trace_behaves_like_an_address_array_and_is_frozen():
    t = T.transpose(8)
    assert len(t) == 128 and t.stores == 64 and t.loads == 64
    assert np.asarray(t) is t.addresses
    with pytest.raises(ValueError):
        t.addresses[0] = 5
    # Cache.run takes the stores from the trace.
    assert Cache(4096, 128, 4).run(t).stores == 64
    assert Cache(4096, 128, 4).run(t.addresses).stores == 0
    # Footprint of a 1-D stencil over 1024 floats: in[0..1023] (4096 B) + out[1..1022]
    # (4088 B).
    assert T.stencil_1d(1024).footprint_bytes == 8184


# -- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("call,exc,words", [
    (lambda: T.matrix_traversal(0, 4), ValueError, ["rows", "0"]),
    (lambda: T.matrix_traversal(4, 4, element_bytes=0), ValueError, ["element_bytes", "0"]),
    (lambda: T.matrix_traversal(4, 4, order="diagonal"), ValueError, ["order", "diagonal"]),
    (lambda: T.matrix_traversal(4, 4.5), TypeError, ["cols", "4.5"]),
    (lambda: T.field_access(10, 4, (4,)), ValueError, ["fields", "4"]),
    (lambda: T.field_access(10, 4, ()), ValueError, ["fields"]),
    (lambda: T.field_access(10, 4, (0,), layout="aosoa"), ValueError, ["layout", "aosoa"]),
    (lambda: T.transpose(8, tile=0), ValueError, ["tile", "0"]),
    (lambda: T.stencil_1d(4, radius=2), ValueError, ["n", "4", "radius"]),
    (lambda: T.stencil_2d(8, 3, radius=2), ValueError, ["rows and cols", "8×3"]),
    (lambda: T.gemm(1000), ValueError, ["accesses", "limit"]),
    (lambda: T.random_access(10, 2, element_bytes=4), ValueError, ["footprint_bytes", "2"]),
    (lambda: T.strided(-1, 2), ValueError, ["count", "-1"]),
    (lambda: T.hit_rate_vs_line_size(T.strided(10, 1), 4096, 4, line_sizes=(96,)),
     ValueError, ["line_bytes", "96"]),
    (lambda: T.hit_rate_vs_line_size(T.strided(10, 1), 4096, 4, line_sizes=(2048,)),
     ValueError, ["ways", "4"]),
    (lambda: T.hit_rate_vs_line_size(T.strided(10, 1), 4096, 4, line_sizes=()),
     ValueError, ["line_sizes"]),
    (lambda: T.hit_rate_vs_line_size([0.5], 4096, 4), TypeError, ["trace", "float64"]),
])
def test_bad_input_is_refused_clearly(call, exc, words):
    with pytest.raises(exc) as err:
        call()
    for w in words:
        assert w in str(err.value)
