"""Tests for the allocator simulator: caching (first/best fit) against PagedAttention pages.

References: hand-traced allocations (each derivation in the comments), the rules of PyTorch's
CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp: 512 B rounding; requests up to
1 MiB in a small pool of 2 MiB segments; a 1-10 MiB request reserves 20 MiB, a larger one
itself rounded to 2 MiB; a large-pool block is split only if more than 1 MiB remains), the
KV-cache size per token of Kwon et al.
2023 ("800 KB" for OPT-13B), the ceil(n/B) page count of PagedAttention, and queueing theory
(Poisson arrivals see time averages) for the serving trace.  Property tests check invariants
on random traces.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_lessons import allocator as A
from gpu_lessons.allocator import alloc, free

MiB = 2**20
EXACT = dict(pools="one", round_bytes=1, segment_bytes=100, min_split_bytes=1, capacity=100)


# -- first fit against best fit ----------------------------------------------------------------------

def test_first_fit_fails_where_best_fit_fits():
    # One 100-byte segment: A[0,30) B[30,40) C[40,60) D[60,100).  Free A and C: holes 30@0, 20@40.
    # E (20): first fit takes [0,20) and leaves 10@20; best fit takes the exact hole [40,60).
    # F (30): first fit has holes 10 and 20, no room to grow → out of memory with 30 B free;
    # best fit still has the 30@0 hole.
    trace = [alloc("A", 30), alloc("B", 10), alloc("C", 20), alloc("D", 40), free("A"),
             free("C"), alloc("E", 20), alloc("F", 30)]
    ff = A.caching(trace, policy="first_fit", **EXACT)
    bf = A.caching(trace, policy="best_fit", **EXACT)
    assert ff.failed == ("F",) and bf.failed == ()
    oom = ff.first_oom
    assert (oom.event, oom.id, oom.need, oom.largest_free, oom.free_total) == (7, "F", 30, 20, 30)
    assert ff.fragmentation[6] == pytest.approx(1 - 20 / 30)   # free 10 + 20, largest 20
    assert [(e.start, e.size, e.owner) for e in bf.final_map] == [
        (0, 30, "F"), (30, 10, "B"), (40, 20, "E"), (60, 40, "D")]


def test_best_fit_fails_where_first_fit_fits():
    # a[0,20) b[20,50) c[50,65) d[65,100); free a, c: holes 20@0, 15@50.
    # x (12): first fit [0,12) leaving 8@12; best fit [50,62) leaving 3@62.
    # y (8):  first fit [12,20) exactly; best fit: holes 20@0 and 3@62 → [0,8), leaving 12@8.
    # z (15): first fit [50,65) exactly; best fit has only 12 and 3 → out of memory.
    trace = [alloc("a", 20), alloc("b", 30), alloc("c", 15), alloc("d", 35), free("a"),
             free("c"), alloc("x", 12), alloc("y", 8), alloc("z", 15)]
    ff = A.caching(trace, policy="first_fit", **EXACT)
    bf = A.caching(trace, policy="best_fit", **EXACT)
    assert ff.failed == () and bf.failed == ("z",)
    assert [(e.start, e.size, e.state, e.owner) for e in ff.final_map] == [
        (0, 12, "used", "x"), (12, 8, "used", "y"), (20, 30, "used", "b"),
        (50, 15, "used", "z"), (65, 35, "used", "d")]
    assert bf.first_oom.largest_free == 12 and bf.first_oom.free_total == 15


# -- the caching allocator by hand -------------------------------------------------------------------

def test_rounding_segments_and_waste():
    # Every request is rounded to 512 B.  1000 B → a 1024 B block; 1000 ≤ 1 MiB, so it comes
    # from the small pool, whose segments are 2 MiB: used 1000, allocated 1024, reserved 2 MiB.
    r = A.caching([alloc(1, 1000)], snapshots=[0])
    assert (r.used[0], r.allocated[0], r.reserved[0]) == (1000, 1024, 2 * MiB)
    assert r.maps[0] == (A.MapEntry(0, 1000, "used", 1), A.MapEntry(1000, 24, "waste", 1),
                         A.MapEntry(1024, 2 * MiB - 1024, "free", None))
    # 3 MiB is a large request under 10 MiB: the large pool reserves a 20 MiB segment (at 2 MiB,
    # after the small one) and splits off the 17 MiB it does not need.
    r = A.caching([alloc(1, 1000), alloc(2, 3 * MiB)])
    assert r.reserved[-1] == 22 * MiB
    assert r.final_segments == ((0, 2 * MiB), (2 * MiB, 20 * MiB))
    # free: 2 MiB − 1024 in the small segment, 17 MiB in the large one
    assert r.fragmentation[-1] == pytest.approx(1 - 17 * MiB / (19 * MiB - 1024))
    # One pool that grows in 2 MiB steps: 3 MiB takes a segment of roundup(3, 2) = 4 MiB.
    r = A.caching([alloc(1, 1000), alloc(2, 3 * MiB)], pools="one")
    assert r.final_segments == ((0, 2 * MiB), (2 * MiB, 4 * MiB))
    assert r.fragmentation[-1] == pytest.approx(1 - (2 * MiB - 1024) / (3 * MiB - 1024))


def test_small_requests_share_a_two_mib_segment():
    # 100 KiB, 600 KiB and exactly 1 MiB are all small (≤ 1 MiB): they are cut one after another
    # from one 2 MiB segment (102,400 + 614,400 + 1,048,576 = 1,765,376 ≤ 2,097,152 B).
    kib = 1024
    r = A.caching([alloc("a", 100 * kib), alloc("b", 600 * kib), alloc("c", MiB)])
    assert r.final_segments == ((0, 2 * MiB),)
    assert [(e.start, e.owner) for e in r.final_map if e.state == "used"] == [
        (0, "a"), (100 * kib, "b"), (700 * kib, "c")]
    assert r.free_cached[-1] == 2 * MiB - 1724 * kib
    # 1 MiB + 1 B rounds to 1 MiB + 512 B: a large request, so a 20 MiB segment of its own
    r = A.caching([alloc("a", 100 * kib), alloc("d", MiB + 1)])
    assert r.final_segments == ((0, 2 * MiB), (2 * MiB, 20 * MiB))


def test_large_requests_share_a_twenty_mib_segment():
    # 3 and 5 MiB (each 1-10 MiB) and then 12 MiB: the first reserves 20 MiB, the next two fit in
    # what it leaves (17, then 12 MiB: an exact fit).  10 MiB is the first size that reserves
    # itself, rounded up to 2 MiB: a second segment of 10 MiB.
    trace = [alloc("x", 3 * MiB), alloc("y", 5 * MiB), alloc("z", 12 * MiB), alloc("w", 10 * MiB)]
    r = A.caching(trace)
    assert r.final_segments == ((0, 20 * MiB), (20 * MiB, 10 * MiB))
    assert r.reserved.tolist() == [20 * MiB, 20 * MiB, 20 * MiB, 30 * MiB]
    assert r.free_cached[-1] == 0
    # 11 MiB + 1 B → 11 MiB + 512 B, a segment of roundup(·, 2 MiB) = 12 MiB
    assert A.caching([alloc("v", 11 * MiB + 1)]).final_segments == ((0, 12 * MiB),)


def test_large_pool_keeps_remainders_of_one_mib_or_less():
    # 19 MiB reserves 20 MiB; the 1 MiB left is not more than 1 MiB, so it is not split off:
    # the whole 20 MiB block is handed out, 1 MiB of internal waste.  18.5 MiB leaves 1.5 MiB,
    # which is split off and stays free.
    r = A.caching([alloc(1, 19 * MiB)])
    assert (r.allocated[0], r.waste[0], r.free_cached[0]) == (20 * MiB, MiB, 0)
    r = A.caching([alloc(1, 37 * MiB // 2)])
    assert (r.allocated[0], r.waste[0], r.free_cached[0]) == (37 * MiB // 2, 0, 3 * MiB // 2)
    # In the small pool any remainder of 512 B or more is split: 1 MiB leaves 1 MiB free.
    r = A.caching([alloc(1, MiB)])
    assert (r.allocated[0], r.free_cached[0]) == (MiB, MiB)
    # With one pool the threshold is min_split_bytes.
    r = A.caching([alloc(1, 3 * MiB // 2)], pools="one", min_split_bytes=MiB + 1)
    assert r.allocated[0] == 2 * MiB and r.waste[0] == MiB // 2
    r = A.caching([alloc(1, 3 * MiB // 2)], pools="one")
    assert r.allocated[0] == 3 * MiB // 2 and r.free_cached[0] == MiB // 2


def test_small_and_large_pools_never_share_blocks():
    # 12 MiB is freed and stays cached; a 512 KiB request is small and may not take a piece
    # of the large pool's free 12 MiB block: a 2 MiB small-pool segment is reserved beside it.
    trace = [alloc("big", 12 * MiB), free("big"), alloc("s", 512 * 1024)]
    r = A.caching(trace)
    assert r.reserved[-1] == 14 * MiB
    assert r.final_segments == ((0, 12 * MiB), (12 * MiB, 2 * MiB))
    # one pool: the small request is cut from the cached 12 MiB block, nothing new is reserved
    assert A.caching(trace, pools="one").reserved[-1] == 12 * MiB


def test_oom_releases_free_segments_of_both_pools():
    # capacity 20 MiB: a small request reserves 2 MiB and is freed; 19 MiB needs a 20 MiB segment,
    # which does not fit beside the cached 2 MiB until the free small segment is released.
    trace = [alloc("s", 4096), free("s"), alloc("L", 19 * MiB)]
    r = A.caching(trace, capacity=20 * MiB)
    assert r.failed == () and r.final_segments == ((0, 20 * MiB),)
    assert r.reserved.tolist() == [2 * MiB, 2 * MiB, 20 * MiB]
    r = A.caching(trace, capacity=20 * MiB, release_on_oom=False)
    assert r.failed == ("L",)


def test_coalescing_within_a_segment_only():
    # three 512 KiB blocks in one 2 MiB small-pool segment; freeing them in any order leaves one
    # free block
    kb = 512 * 1024
    for order in itertools.permutations("abc"):
        trace = [alloc("a", kb), alloc("b", kb), alloc("c", kb)] + [free(x) for x in order]
        r = A.caching(trace)
        assert r.final_map == (A.MapEntry(0, 2 * MiB, "free", None),)
        assert r.fragmentation[-1] == 0.0
    # two segments, both free again: they stay two blocks (separate device allocations), so the
    # largest free block is half of the free memory (one pool: each 2 MiB request reserves a
    # 2 MiB segment of its own)
    r = A.caching([alloc("a", 2 * MiB), alloc("b", 2 * MiB), free("a"), free("b")], pools="one")
    assert [(e.start, e.size, e.state) for e in r.final_map] == [
        (0, 2 * MiB, "free"), (2 * MiB, 2 * MiB, "free")]
    assert r.fragmentation[-1] == pytest.approx(0.5)
    # PyTorch's rules put both in one 20 MiB segment, which is whole again once both are freed
    r = A.caching([alloc("a", 2 * MiB), alloc("b", 2 * MiB), free("a"), free("b")])
    assert r.final_map == (A.MapEntry(0, 20 * MiB, "free", None),)


def test_releasing_free_segments_on_oom():
    # one pool, capacity 4 MiB: A and B take a 2 MiB segment each and are freed; 4 MiB is cached
    # but in two pieces, so C (3 MiB) fits in neither.  A new 4 MiB segment exceeds the capacity;
    # releasing both free segments (empty_cache) makes room.  Without the release: out of memory.
    trace = [alloc("A", 2 * MiB), alloc("B", 2 * MiB), free("A"), free("B"), alloc("C", 3 * MiB)]
    r = A.caching(trace, capacity=4 * MiB, pools="one")
    assert r.failed == () and r.final_segments == ((0, 4 * MiB),)
    r = A.caching(trace, capacity=4 * MiB, pools="one", release_on_oom=False)
    assert r.failed == ("C",)
    assert (r.first_oom.free_total, r.first_oom.largest_free) == (4 * MiB, 2 * MiB)


def test_released_gap_is_reused():
    # one pool: segments [0,2) [2,4) [4,6) MiB; the middle one is released at C's OOM, and C
    # (2 MiB) goes into that gap (lowest gap that fits) rather than at the end.
    trace = [alloc("A", 2 * MiB), alloc("B", 2 * MiB), alloc("D", 2 * MiB), free("B"),
             alloc("C", 2 * MiB)]
    r = A.caching(trace, capacity=6 * MiB, pools="one")
    assert r.final_segments == ((0, 2 * MiB), (2 * MiB, 2 * MiB), (4 * MiB, 2 * MiB))
    assert [e.owner for e in r.final_map] == ["A", "C", "D"]


def test_failed_request_is_skipped_and_its_free_ignored():
    trace = [alloc(1, 60), alloc(2, 60), free(2), free(1), alloc(3, 100)]
    r = A.caching(trace, **EXACT)
    assert r.failed == (2,)
    assert r.used[-1] == 100 and r.first_oom.event == 1


# -- pages ------------------------------------------------------------------------------------------

def test_pages_by_hand():
    # 16-byte pages: 33 bytes take ceil(33/16) = 3 pages = 48 bytes, 15 wasted in the last page.
    r = A.paged([alloc(1, 33)], page_bytes=16)
    assert (r.used[0], r.allocated[0], r.waste[0]) == (33, 48, 15)
    assert r.final_map == (A.MapEntry(0, 33, "used", 1), A.MapEntry(33, 15, "waste", 1))


def test_pages_need_no_contiguity():
    # Four 16-byte pieces fill 64 bytes; freeing the 1st and 3rd leaves two separate 16-byte
    # holes.  A 32-byte request: pages 0 and 2 serve it; a contiguous allocator of the same
    # 64 bytes cannot (largest hole 16) — external fragmentation.
    trace = [alloc(i, 16) for i in range(4)] + [free(0), free(2), alloc("e", 32)]
    p = A.paged(trace, page_bytes=16, capacity=64)
    assert p.failed == ()
    assert [(e.start, e.owner) for e in p.final_map] == [(0, "e"), (16, 1), (32, "e"), (48, 3)]
    c = A.caching(trace, pools="one", round_bytes=1, segment_bytes=64, min_split_bytes=1,
                  capacity=64)
    assert c.failed == ("e",) and c.first_oom.free_total == 32 and c.first_oom.largest_free == 16


@given(tokens=st.lists(st.integers(1, 3000), min_size=1, max_size=40), B=st.integers(1, 64),
       bpt=st.integers(1, 4096), data=st.data())
def test_page_waste_is_less_than_a_page_per_sequence(tokens, B, bpt, data):
    # a sequence of n tokens takes ceil(n/B) pages: waste (ceil(n/B)·B − n) ≤ B − 1 tokens each
    order = data.draw(st.permutations(range(len(tokens))))
    trace = [alloc(i, n * bpt) for i, n in enumerate(tokens)]
    trace += [free(i) for i in order[: len(order) // 2]]
    r = A.paged(trace, page_bytes=B * bpt)
    live = [tokens[i] for i in order[len(order) // 2:]]
    expected = sum(math.ceil(n / B) * B - n for n in live) * bpt
    assert r.waste[-1] == expected
    assert r.waste[-1] <= len(live) * (B - 1) * bpt
    assert np.all(r.fragmentation == 0.0)


@given(sizes=st.lists(st.integers(1, 200), min_size=1, max_size=30), pages=st.integers(1, 20),
       frees=st.lists(st.booleans(), min_size=30, max_size=30))
def test_pages_fail_only_when_too_few_are_free(sizes, pages, frees):
    trace, live = [], []
    for i, s in enumerate(sizes):
        trace.append(alloc(i, s))
        live.append(i)
        if frees[i] and live:
            trace.append(free(live.pop(0)))
    r = A.paged(trace, page_bytes=16, capacity=pages * 16)
    # replay the page count by hand
    in_use, held, failed = 0, {}, []
    for ev in trace:
        if ev.op == "alloc":
            k = -(-ev.size // 16)
            if in_use + k > pages:
                failed.append(ev.id)
            else:
                held[ev.id] = k
                in_use += k
        elif ev.id in held:
            in_use -= held.pop(ev.id)
    assert r.failed == tuple(failed)


# -- invariants on random traces ------------------------------------------------------------------

@st.composite
def traces(draw):
    ops = draw(st.lists(st.tuples(st.booleans(), st.integers(1, 3 * MiB), st.integers(0, 99)),
                        min_size=1, max_size=60))
    trace, live, next_id = [], [], 0
    for is_alloc, size, pick in ops:
        if is_alloc or not live:
            trace.append(alloc(next_id, size))
            live.append(next_id)
            next_id += 1
        else:
            trace.append(free(live.pop(pick % len(live))))
    return trace, live


def _check_map(entries, segments, used):
    assert all(e.size > 0 for e in entries)
    for a, b in itertools.pairwise(entries):          # sorted and no overlap
        assert a.start + a.size <= b.start
    covered = sum(e.size for e in entries)
    assert covered == sum(size for _, size in segments)   # segments exactly covered
    for e in entries:
        assert any(s <= e.start and e.start + e.size <= s + size for s, size in segments)
    assert sum(e.size for e in entries if e.state == "used") == used


@given(t=traces(), policy=st.sampled_from(A.POLICIES), cap=st.one_of(st.none(),
       st.integers(2, 16).map(lambda m: m * MiB)))
def test_caching_invariants(t, policy, cap):
    trace, live = t
    snaps = list(range(len(trace)))
    r = A.caching(trace, policy=policy, capacity=cap, snapshots=snaps)
    assert np.all(r.used <= r.allocated) and np.all(r.allocated <= r.reserved)
    if cap is None:
        assert r.failed == () and r.first_oom is None
    else:
        assert np.all(r.reserved <= cap)
    assert np.all((r.fragmentation >= 0) & (r.fragmentation <= 1))
    assert np.all(r.largest_free <= r.free_cached)
    for k in snaps:
        _check_map(r.maps[k], r.segments[k], r.used[k])
    # free everything that is still live: memory returns, every segment is one free block
    rest = trace + [free(i) for i in live]
    r = A.caching(rest, policy=policy, capacity=cap)
    assert r.used[-1] == 0 and r.allocated[-1] == 0
    assert [(e.start, e.size) for e in r.final_map] == list(r.final_segments)
    assert all(e.state == "free" for e in r.final_map)


@given(t=traces(), page=st.sampled_from([4096, 65536, MiB]))
def test_paged_invariants(t, page):
    trace, live = t
    snaps = list(range(len(trace)))
    r = A.paged(trace, page_bytes=page, snapshots=snaps)
    assert np.all(r.used <= r.allocated) and np.all(r.allocated <= r.reserved)
    assert np.all(r.allocated % page == 0)
    for k in snaps:
        _check_map(r.maps[k], r.segments[k], r.used[k])
    r = A.paged(trace + [free(i) for i in live], page_bytes=page)
    assert r.used[-1] == 0 and r.allocated[-1] == 0


# -- traces --------------------------------------------------------------------------------------

def test_kv_bytes_per_token():
    # OPT-13B: 2 × 40 layers × 5120 × 2 B = 819,200 B ("800 KB", Kwon et al. 2023 §3);
    # Llama-2-7B: 2 × 32 × 4096 × 2 = 512 KiB per token.
    assert A.kv_bytes_per_token(40, 5120) == 819_200 == A.KV_BYTES_OPT_13B
    assert A.kv_bytes_per_token(32, 4096) == 512 * 1024


def test_page_bytes():
    # vLLM's 16-token block of OPT-13B: 16 × 819,200 B = 13,107,200 B = 12.5 MiB; of
    # Llama-2-7B (512 KiB per token): 16 × 512 KiB = 8 MiB; one token of OPT-13B: 819,200 B.
    assert A.page_bytes(16) == 13_107_200 == 12.5 * A.MiB
    assert A.page_bytes(16, bytes_per_token=512 * 1024) == 8 * A.MiB
    assert A.page_bytes(1) == 819_200


@given(st.integers(1, 4096), st.integers(1, 4096))
def test_pages_of_a_sequence_hold_it_with_less_than_a_page_to_spare(tokens, page_tokens):
    # a sequence of n tokens in ceil(n / B) pages wastes at most B − 1 tokens
    bpt = 1000
    pages = math.ceil(tokens / page_tokens)
    held = pages * A.page_bytes(page_tokens, bytes_per_token=bpt)
    assert 0 <= held - tokens * bpt <= (page_tokens - 1) * bpt


def test_serving_trace_shape():
    t = A.serving_trace(300, seed=3, prompt_tokens=(10, 20), output_tokens=(5, 8),
                        bytes_per_token=100)
    assert t == A.serving_trace(300, seed=3, prompt_tokens=(10, 20), output_tokens=(5, 8),
                                bytes_per_token=100)
    assert t != A.serving_trace(300, seed=4, prompt_tokens=(10, 20), output_tokens=(5, 8),
                                bytes_per_token=100)
    allocs = [e for e in t if e.op == "alloc"]
    assert sorted(e.id for e in allocs) == list(range(300))
    assert sorted(e.id for e in t if e.op == "free") == list(range(300))
    assert all(e.size % 100 == 0 and 1500 <= e.size <= 2800 for e in allocs)
    A.caching(t)   # a valid trace


def test_serving_trace_concurrency():
    # Poisson arrivals see time averages (Wolff 1982): the number of requests in flight that an
    # arrival finds averages the time-average concurrency, which the generator sets to 20.
    t = A.serving_trace(6000, seed=1, concurrency=20.0)
    live, seen = 0, []
    for e in t:
        if e.op == "alloc":
            seen.append(live)
            live += 1
        else:
            live -= 1
    assert np.mean(seen[500:]) == pytest.approx(20.0, rel=0.08)


def test_training_trace_by_hand():
    # 2 layers, weights 4, activations 10, workspace 2 (bytes).  In step 1 the peak comes at the
    # first backward gradient: weights 8 + Adam states 16 + activations 20 + workspace 2 +
    # gradient 4 = 50.  Step 0 has no Adam states yet: 34.
    t = A.training_trace(2, n_layers=2, weight_bytes=4, activation_bytes=10, workspace_bytes=2)
    r = A.caching(t, pools="one", round_bytes=1, segment_bytes=1)
    steps = len(t) - 2                   # two weight allocations first
    half = 2 + steps // 2
    assert r.used[:half].max() == 34 and r.used[half:].max() == 50
    assert r.used[-1] == 8 + 16          # weights and optimizer states stay


def test_fixed_shapes_stop_growing_after_the_second_step():
    # Same shapes every step.  Step 0 ends by creating the Adam states, which the allocator carves
    # out of the activation blocks just freed, so step 1's activations need new segments once
    # more; from then on every request finds a cached block of its size and the reservation is
    # flat (PyTorch users see the same: memory settles after the first iterations).
    # Peak used, by hand (MiB): weights 12 × 8 + Adam 12 × 16 + activations 12 × 32 +
    # workspace 4 + first gradient 8 = 684.
    L = 12
    t = A.training_trace(4)
    per_step = 3 * L + 4 * L + L         # forward, backward, gradient frees
    end1 = L + per_step + L + per_step   # weights, step 0, Adam states, step 1
    assert len(t) == L + 4 * per_step + L
    for policy in A.POLICIES:
        r = A.caching(t, policy=policy)
        assert r.peak_used == 684 * MiB
        assert np.all(r.reserved[end1 - 1:] == r.reserved[-1])
        assert r.reserved[end1 - 1] > r.reserved[L + per_step + L - 1]   # step 1 grew
        assert r.peak_reserved >= r.peak_used


# -- bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, exc, words", [
    (lambda: A.caching(5), TypeError, "trace"),
    (lambda: A.caching([("malloc", 1, 5)]), ValueError, r"trace\[0\]"),
    (lambda: A.caching([alloc(1, 5), alloc(1, 5)]), ValueError, "already live"),
    (lambda: A.caching([free(1)]), ValueError, "not allocated"),
    (lambda: A.caching([("alloc", 1, 0)]), ValueError, "size"),
    (lambda: A.caching([("alloc", 1.5, 10)]), TypeError, "id"),
    (lambda: A.caching([alloc(1, 5)], policy="worst_fit"), ValueError, "policy"),
    (lambda: A.caching([alloc(1, 5)], capacity=0), ValueError, "capacity"),
    (lambda: A.caching([alloc(1, 5)], segment_bytes=4096), ValueError, "pools='one'"),
    (lambda: A.caching([alloc(1, 5)], pools="buddy"), ValueError, "pools"),
    (lambda: A.caching([alloc(1, 5)], pools="one", round_bytes=512, segment_bytes=1000), ValueError,
     "segment_bytes"),
    (lambda: A.caching([alloc(1, 5)], snapshots=[3]), ValueError, "snapshots"),
    (lambda: A.caching([alloc(1, 5)], release_on_oom="no"), TypeError, "release_on_oom"),
    (lambda: A.paged([alloc(1, 5)], page_bytes=0), ValueError, "page_bytes"),
    (lambda: A.paged([alloc(1, 5)], page_bytes=16, capacity=8), ValueError, "capacity"),
    (lambda: A.serving_trace(10, prompt_tokens=(50, 10)), ValueError, "prompt_tokens"),
    (lambda: A.serving_trace(10, output_tokens=5), TypeError, "output_tokens"),
    (lambda: A.serving_trace(10, concurrency=0), ValueError, "concurrency"),
    (lambda: A.training_trace(vary=1.0), ValueError, "vary"),
    (lambda: A.kv_bytes_per_token(0, 5120), ValueError, "n_layers"),
    (lambda: A.page_bytes(0), ValueError, "tokens"),
    (lambda: A.page_bytes(1.5), TypeError, "tokens"),
    (lambda: A.page_bytes(16, bytes_per_token=0), ValueError, "bytes_per_token"),
])
def test_bad_input_names_the_parameter(call, exc, words):
    with pytest.raises(exc, match=words):
        call()


# -- presentation and speed ------------------------------------------------------------------------

def test_snapshots_and_the_comparison_table():
    t = A.serving_trace(50, seed=0)
    r = A.caching(t, snapshots=[10, -1])
    assert set(r.maps) == {10, len(t) - 1}
    assert r.maps[len(t) - 1] == r.final_map
    c = A.compare(t, page_bytes=A.BLOCK_TOKENS * A.KV_BYTES_OPT_13B, capacity=8 * 2**30)
    assert [x.allocator for x in c.runs] == ["first_fit", "best_fit", "paged"]
    assert "MiB" in repr(c) and "<table>" in c._repr_html_()
    assert c["paged"].allocator == "paged"


