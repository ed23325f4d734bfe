"""Tests for gpu_lessons.memory: sectors per request and shared-memory wavefronts.

References, none of them this module's own output:
* the course's H200 Nsight Compute figures (4, 5, 8, 32, 1, 8, 16 sectors per request);
* cases derived by hand from the bank/sector definitions (derivation next to each);
* published Nsight Compute observations for 8-/16-byte shared loads (cited per test);
* tests/data/h200_ncu_memory.json, one-warp kernels profiled with Nsight Compute on an H200;
* a plain-loop restatement of the documented rules (catches vectorisation slips);
* hypothesis properties that must hold for any warp.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import FrozenInstanceError
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons.memory import (
    ACCESS_SIZES,
    aos_field,
    broadcast,
    constant_load,
    global_load,
    line_sectors,
    matrix_column,
    matrix_row,
    predicted_traffic,
    shared_load,
    soa_field,
    strided,
    tile_column,
)

HW_DATA = Path(__file__).parents[1] / "data" / "h200_ncu_memory.json"


# -- global memory: the H200 measurements (Nsight Compute, sectors per request) -----------------

@pytest.mark.parametrize(("addresses", "b", "sectors"), [
    (strided(1), 4, 4),                            # 32 consecutive aligned floats
    (strided(1, offset=4), 4, 5),                  # misaligned by 4 bytes
    (strided(2), 4, 8),                            # stride 2
    (strided(8), 4, 32),                           # stride >= 8 floats
    (strided(9), 4, 32),
    (strided(32), 4, 32),
    (strided(1000), 4, 32),
    (broadcast(), 4, 1),                           # all lanes one address
    (strided(1, element_bytes=8), 8, 8),           # 32 consecutive doubles
    (strided(1, element_bytes=16), 16, 16),        # 32 consecutive float4
], ids=["consecutive", "misaligned4", "stride2", "stride8", "stride9", "stride32",
        "stride1000", "broadcast", "double", "float4"])
def test_sectors_per_request_match_h200_nsight_compute(addresses, b, sectors):
    g = global_load(addresses, bytes_per_thread=b)
    assert g.sectors == sectors
    assert g.requests == 1


@pytest.mark.parametrize(("addresses", "b", "lines"), [
    (strided(1), 4, 1),           # bytes [0, 128): one 128-byte line
    (strided(1, offset=4), 4, 2),  # bytes [4, 132): lines 0 and 1
    (strided(2), 4, 2),           # bytes [0, 252): lines 0, 1
    (strided(8), 4, 8),           # 32 B apart: four lanes per line, 32 / 4 = 8 lines
    (strided(32), 4, 32),         # 128 B apart: one line per lane
    (strided(1, element_bytes=16), 16, 4),  # 512 contiguous bytes = 4 lines
    (broadcast(4096), 4, 1),
])
def test_lines_hand_derived(addresses, b, lines):
    assert global_load(addresses, b).lines == lines


def test_bytes_and_efficiency_hand_derived():
    # 32 floats aligned: 128 B asked, 4 sectors = 128 B moved.
    g = global_load(strided(1))
    assert (g.requested_bytes, g.moved_bytes, g.efficiency) == (128, 128, 1.0)
    # Misaligned by 4: 5 sectors = 160 B moved for 128 B -> 0.8.
    assert global_load(strided(1, offset=4)).efficiency == pytest.approx(0.8)
    # Stride 2: 8 sectors = 256 B for 128 B -> 0.5; stride 32: 32 sectors -> 1/8.
    assert global_load(strided(2)).efficiency == pytest.approx(0.5)
    assert global_load(strided(32)).efficiency == pytest.approx(1 / 8)
    # Broadcast: 32 lanes x 4 B served by one 32-byte sector -> 4.0 (shared data counts per lane).
    assert global_load(broadcast()).efficiency == pytest.approx(4.0)


def test_aos_versus_soa_hand_derived():
    # 12-byte struct {x, y, z}, lanes read z: addresses 12i + 8, i < 32, span [8, 384).
    # Consecutive lanes are 12 B apart (< 32 B), so every sector 0..11 is hit: 12 sectors.
    aos = global_load(aos_field(12, 8))
    assert aos.sectors == 12
    assert aos.efficiency == pytest.approx(128 / 384)
    # The same field as its own array (SoA, length 1024): 32 contiguous floats = 4 sectors.
    soa = global_load(soa_field(2, length=1024))
    assert soa.sectors == 4
    assert soa.addresses[0] == 2 * 1024 * 4
    # 32-byte struct: each lane its own sector -> 32 sectors, 1/8 of the bytes useful.
    assert global_load(aos_field(32, 4)).sectors == 32


def test_matrix_row_and_column_hand_derived():
    # Row of a 1024-wide float matrix: 32 consecutive floats -> 4 sectors, 1 line.
    row = global_load(matrix_row(5, ld=1024))
    assert (row.sectors, row.lines) == (4, 1)
    assert row.addresses[0] == 5 * 1024 * 4
    # Column: lanes 4096 B apart -> one sector and one line per lane.
    col = global_load(matrix_column(7, ld=1024))
    assert (col.sectors, col.lines) == (32, 32)
    assert col.addresses[1] - col.addresses[0] == 4096


def test_inactive_lanes_by_none_or_mask():
    # Lanes 0-15 read floats 0-15 (64 B = 2 sectors); lanes 16-31 are off.
    half = strided(1)[:16] + [None] * 16
    g = global_load(half)
    assert (g.sectors, g.active_lanes, g.requested_bytes) == (2, 16, 64)
    # The same through mask=; an inactive lane's address is ignored even if misaligned.
    masked = strided(1)[:16] + [3] * 16
    assert global_load(masked, mask=[True] * 16 + [False] * 16) == g
    assert shared_load(masked, mask=[True] * 16 + [False] * 16) == shared_load(half)
    # ... and never range-checked: a switched-off lane may hold a negative address.
    negative = strided(1)[:16] + [-4] * 16
    assert global_load(negative, mask=[True] * 16 + [False] * 16) == g
    assert global_load(np.array(negative), mask=[True] * 16 + [False] * 16) == g
    assert shared_load(negative, mask=[True] * 16 + [False] * 16) == shared_load(half)
    assert g.lane_sector[:5] == (0, 0, 0, 0, 0) and g.lane_sector[8] == 1
    assert g.lane_sector[16] is None
    # No active lane: nothing requested, nothing moved.
    none = global_load([None] * 32)
    assert (none.sectors, none.lines, none.requests, none.efficiency) == (0, 0, 0, 0.0)


def test_lane_sector_map_for_misaligned_access():
    # strided(1, offset=4): lane i at 4 + 4i -> sector (4 + 4i) // 32; lane 7 at 32 is sector 1,
    # lane 31 at 128 is sector 4.
    g = global_load(strided(1, offset=4))
    assert g.lane_sector[6] == 0 and g.lane_sector[7] == 1 and g.lane_sector[31] == 4
    assert g.sector_ids == (0, 1, 2, 3, 4)


def test_lines_and_blocks_touched_hand_derived():
    # strided(1, offset=4): bytes 4..131 -> 128-byte lines 0 (0-127) and 1 (128-255); 64-byte
    # blocks 0 (0-63), 1 (64-127), 2 (128-191); 256-byte block 0 only.
    g = global_load(strided(1, offset=4))
    assert g.line_ids == (0, 1) and g.lines == 2
    assert g.block_ids(64) == (0, 1, 2)
    assert g.block_ids(256) == (0,)
    assert g.block_ids(32) == g.sector_ids == (0, 1, 2, 3, 4)
    # Floats 64 apart = 256 B: lane i in line 2i, 64-byte block 4i, 256-byte block i.
    far = global_load(strided(64))
    assert far.line_ids == tuple(range(0, 64, 2))
    assert far.block_ids(64) == tuple(range(0, 128, 4))
    assert far.block_ids(256) == tuple(range(32))
    # Nothing active: nothing touched.
    assert global_load([None] * 32).line_ids == ()
    # Line 3 holds bytes 384..511 = sectors 12..15.
    assert list(line_sectors(3)) == [12, 13, 14, 15]
    assert list(line_sectors(0)) == [0, 1, 2, 3]


@pytest.mark.parametrize(("block_bytes", "error"), [(16, ValueError), (48, ValueError),
                                                    (96, ValueError), (0, ValueError),
                                                    (64.5, TypeError), ("64", TypeError)])
def test_block_ids_needs_a_power_of_two_of_at_least_a_sector(block_bytes, error):
    with pytest.raises(error) as info:
        global_load(strided(1)).block_ids(block_bytes)
    assert "block_bytes" in str(info.value) and str(block_bytes) in str(info.value)


@pytest.mark.parametrize(("line", "error"), [(-1, ValueError), (1.5, TypeError)])
def test_line_sectors_rejects_bad_lines(line, error):
    with pytest.raises(error, match="line"):
        line_sectors(line)


# -- shared memory: 4-byte and smaller, hand-derived -------------------------------------------

@pytest.mark.parametrize("stride", range(1, 65))
def test_float_stride_conflict_degree_is_gcd(stride):
    # Lane i reads word s*i; its bank s*i mod 32 repeats with period 32/gcd(s, 32), so each
    # bank used is hit by gcd(s, 32) lanes, all at different words: a gcd(s, 32)-way conflict.
    s = shared_load(strided(stride))
    ways = math.gcd(stride, 32)
    assert (s.wavefronts, s.bank_conflicts, s.ideal_wavefronts) == (ways, ways - 1, 1)


def test_named_shared_cases_hand_derived():
    assert shared_load(strided(1)).wavefronts == 1    # banks 0..31, one word each
    assert shared_load(strided(2)).wavefronts == 2    # lanes i, i+16 share bank 2i mod 32
    s32 = shared_load(strided(32))                    # every lane bank 0, 32 different words
    assert (s32.wavefronts, s32.bank_conflicts) == (32, 31)
    assert s32.bank_words[0][0] == 32 and sum(s32.bank_words[0]) == 32
    b = shared_load(broadcast(12))                    # one word for everybody: broadcast
    assert (b.wavefronts, b.bank_conflicts) == (1, 0)
    assert b.lane_banks == ((3,),) * 32
    # Half the lanes read word 0, half word 32: both bank 0, two words -> 2-way.
    assert shared_load([0] * 16 + [128] * 16).wavefronts == 2
    # Words 0 and 1 are in different banks: no conflict.
    assert shared_load([0] * 16 + [4] * 16).wavefronts == 1


def test_sub_word_accesses_hand_derived():
    # 32 consecutive bytes sit in words 0..7: one wavefront (lanes in one word = broadcast).
    assert shared_load(strided(1, element_bytes=1), 1).wavefronts == 1
    # 32 consecutive halves: 64 bytes = words 0..15.
    assert shared_load(strided(1, element_bytes=2), 2).wavefronts == 1
    # Bytes 128 apart: all bank 0, 32 different words.
    assert shared_load(strided(128, element_bytes=1), 1).wavefronts == 32
    # Halves 4 bytes apart (stride 2): words 0..31, no conflict.
    assert shared_load(strided(2, element_bytes=2), 2).wavefronts == 1


def test_padding_a_tile_by_one_column_removes_the_32_way_conflict():
    # T[32][32] floats, column 5: word 32i + 5 -> bank 5 for every lane: 32-way.
    plain = shared_load(tile_column(5, width=32))
    assert (plain.wavefronts, plain.bank_conflicts) == (32, 31)
    # T[32][33]: word 33i + 5 -> bank (i + 5) mod 32, all different: conflict-free.
    padded = shared_load(tile_column(5, width=32, padding=1))
    assert (padded.wavefronts, padded.bank_conflicts) == (1, 0)
    assert sorted(b for (b,) in padded.lane_banks) == list(range(32))
    # T[32][34]: bank (2i + 5) mod 32, lanes i and i+16 collide: 2-way.
    assert shared_load(tile_column(5, width=32, padding=2)).wavefronts == 2
    # Reading a row of the unpadded tile is already conflict-free.
    assert shared_load(matrix_row(3, ld=32)).wavefronts == 1


# -- shared memory: 8- and 16-byte accesses ------------------------------------------------------

def test_words_each_lane_reads_hand_derived():
    # Floats: lane i at byte 4i reads word i.  A tile column T[i][5] of T[32][33]: word 33i + 5.
    assert shared_load(strided(1)).lane_words == tuple((i,) for i in range(32))
    col = shared_load(tile_column(5, width=32, padding=1))
    assert col.lane_words[0] == (5,) and col.lane_words[31] == (33 * 31 + 5,)
    # Doubles: lane i at byte 8i reads words 2i, 2i + 1; float4: words 4i .. 4i + 3.
    d = shared_load(strided(1, element_bytes=8), 8)
    assert d.lane_words[0] == (0, 1) and d.lane_words[16] == (32, 33)
    assert d.lane_banks[16] == (0, 1)          # words 32, 33 sit in banks 0, 1 again
    assert shared_load(strided(1, element_bytes=16), 16).lane_words[3] == (12, 13, 14, 15)
    # Bytes: lanes 0-3 share word 0, lane 31 reads word 7.
    b = shared_load(strided(1, element_bytes=1), 1)
    assert b.lane_words[:5] == ((0,), (0,), (0,), (0,), (1,)) and b.lane_words[31] == (7,)
    # An inactive lane reads nothing.
    half = shared_load(strided(1)[:16] + [None] * 16)
    assert half.lane_words[15] == (15,) and half.lane_words[16] == ()


def test_eight_byte_accesses_hand_derived():
    # 32 consecutive doubles = 256 B: two half-warp phases of 128 contiguous bytes each.
    s = shared_load(strided(1, element_bytes=8), 8)
    assert (s.wavefronts, s.ideal_wavefronts, s.bank_conflicts, s.phases) == (2, 2, 0, 2)
    assert s.lane_banks[0] == (0, 1) and s.lane_banks[15] == (30, 31) and s.lane_banks[16] == (0, 1)
    # Doubles 16 B apart: lane i reads words 4i, 4i+1; in a half-warp lanes i and i+8 share
    # banks (4i mod 32) -> 2-way per half: 2 + 2 = 4 wavefronts, 2 beyond the ideal 2.
    s2 = shared_load(strided(2, element_bytes=8), 8)
    assert (s2.wavefronts, s2.bank_conflicts) == (4, 2)
    # Doubles 128 B apart: each half-warp puts 16 different words on banks 0 and 1.
    s16 = shared_load(strided(16, element_bytes=8), 8)
    assert (s16.wavefronts, s16.bank_conflicts) == (32, 30)
    # Only lanes 0-15 active, consecutive: one phase, one wavefront.
    half = shared_load(strided(1, element_bytes=8)[:16] + [None] * 16, 8)
    assert (half.wavefronts, half.ideal_wavefronts, half.bank_conflicts) == (1, 1, 0)


def test_sixteen_byte_accesses_hand_derived():
    # 32 consecutive float4 = 512 B: four quarter-warps of 128 contiguous bytes.
    s = shared_load(strided(1, element_bytes=16), 16)
    assert (s.wavefronts, s.ideal_wavefronts, s.bank_conflicts, s.phases) == (4, 4, 0, 4)
    assert s.lane_banks[1] == (4, 5, 6, 7)
    # float4 32 B apart: in a quarter (8 lanes) words 8i..8i+3, lanes i and i+4 collide: 2-way.
    s2 = shared_load(strided(2, element_bytes=16), 16)
    assert (s2.wavefronts, s2.bank_conflicts) == (8, 4)
    # float4 128 B apart: 8 different words on banks 0-3 per quarter -> 8 x 4 = 32 wavefronts
    # (an NVIDIA forum answer gives the same worst case: 32 cycles, not 128).
    s8 = shared_load(strided(8, element_bytes=16), 16)
    assert (s8.wavefronts, s8.bank_conflicts) == (32, 28)


def test_uniform_lane_pairs_merge_phases():
    # NVIDIA Developer Forums, "Unexpected shared memory bank conflict" (2019): when lanes
    # i and i^1 (or i and i^2) have the same address, a 128-bit load needs 2 requests instead
    # of 4, and a warp that reads one address is covered by that rule.
    b16 = shared_load(broadcast(), 16)
    assert (b16.wavefronts, b16.bank_conflicts, b16.phases) == (2, 0, 2)
    # For 64-bit loads the two half-warps merge: one wavefront.
    b8 = shared_load(broadcast(), 8)
    assert (b8.wavefronts, b8.bank_conflicts, b8.phases) == (1, 0, 1)
    # Lane i reads double i // 2 (pairs share): 16 doubles = 128 contiguous bytes, one
    # wavefront (the LDS.64 "case 2" reported with Nsight Compute in community write-ups).
    pairs = shared_load([8 * (lane // 2) for lane in range(32)], 8)
    assert (pairs.wavefronts, pairs.bank_conflicts) == (1, 0)
    # Reported LDS.128 case: four-lane groups read float4 q(i) = i//8 + 8*((i//4) % 2), i.e.
    # 0,0,0,0,8,8,8,8,1,1,1,1,9,... Pairs share, so quarters merge into halves; half 0 reads
    # float4 0 and 8 (both banks 0-3) and 1 and 9 (banks 4-7): 2-way, so 2 + 2 wavefronts,
    # 2 conflicts (unmerged quarters would give 8 and 4).
    q = [16 * (lane // 8 + 8 * ((lane // 4) % 2)) for lane in range(32)]
    case5 = shared_load(q, 16)
    assert (case5.wavefronts, case5.bank_conflicts, case5.phases) == (4, 2, 2)
    # The i^2 form: lanes 0,2 read double 0, lanes 1,3 double 1, lanes 4,6 double 2, ...
    # (i^1 differ).  16 distinct doubles in 128 contiguous bytes -> merged: 1 wavefront.
    xor2 = shared_load([8 * (2 * (lane // 4) + lane % 2) for lane in range(32)], 8)
    assert (xor2.wavefronts, xor2.phases) == (1, 1)


def test_phases_merge_only_when_the_whole_warp_qualifies():
    # Reported LDS.128 case: lanes 0-15 pair as i^1, lanes 16-31 as i^2; neither condition
    # holds for the whole warp, so the four quarter-warps stay apart.  Each quarter reads two
    # neighbouring float4 (banks 0-7 or 8-15...): 1 wavefront each, 4 in all, no conflict.
    q = [(lane // 8) * 2 + ((lane % 8) // 2) % 2 if lane < 16 else (lane // 8) * 2 + lane % 2
         for lane in range(32)]
    s = shared_load([16 * x for x in q], 16)
    assert (s.wavefronts, s.bank_conflicts, s.phases) == (4, 0, 4)


# -- properties ----------------------------------------------------------------------------------

@st.composite
def warps(draw, sizes=ACCESS_SIZES, span=4096):
    """A warp's load: access size b and 32 aligned addresses (or None) in a small range, so that
    sectors and banks collide often."""
    b = draw(st.sampled_from(sizes))
    slot = st.integers(0, span // b - 1).map(lambda k: k * b)
    lanes = draw(st.lists(st.one_of(slot, slot, slot, st.none()), min_size=32, max_size=32))
    return lanes, b


def _oracle_shared(addresses, b):
    """The documented shared-memory rule as plain loops over lanes, phases and banks."""
    on = [i for i, a in enumerate(addresses) if a is not None]
    group = 32 if b <= 4 else 128 // b
    if b > 4 and any(all(addresses[i ^ x] is None or addresses[i ^ x] == addresses[i] for i in on)
                     for x in (1, 2)):
        group *= 2
    total = ideal = 0
    for first in range(0, 32, group):
        words = {addresses[i] // 4 + k for i in on if first <= i < first + group
                 for k in range(max(1, b // 4))}
        if words:
            total += max(Counter(w % 32 for w in words).values())
            ideal += 1
    return total, ideal


@settings(max_examples=150, deadline=None)
@given(warps())
def test_global_properties(warp):
    lanes, b = warp
    g = global_load(lanes, b)
    on = [a for a in lanes if a is not None]
    distinct_bytes = {a + k for a in on for k in range(b)}
    assert g.sectors == len({a // 32 for a in on})
    assert g.sectors * 32 >= len(distinct_bytes)          # sectors >= ceil(bytes / 32)
    assert g.sectors <= len(on)                           # an aligned access is in one sector
    assert g.lines <= g.sectors <= 4 * g.lines
    assert g.moved_bytes == 32 * g.sectors
    assert g.requested_bytes == len(on) * b
    assert g.requests == (1 if on else 0)


@settings(max_examples=100, deadline=None)
@given(warps(), st.randoms(use_true_random=False), st.integers(0, 1000))
def test_global_invariant_under_lane_permutation_and_line_shift(warp, rnd, k):
    lanes, b = warp
    base = global_load(lanes, b)
    shuffled = list(lanes)
    rnd.shuffle(shuffled)
    assert (global_load(shuffled, b).sectors, global_load(shuffled, b).lines) == \
        (base.sectors, base.lines)
    shifted = [None if a is None else a + 128 * k for a in lanes]
    assert (global_load(shifted, b).sectors, global_load(shifted, b).lines) == \
        (base.sectors, base.lines)


@settings(max_examples=150, deadline=None)
@given(warps())
def test_shared_properties_and_loop_restatement(warp):
    lanes, b = warp
    s = shared_load(lanes, b)
    active = sum(a is not None for a in lanes)
    assert (s.wavefronts, s.ideal_wavefronts) == _oracle_shared(lanes, b)
    assert s.bank_conflicts >= 0
    assert s.wavefronts >= s.ideal_wavefronts >= (1 if active else 0)
    assert s.ideal_wavefronts <= max(1, b // 4)           # 128 B per conflict-free wavefront
    assert s.wavefronts <= active                         # each lane adds <= 1 word per bank
    assert s.wavefronts == sum(max(p) for p in s.bank_words)
    assert all(len(banks) == (max(1, b // 4) if a is not None else 0)
               for a, banks in zip(lanes, s.lane_banks, strict=True))


@settings(max_examples=100, deadline=None)
@given(warps(), st.sampled_from([32, 64, 128, 256, 4096]))
def test_blocks_touched_are_the_lanes_blocks(warp, block_bytes):
    # From the addresses alone: an aligned access of <= 16 B never crosses a 32-byte boundary,
    # so the blocks touched are {a // block_bytes} over the active lanes.
    lanes, b = warp
    g = global_load(lanes, b)
    expected = tuple(sorted({a // block_bytes for a in lanes if a is not None}))
    assert g.block_ids(block_bytes) == expected
    assert g.line_ids == tuple(sorted({a // 128 for a in lanes if a is not None}))
    assert len(g.line_ids) == g.lines
    assert all(s in line_sectors(line) for s in g.sector_ids for line in [s * 32 // 128])


@settings(max_examples=100, deadline=None)
@given(warps())
def test_lane_words_cover_each_lanes_bytes(warp):
    # Word w holds bytes 4w..4w+3: a lane's words are exactly the words its bytes fall in,
    # and each word's bank is w mod 32.
    lanes, b = warp
    s = shared_load(lanes, b)
    for a, words, banks in zip(lanes, s.lane_words, s.lane_banks, strict=True):
        expected = () if a is None else tuple(sorted({x // 4 for x in range(a, a + b)}))
        assert words == expected
        assert banks == tuple(w % 32 for w in words)


@settings(max_examples=100, deadline=None)
@given(warps(), st.integers(0, 500))
def test_shared_invariant_under_whole_word_shift(warp, k):
    # Adding c * max(b, 4) bytes rotates every bank by the same amount: per-bank word counts
    # are permuted, lane equalities kept, so wavefronts cannot change.
    lanes, b = warp
    base = shared_load(lanes, b)
    shifted = [None if a is None else a + k * max(b, 4) for a in lanes]
    moved = shared_load(shifted, b)
    assert (moved.wavefronts, moved.bank_conflicts) == (base.wavefronts, base.bank_conflicts)


@settings(max_examples=100, deadline=None)
@given(warps(sizes=(1, 2, 4)), st.randoms(use_true_random=False))
def test_shared_narrow_loads_ignore_lane_order(warp, rnd):
    # Up to 4 bytes the whole warp is one phase, so which lane reads what does not matter.
    lanes, b = warp
    shuffled = list(lanes)
    rnd.shuffle(shuffled)
    assert shared_load(shuffled, b).wavefronts == shared_load(lanes, b).wavefronts


@settings(max_examples=50, deadline=None)
@given(warps())
def test_numpy_and_list_inputs_agree(warp):
    lanes, b = warp
    full = [0 if a is None else a for a in lanes]
    assert global_load(np.array(full, dtype=np.int64), b) == global_load(full, b)
    assert shared_load(np.array(full, dtype=np.uint32), b) == shared_load(full, b)


# -- results are values --------------------------------------------------------------------------

def test_results_are_frozen_and_readable():
    g = global_load(strided(1, offset=4))
    with pytest.raises(FrozenInstanceError):
        g.sectors = 4
    rows = {r.label: (r.value, r.unit) for r in g.readout_rows()}      # the readout's own test:
    assert rows["sectors (32 B)"] == (5, "") and rows["moved"] == (160, "B")   # test_readout.py
    assert rows["efficiency"] == (0.8, "%")
    s = shared_load(strided(32))
    assert (s.wavefronts, s.bank_conflicts, s.ways) == (32, 31, 32)


# -- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("load", [global_load, shared_load])
@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"addresses": strided(1)[:31]}, ValueError, ["addresses", "32", "31"]),
    ({"addresses": [*strided(1), 128]}, ValueError, ["addresses", "33"]),
    ({"addresses": "0123"}, TypeError, ["addresses", "str"]),
    ({"addresses": 7}, TypeError, ["addresses", "int"]),
    ({"addresses": [0, 4, 8, -4] + [0] * 28}, ValueError, ["addresses[3]", "-4", ">= 0"]),
    ({"addresses": [0, 4, 1.5] + [0] * 29}, TypeError, ["addresses[2]", "1.5", "integer"]),
    ({"addresses": [True] + [0] * 31}, TypeError, ["addresses[0]", "True"]),
    ({"addresses": [0] * 31 + [2**70]}, ValueError, ["addresses[31]"]),
    ({"addresses": np.arange(-1, 31)}, ValueError, ["addresses[0]", "-1"]),
    ({"addresses": np.zeros((32, 2), dtype=int)}, ValueError, ["addresses", "(32, 2)"]),
    ({"addresses": strided(1, offset=2)}, ValueError,
     ["addresses[0]=2", "bytes_per_thread=4", "multiple of 4"]),
    ({"addresses": strided(1, element_bytes=8, offset=4), "bytes_per_thread": 8}, ValueError,
     ["addresses[0]=4", "bytes_per_thread=8"]),
    ({"addresses": strided(1), "bytes_per_thread": 3}, ValueError,
     ["bytes_per_thread", "3", "16"]),
    ({"addresses": strided(1), "bytes_per_thread": "4"}, TypeError, ["bytes_per_thread", "'4'"]),
    ({"addresses": strided(1), "mask": [True] * 31}, ValueError, ["mask", "32", "31"]),
    ({"addresses": strided(1), "mask": [1] * 32}, TypeError, ["mask[0]", "True or False"]),
    ({"addresses": strided(1), "mask": True}, TypeError, ["mask", "bool"]),
    ({"addresses": [None] + [0] * 31, "mask": [True] * 32}, ValueError,
     ["addresses[0]", "mask[0]", "None"]),
])
def test_bad_input_names_parameter_value_and_rule(load, kwargs, error, words):
    with pytest.raises(error) as info:
        load(**kwargs)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda: strided(-1), ValueError, ["stride", "-1"]),
    (lambda: strided(1, element_bytes=0), ValueError, ["element_bytes", "0"]),
    (lambda: strided(1, offset=-4), ValueError, ["offset", "-4"]),
    (lambda: broadcast(-8), ValueError, ["address", "-8"]),
    (lambda: aos_field(12, 12), ValueError, ["field_offset", "12", "11"]),
    (lambda: soa_field(0, length=16), ValueError, ["length", "16", "32"]),
    (lambda: soa_field(0, length=64, start=40), ValueError, ["start", "40", "32"]),
    (lambda: matrix_row(0, ld=16), ValueError, ["ld", "16"]),
    (lambda: matrix_row(0, ld=64, col=40), ValueError, ["col", "40"]),
    (lambda: matrix_column(64, ld=64), ValueError, ["col", "64", "63"]),
    (lambda: tile_column(32, width=32), ValueError, ["col", "32", "31"]),
    (lambda: tile_column(0, padding=-1), ValueError, ["padding", "-1"]),
    (lambda: tile_column(0.5), TypeError, ["col", "0.5"]),
])
def test_pattern_helpers_reject_bad_arguments(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value)


# -- the H200, measured with Nsight Compute ------------------------------------------------------

def _hardware():
    if not HW_DATA.exists():
        pytest.skip(f"tests/data/{HW_DATA.name} not recorded yet (one-warp kernels profiled "
                    "with Nsight Compute on an H200); the comparison runs once it exists")
    return json.loads(HW_DATA.read_text(encoding="utf-8"))


def _device(data) -> str:
    meta = data.get("meta", {})
    return str(meta.get("device") or meta.get("gpu") or "the profiled GPU")


def test_global_loads_match_h200_nsight_compute():
    data = _hardware()
    entries = data.get("global", [])
    assert entries, f"{HW_DATA.name} has no 'global' entries to compare"
    mismatches = []
    for e in entries:
        want = {"sectors": e["sectors"], "requests": e["requests"]}
        try:
            g = global_load(e["addresses"], e["bytes_per_thread"])
        except (TypeError, ValueError) as err:
            mismatches.append(f"{e['name']}: model rejected the entry: {err}")
            continue
        got = {"sectors": g.sectors, "requests": g.requests}
        if got != want:
            mismatches.append(f"{e['name']} ({e['bytes_per_thread']} B): measured {want}, "
                              f"model {got}")
    assert not mismatches, (f"{len(mismatches)} of {len(entries)} global entries differ from "
                            f"{_device(data)}:\n" + "\n".join(mismatches))


def test_shared_loads_match_h200_nsight_compute():
    data = _hardware()
    entries = data.get("shared", [])
    assert entries, f"{HW_DATA.name} has no 'shared' entries to compare"
    mismatches = []
    for e in entries:
        want = {"wavefronts": e["wavefronts"], "bank_conflicts": e["bank_conflicts"],
                "instructions": e["instructions"]}
        try:
            s = shared_load(e["addresses"], e["bytes_per_thread"])
        except (TypeError, ValueError) as err:
            mismatches.append(f"{e['name']}: model rejected the entry: {err}")
            continue
        # The counts are for one load instruction by one warp.
        got = {"wavefronts": s.wavefronts, "bank_conflicts": s.bank_conflicts,
               "instructions": 1}
        if got != want:
            mismatches.append(f"{e['name']} ({e['bytes_per_thread']} B): measured {want}, "
                              f"model {got}")
    assert not mismatches, (f"{len(mismatches)} of {len(entries)} shared entries differ from "
                            f"{_device(data)}:\n" + "\n".join(mismatches))


# -- the memory model's predictions for the strided copy --------------------------------------

def test_predicted_traffic_by_hand():
    # stride 2, floats: lanes read bytes 0, 8, ..., 248 -> sectors 0..7 (8); the contiguous
    # write is 4 sectors; useful = 32 read + 32 written floats = 256 B of 12 x 32 = 384 B moved
    t = predicted_traffic(2, 4)
    assert (t["sectors_read"], t["sectors_written"], t["moved_bytes"]) == (8, 4, 384)
    assert t["useful_over_moved"] == pytest.approx(2 / 3)
    # stride 8 floats = 32 B apart: 32 sectors read + 4 written = 1152 B for 256 useful
    assert predicted_traffic(8, 4)["useful_over_moved"] == pytest.approx(256 / 1152)
    # misaligned by one float: bytes 4..131 span sectors 0..4 (5) for one warp ...
    t = predicted_traffic(1, 4, offset=1)
    assert t["sectors_read"] == 5
    # ... but 32 neighbouring warps read bytes 4..4099 together: sectors 0..128 (129), so
    # DRAM moves 129 x 32 / 32 = 129 B per warp for the read, + 128 B written
    assert t["moved_bytes"] == pytest.approx(129 + 128)
    assert t["useful_over_moved"] == pytest.approx(256 / 257)
    # 16-byte elements, stride 1: 512 B read = 16 sectors
    assert predicted_traffic(1, 16)["sectors_read"] == 16
    # stride 16 floats = 64 B apart with 64-byte DRAM fetches: 32 blocks x 64 B read + 128 B
    # written (2 blocks) = 2176 B for 256 useful
    assert predicted_traffic(16, 4, fetch_bytes=64)["moved_bytes"] == 2176
    # below 64 B apart the blocks are shared by neighbouring lanes: same as sectors
    assert (predicted_traffic(8, 4, fetch_bytes=64)["moved_bytes"]
            == predicted_traffic(8, 4)["moved_bytes"])


@given(st.integers(1, 64), st.sampled_from([4, 8, 16]), st.integers(0, 40))
def test_predicted_traffic_properties(stride, eb, offset):
    t = predicted_traffic(stride, eb, offset)
    # no lane shares an element, so moved >= useful; a sector serves at most 32 useful bytes
    assert 0 < t["useful_over_moved"] <= 1
    assert t["sectors_read"] >= math.ceil(32 * eb / 32)
    assert t["sectors_read"] <= 32
    wide = predicted_traffic(stride, eb, offset, fetch_bytes=64)
    assert wide["moved_bytes"] >= t["moved_bytes"]


@pytest.mark.parametrize("kw, name", [({"element_bytes": 3}, "element_bytes"),
                                      ({"stride": -1}, "stride"),
                                      ({"fetch_bytes": 48}, "fetch_bytes")])
def test_predicted_traffic_bad_input(kw, name):
    args = {"stride": 1, "element_bytes": 4} | kw
    with pytest.raises(ValueError, match=name):
        predicted_traffic(**args)


# -- the constant cache ---------------------------------------------------------------------------

def test_constant_load_serialises_distinct_addresses():
    """By the Programming Guide's rule ("Constant Memory": requests to different addresses are
    serialized, the cost scales with the unique addresses), counted by hand: one coefficient
    for the whole warp is 1 pass; a coefficient per lane 32; lanes picking one of 4 table
    entries (lane % 4) 4; two half-warps on two values 2; inactive lanes cost nothing."""
    assert constant_load(broadcast(0)).passes == 1
    assert constant_load(strided(1)).passes == 32
    assert constant_load([4 * (lane % 4) for lane in range(32)]).passes == 4
    r = constant_load([0] * 16 + [64] * 16)
    assert (r.passes, r.unique_addresses) == (2, (0, 64))
    half = constant_load(strided(1), mask=[True] * 16 + [False] * 16)
    assert (half.passes, half.active_lanes) == (16, 16)
    assert constant_load(strided(1, element_bytes=8), 8).passes == 32
    assert constant_load(broadcast(8)).passes == 1
    with pytest.raises(ValueError, match="exactly 32"):
        constant_load([0] * 31)
