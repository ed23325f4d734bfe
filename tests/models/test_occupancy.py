"""The occupancy calculator against published figures, hand derivations and the CUDA runtime.

Every expected number below comes from outside the code: the CUDA Best Practices Guide,
misconception M19 of docs/misconceptions.md (measured on an H200), a derivation written next to
the case from the rules of cuda_occupancy.h and the CUDA C++ Programming Guide's
compute-capability tables, or (tests/data/h200_occupancy.json) what
cuOccupancyMaxActiveBlocksPerMultiprocessor returned on an H200.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons.hardware import gpu as catalog_gpu
from gpu_lessons.occupancy import (
    LIMITS,
    UNLIMITED,
    blocks_per_sm,
    compute_capabilities,
    compute_capability,
    occupancy,
    occupancy_vs_block_size,
    occupancy_vs_registers,
    occupancy_vs_shared_mem,
    resolve,
)

KB = 1024
ALL_CCS = ("7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "12.0")


# -- (1) CUDA C++ Best Practices Guide, section 11.1.1 -----------------------------------------

def test_best_practices_guide_37_registers_128_threads():
    # BPG 11.1.1: "on a device of compute capability 7.0 ... a kernel with 128-thread blocks
    # using 37 registers per thread results in an occupancy of 75% with 12 active 128-thread
    # blocks per multi-processor"
    r = occupancy(cc="7.0", threads_per_block=128, registers_per_thread=37)
    assert (r.blocks_per_sm, r.warps_per_sm) == (12, 48)
    assert r.occupancy == pytest.approx(0.75)
    assert r.limiter == "registers"


def test_best_practices_guide_37_registers_320_threads():
    # BPG 11.1.1: "... 320-thread blocks using the same 37 registers per thread results in an
    # occupancy of 63% because only four 320-thread blocks can reside on a multiprocessor"
    r = occupancy(cc="7.0", threads_per_block=320, registers_per_thread=37)
    assert r.blocks_per_sm == 4
    assert r.occupancy == 40 / 64  # 62.5 %, which the guide prints as 63 %
    assert r.limiter == "registers"


@pytest.mark.parametrize("threads", [64, 128, 256, 512, 1024])
def test_best_practices_guide_32_registers_is_full_occupancy_on_cc70(threads):
    # BPG 11.1.1: on CC 7.0 "for a multiprocessor to have 100% occupancy, each thread can use
    # at most 32 registers" (65,536 registers / 2,048 threads).  Blocks of at least 64 threads:
    # 32-thread blocks stop at the 32-block limit, 50 %.
    assert occupancy(cc="7.0", threads_per_block=threads,
                     registers_per_thread=32).occupancy == 1.0
    assert occupancy(cc="7.0", threads_per_block=threads,
                     registers_per_thread=33).occupancy < 1.0


def test_catalog_gpu_gives_the_same_answer_as_its_cc():
    v100 = catalog_gpu("V100")
    by_name = occupancy(gpu="V100", threads_per_block=128, registers_per_thread=37)
    by_object = occupancy(gpu=v100, threads_per_block=128, registers_per_thread=37)
    as_cc = occupancy(cc=v100, threads_per_block=128, registers_per_thread=37)
    for r in (by_name, by_object, as_cc):
        assert (r.cc, r.blocks_per_sm, r.gpu) == ("7.0", 12, "V100 SXM2")
    assert occupancy(gpu="H100", threads_per_block=256, registers_per_thread=40).cc == "9.0"


# -- (2) the often-quoted 65536/64 example, and M19 ---------------------------------------------

def test_resolve_picks_the_table_row_from_a_cc_or_a_gpu():
    # CC 9.0 (H100; Programming Guide tables): 64 warps and 32 blocks per SM; CC 8.6 (RTX 3090): 48 and 16.
    spec, name = resolve(gpu="H100")
    assert (spec.cc, spec.max_warps_per_sm, spec.max_blocks_per_sm, name) == \
        ("9.0", 64, 32, "H100 SXM5")
    spec, name = resolve("8.6")
    assert (spec.cc, spec.max_warps_per_sm, spec.max_blocks_per_sm, name) == ("8.6", 48, 16, None)
    # a GPU object given positionally counts as gpu=
    assert resolve(catalog_gpu("rtx 3090")) == (compute_capability("8.6"), "RTX 3090")
    with pytest.raises(ValueError, match="not both"):
        resolve("9.0", "H100")
    with pytest.raises(TypeError, match=r"cc='9\.0'"):
        resolve()
    with pytest.raises(ValueError, match="gpu="):
        resolve(gpu="H9000")


def test_seed_64_registers_gives_1024_threads():
    # seed: 65,536 registers / 64 per thread = 1,024 threads.  Per warp 64 x 32 = 2,048
    # (already a multiple of 256); per sub-partition 16,384 / 2,048 = 8 warps; x 4 = 32 warps.
    r = occupancy(cc="9.0", threads_per_block=256, registers_per_thread=64)
    assert r.warps_per_sm * 32 == 1024
    assert r.blocks_per_sm == 4


@pytest.mark.parametrize("cc", ["8.0", "9.0", "10.0"])
def test_m19_40_registers_gives_48_warps_not_51(cc):
    # M19 (measured with the CUDA runtime on an H200): 40 x 32 = 1,280 registers per warp,
    # 16,384 // 1,280 = 12 warps per sub-partition, x 4 = 48 warps; the naive
    # 65,536 / 1,280 = 51.2 is wrong.  256-thread blocks: 48 // 8 = 6 blocks.
    r = occupancy(cc=cc, threads_per_block=256, registers_per_thread=40,
                  shared_mem_per_block=4096)
    assert r.warps_per_sm == 48
    assert r.blocks_per_sm == 6
    assert r.registers_per_warp == 1280
    assert r.occupancy == pytest.approx(0.75)
    # with 32-thread blocks the sub-partition rule still stops at 48 warps, not 51
    assert occupancy(cc=cc, threads_per_block=32, registers_per_thread=40).warps_per_sm == 32
    assert occupancy(cc=cc, threads_per_block=64, registers_per_thread=40).warps_per_sm == 48


# -- (3) hand-derived cases, one or more per limiter, on several CCs ---------------------------

@pytest.mark.parametrize(
    ("cc", "threads", "regs", "smem", "carveout", "blocks", "warps", "limiters"),
    [
        # -- warps --------------------------------------------------------------------------
        # CC 8.6, 1024 threads: W = 32; warps 48 // 32 = 1; regs 32 x 32 = 1,024/warp ->
        # 16,384 // 1,024 = 16 per part -> 64 warps // 32 = 2; smem 0 + 1,024 reserved ->
        # 102,400 // 1,024 = 100; blocks 16.  -> 1 block, 32 warps.
        ("8.6", 1024, 32, 0, None, 1, 32, ("warps",)),
        # CC 12.0 (48 warps like 8.6): 768 threads, W = 24; warps 48 // 24 = 2; regs 16 ->
        # 512/warp -> 32 per part -> 128 // 24 = 5; smem 100 blocks; blocks 24.  -> 2 blocks.
        ("12.0", 768, 16, 0, None, 2, 48, ("warps",)),
        # CC 9.0, 96 threads, W = 3: warps 64 // 3 = 21; regs 32 -> 64 warps // 3 = 21 (tie);
        # smem 1,024 -> 228 blocks; blocks 32.  -> 21 blocks, 63 warps; warps = registers.
        ("9.0", 96, 32, 0, None, 21, 63, ("warps", "registers")),
        # -- blocks -------------------------------------------------------------------------
        # CC 9.0, 32 threads: W = 1; warps 64; regs 16 -> 512/warp -> 32 per part -> 128;
        # smem 233,472 // 1,024 = 228; blocks 32.  -> 32 blocks, 32 warps (50 %).
        ("9.0", 32, 16, 0, None, 32, 32, ("blocks",)),
        # CC 7.5, 32 threads: warps 32; regs 128; no shared memory and no reservation on 7.x
        # -> no limit; blocks 16.  -> 16 blocks, 16 of 32 warps.
        ("7.5", 32, 16, 0, None, 16, 16, ("blocks",)),
        # CC 8.9, 64 threads: W = 2; warps 48 // 2 = 24; regs 128 // 2 = 64; smem 100; blocks
        # 24.  -> 24 blocks; warps and blocks tie.
        ("8.9", 64, 16, 0, None, 24, 48, ("warps", "blocks")),
        # CC 12.0, 32 threads: warps 48, blocks 24 -> 24 blocks, 24 warps.
        ("12.0", 32, 16, 0, None, 24, 24, ("blocks",)),
        # CC 10.0, 32 threads: as 9.0 -> 32 blocks.
        ("10.0", 32, 16, 0, None, 32, 32, ("blocks",)),
        # -- registers ----------------------------------------------------------------------
        # CC 8.0, 255 regs, 256 threads: 255 x 32 = 8,160 -> 8,192/warp; 16,384 // 8,192 = 2
        # per part -> 8 warps // 8 = 1; launch check 8,192 x roundup(8, 4) = 65,536 fits.
        ("8.0", 256, 255, 0, None, 1, 8, ("registers",)),
        # CC 8.9, 168 regs, 288 threads: 168 x 32 = 5,376 (= 21 x 256); 16,384 // 5,376 = 3
        # per part -> 12 warps // 9 = 1; launch check 5,376 x 12 = 64,512 <= 65,536.
        ("8.9", 288, 168, 0, None, 1, 9, ("registers",)),
        # CC 7.5, 64 regs, 128 threads: 2,048/warp -> 8 per part -> 32 warps // 4 = 8;
        # warps 32 // 4 = 8 (tie); blocks 16; no smem.  -> 8 blocks, 32 warps (100 %).
        ("7.5", 128, 64, 0, None, 8, 32, ("warps", "registers")),
        # CC 9.0, 72 regs, 256 threads: 2,304/warp -> 16,384 // 2,304 = 7 per part -> 28
        # warps // 8 = 3 blocks -> 24 warps (37.5 %).
        ("9.0", 256, 72, 0, None, 3, 24, ("registers",)),
        # -- shared memory ------------------------------------------------------------------
        # CC 8.0, 48 KB: 49,152 + 1,024 = 50,176 (= 392 x 128); 167,936 // 50,176 = 3;
        # warps 8, regs (32) 8.  -> 3 blocks, 24 warps (37.5 %).
        ("8.0", 256, 32, 48 * KB, None, 3, 24, ("shared memory",)),
        # CC 7.0, 20,000 B: unit 256 -> 20,224 (= 79 x 256), no reservation;
        # 98,304 // 20,224 = 4; warps 8; regs (16) 16.  -> 4 blocks, 32 warps.
        ("7.0", 256, 16, 20000, None, 4, 32, ("shared memory",)),
        # CC 9.0, 64 threads, 7,000 B: 8,024 -> 8,064 (= 63 x 128); 233,472 // 8,064 = 28;
        # warps 32, blocks 32.  -> 28 blocks, 56 warps.  (Without the 1 KB reservation it
        # would be 7,040 B -> 33 -> the block limit 32.)
        ("9.0", 64, 16, 7000, None, 28, 56, ("shared memory",)),
        # CC 8.7 (164 KB, 48 warps), 128 threads, 40,000 B: 41,024 -> 41,088 (= 321 x 128);
        # 167,936 // 41,088 = 4; warps 12; regs 16.  -> 4 blocks, 16 warps.
        ("8.7", 128, 32, 40000, None, 4, 16, ("shared memory",)),
        # CC 8.6 (100 KB), same kernel: 102,400 // 41,088 = 2 -> 2 blocks, 8 warps.
        ("8.6", 128, 32, 40000, None, 2, 8, ("shared memory",)),
        # CC 9.0, 227 KB, the opt-in maximum: 232,448 + 1,024 = 233,472 = the whole SM -> 1.
        ("9.0", 128, 32, 227 * KB, None, 1, 4, ("shared memory",)),
        # CC 8.6, 99 KB (opt-in maximum) -> 101,376 + 1,024 = 102,400 -> 1 block.
        ("8.6", 128, 32, 99 * KB, None, 1, 4, ("shared memory",)),
        # -- carveouts ----------------------------------------------------------------------
        # CC 9.0, carveout 50 %: 50 x 233,472 // 100 = 116,736 -> rounded up to the legal
        # 132 KB = 135,168.  30,000 B -> 31,024 -> 31,104 (= 243 x 128); 135,168 // 31,104 = 4.
        ("9.0", 256, 32, 30000, 50, 4, 32, ("shared memory",)),
        # ... the same kernel with the default carveout: 233,472 // 31,104 = 7.
        ("9.0", 256, 32, 30000, None, 7, 56, ("shared memory",)),
        # CC 9.0, carveout 0 %: 0 bytes preferred, but every block needs its 1 KB reservation,
        # so the SM gets the smallest legal size that holds one, 8 KB: 8,192 // 1,024 = 8.
        ("9.0", 64, 16, 0, 0, 8, 16, ("shared memory",)),
        # CC 8.0, carveout 25 %: 25 x 167,936 // 100 = 41,984 -> 64 KB; 16,000 B -> 17,024
        # (= 133 x 128); 65,536 // 17,024 = 3.
        ("8.0", 128, 32, 16000, 25, 3, 12, ("shared memory",)),
        # CC 7.5, carveout 0 %: Turing's smallest size is 32 KB; 8,192 B -> 32,768 // 8,192 = 4;
        # warps 32 // 4 = 8.  -> 4 blocks, 16 of 32 warps.
        ("7.5", 128, 16, 8 * KB, 0, 4, 16, ("shared memory",)),
        # ... default (64 KB): 65,536 // 8,192 = 8 = warps 8 (tie).
        ("7.5", 128, 16, 8 * KB, None, 8, 32, ("warps", "shared memory")),
        # CC 9.0, carveout 10 %: 23,347 -> 32 KB cannot hold 40,000 + 1,024 -> 41,088 B, so
        # the SM gets the next legal size, 64 KB: 65,536 // 41,088 = 1.
        ("9.0", 128, 32, 40000, 10, 1, 4, ("shared memory",)),
        # CC 9.0, carveout 100 % is the maximum, as the default.
        ("9.0", 256, 32, 30000, 100, 7, 56, ("shared memory",)),
        # CC 7.0, carveout 5 %: 5 x 98,304 // 100 = 4,915 -> 8 KB; 2,000 B -> 2,048;
        # 8,192 // 2,048 = 4.
        ("7.0", 64, 16, 2000, 5, 4, 8, ("shared memory",)),
    ],
)
def test_hand_derived(cc, threads, regs, smem, carveout, blocks, warps, limiters):
    r = occupancy(cc=cc, threads_per_block=threads, registers_per_thread=regs,
                  shared_mem_per_block=smem, carveout=carveout)
    assert (r.blocks_per_sm, r.warps_per_sm, r.limiters) == (blocks, warps, limiters)
    assert r.limiter == limiters[0]
    assert r.occupancy == pytest.approx(warps / compute_capability(cc).max_warps_per_sm)


def test_reported_intermediates_hand_derived():
    # CC 9.0, 30,000 B at carveout 50 % (derivation above): 31,104 B per block, SM 132 KB;
    # 40 regs -> 1,280 per warp, x 8 warps = 10,240 per block.
    r = occupancy(cc="9.0", threads_per_block=256, registers_per_thread=40,
                  shared_mem_per_block=30000, carveout=50)
    assert r.shared_mem_allocated == 31104
    assert r.sm_shared_mem == 132 * KB
    assert r.registers_per_warp == 1280
    assert r.registers_per_block == 10240
    assert r.limits == {"warps": 8, "registers": 6, "shared memory": 4, "blocks": 32}
    # default carveout: the largest size, 228 KB
    assert occupancy(cc="9.0", threads_per_block=256, registers_per_thread=40).sm_shared_mem \
        == 228 * KB


def test_unused_resources_are_unlimited():
    # no registers, and no shared memory on CC 7.x (no reservation): nothing to run out of
    r = occupancy(cc="7.0", threads_per_block=64, registers_per_thread=0)
    assert r.limits["registers"] == UNLIMITED
    assert r.limits["shared memory"] == UNLIMITED
    assert r.blocks_per_sm == 32
    # on CC >= 8.0 the 1 KB reservation always takes room
    assert occupancy(cc="8.0", threads_per_block=64, registers_per_thread=0).limits[
        "shared memory"] == 164


# -- launch failures: 0 blocks, with the reason -------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "limiter", "words"),
    [
        # 256 registers/thread: above the 255 a thread can have
        (dict(cc="9.0", threads_per_block=32, registers_per_thread=256), "registers", "255"),
        # CC 8.0, 255 regs, 288 threads: W = 9 -> roundup(9, 4) = 12 warps x 8,192 = 98,304
        # > 65,536 registers per block
        (dict(cc="8.0", threads_per_block=288, registers_per_thread=255), "registers",
         "sub-partitions"),
        # CC 9.0, 1024 threads x 65 regs: 65 x 32 = 2,080 -> 2,304; 32 x 2,304 = 73,728
        (dict(cc="9.0", threads_per_block=1024, registers_per_thread=65), "registers",
         "sub-partitions"),
        # CC 9.0, one byte over the opt-in maximum: 232,449 + 1,024 -> 233,600 > 233,472
        (dict(cc="9.0", threads_per_block=128, registers_per_thread=32,
              shared_mem_per_block=227 * KB + 1), "shared memory", "per-block maximum"),
        # CC 8.6: 99 KB + 1 B
        (dict(cc="8.6", threads_per_block=128, registers_per_thread=32,
              shared_mem_per_block=99 * KB + 1), "shared memory", "per-block maximum"),
        # CC 7.0: 96 KB + 1 B -> 98,560 > 98,304
        (dict(cc="7.0", threads_per_block=128, registers_per_thread=32,
              shared_mem_per_block=96 * KB + 1), "shared memory", "per-block maximum"),
        # above 48 KB without opting in: 48 KB + 1 + 1 KB -> 50,304 > 50,176
        (dict(cc="8.6", threads_per_block=128, registers_per_thread=32,
              shared_mem_per_block=48 * KB + 1, opt_in=False), "shared memory", "opting in"),
    ],
)
def test_launch_failures_give_zero_blocks_and_say_why(kwargs, limiter, words):
    r = occupancy(**kwargs)
    assert r.blocks_per_sm == 0
    assert r.warps_per_sm == 0
    assert r.occupancy == 0.0
    assert r.limiter == limiter
    assert words in r.note
    assert "cannot launch" in repr(r)


def test_exactly_48_kb_needs_no_opt_in():
    # 48 KB + 1 KB reserved = 50,176 = the non-opt-in cap (48 KB + reservation)
    r = occupancy(cc="8.6", threads_per_block=128, registers_per_thread=32,
                  shared_mem_per_block=48 * KB, opt_in=False)
    assert r.blocks_per_sm == 2  # 102,400 // 50,176


# -- (4) properties -----------------------------------------------------------------------------

ccs = st.sampled_from(ALL_CCS)
carveouts = st.one_of(st.none(), st.integers(0, 100))


@st.composite
def configs(draw):
    cc = draw(ccs)
    spec = compute_capability(cc)
    return dict(cc=cc, threads_per_block=draw(st.integers(1, 1024)),
                registers_per_thread=draw(st.integers(0, 300)),
                shared_mem_per_block=draw(st.integers(0, spec.shared_per_block_optin + 2048)),
                carveout=draw(carveouts))


@settings(max_examples=150, deadline=None)
@given(configs())
def test_result_invariants(cfg):
    r = occupancy(**cfg)
    spec = compute_capability(cfg["cc"])
    w = math.ceil(cfg["threads_per_block"] / 32)
    assert 0.0 <= r.occupancy <= 1.0
    assert r.warps_per_sm == r.blocks_per_sm * w <= spec.max_warps_per_sm
    assert r.blocks_per_sm == min(r.limits.values()) <= spec.max_blocks_per_sm
    assert r.limiter == r.limiters[0] and set(r.limiters) <= set(LIMITS)
    assert all(r.limits[name] == r.blocks_per_sm for name in r.limiters)
    # physical budgets: the resident warps' registers fit in the register file, the resident
    # blocks' shared memory fits in the SM's capacity, and that capacity is a legal carveout
    assert r.warps_per_sm * r.registers_per_warp <= spec.registers_per_sm
    assert r.blocks_per_sm * r.shared_mem_allocated <= r.sm_shared_mem
    assert r.sm_shared_mem in spec.sm_shared_sizes
    assert r.registers_per_warp % 256 == 0 and r.shared_mem_allocated % spec.shared_unit == 0


@settings(max_examples=100, deadline=None)
@given(configs(), st.integers(1, 64))
def test_more_registers_never_raise_occupancy(cfg, extra):
    before = occupancy(**cfg)
    after = occupancy(**{**cfg, "registers_per_thread": cfg["registers_per_thread"] + extra})
    assert after.occupancy <= before.occupancy


@settings(max_examples=100, deadline=None)
@given(configs(), st.integers(1, 64 * KB))
def test_more_shared_memory_never_raises_occupancy(cfg, extra):
    before = occupancy(**cfg)
    after = occupancy(**{**cfg, "shared_mem_per_block": cfg["shared_mem_per_block"] + extra})
    assert after.occupancy <= before.occupancy


@settings(max_examples=100, deadline=None)
@given(configs())
def test_registers_matter_only_in_steps_of_eight(cfg):
    # 256-register allocation unit / 32 lanes = 8 registers per thread: 33..40 cost the same
    regs = cfg["registers_per_thread"]
    if regs > 248:
        return
    rounded = {**cfg, "registers_per_thread": -(-regs // 8) * 8}
    assert occupancy(**cfg).blocks_per_sm == occupancy(**rounded).blocks_per_sm


@settings(max_examples=100, deadline=None)
@given(configs())
def test_default_carveout_is_the_best_carveout(cfg):
    # the driver's default gives at least as many blocks as any explicit preference
    default = occupancy(**{**cfg, "carveout": None}).blocks_per_sm
    assert all(occupancy(**{**cfg, "carveout": p}).blocks_per_sm <= default
               for p in (0, 25, 50, 75, 100))


# -- curves ------------------------------------------------------------------------------------

def test_register_curve_breakpoints_hand_derived():
    # CC 9.0, 256-thread blocks (W = 8).  regs -> registers/warp -> warps per sub-partition
    # -> warps/SM -> blocks:  32 -> 1,024 -> 16 -> 64 -> 8 (100 %);  33..40 -> 1,280 -> 12 ->
    # 48 -> 6 (75 %);  41..48 -> 1,536 -> 10 -> 40 -> 5 (62.5 %);  49..64 -> 1,792/2,048 ->
    # 9/8 -> 36/32 -> 4 (50 %);  65..72 -> 2,304 -> 7 -> 28 -> 3 (37.5 %);  128 -> 4,096 ->
    # 4 -> 16 -> 2 (25 %);  255 -> 8,192 -> 2 -> 8 -> 1 (12.5 %).
    c = occupancy_vs_registers(cc="9.0", threads_per_block=256)
    assert c.x[0] == 1 and c.x[-1] == 255 and len(c) == 255
    expected = {1: 1.0, 32: 1.0, 33: 0.75, 40: 0.75, 41: 0.625, 48: 0.625, 49: 0.5, 64: 0.5,
                65: 0.375, 72: 0.375, 128: 0.25, 255: 0.125}
    for regs, occ in expected.items():
        assert c.occupancy[regs - 1] == pytest.approx(occ), regs
    assert c.limiter[39] == "registers" and c.limiter[0] == "warps"


def test_block_size_curve_contains_the_best_practices_points():
    c = occupancy_vs_block_size(cc="7.0", registers_per_thread=37)
    assert list(c.x[:3]) == [32, 64, 96] and c.x[-1] == 1024 and len(c) == 32
    by_size = dict(zip(c.x.tolist(), c.occupancy.tolist(), strict=True))
    assert by_size[128] == pytest.approx(0.75)      # BPG 11.1.1
    assert by_size[320] == pytest.approx(0.625)     # BPG 11.1.1 ("63%")
    # 1024 threads x 37 regs: W = 32 -> 32 x 1,280 = 40,960 fits; 48 // 32 = 1 block
    assert by_size[1024] == pytest.approx(0.5)


def test_shared_memory_curve_drop_hand_derived():
    # CC 8.0, 256 threads, 32 regs: 8 blocks until floor(167,936 / p) < 8, i.e. p > 20,992.
    # p = roundup(x + 1,024, 128): x = 19,968 -> 20,992 (8 blocks); x = 20,096 -> 21,120 (7).
    c = occupancy_vs_shared_mem(cc="8.0", threads_per_block=256, registers_per_thread=32)
    assert c.x[0] == 0 and c.x[-1] == 163 * KB and np.all(np.diff(c.x) == 128)
    blocks = dict(zip(c.x.tolist(), c.blocks_per_sm.tolist(), strict=True))
    assert blocks[19968] == 8 and blocks[20096] == 7
    assert blocks[48 * KB] == 3 and blocks[163 * KB] == 1
    assert c.limiter[-1] == "shared memory"


def test_curves_agree_with_single_calls():
    kw = dict(cc="8.9", carveout=30)
    c = occupancy_vs_shared_mem(threads_per_block=192, registers_per_thread=48, step=1000, **kw)
    for x, blocks in zip(c.x[::7].tolist(), c.blocks_per_sm[::7].tolist(), strict=True):
        assert occupancy(threads_per_block=192, registers_per_thread=48,
                         shared_mem_per_block=x, **kw).blocks_per_sm == blocks
    c = occupancy_vs_block_size(registers_per_thread=100, shared_mem_per_block=5000, **kw)
    for x, warps in zip(c.x.tolist(), c.warps_per_sm.tolist(), strict=True):
        assert occupancy(threads_per_block=x, registers_per_thread=100,
                         shared_mem_per_block=5000, **kw).warps_per_sm == warps


def test_curve_arrays_are_read_only():
    c = occupancy_vs_registers(cc="9.0", threads_per_block=128)
    with pytest.raises(ValueError):
        c.occupancy[0] = 0.0


def test_blocks_per_sm_arrays_hand_derived():
    # M19 (6 blocks), BPG 320 threads on 7.0 would be 4 but here CC 9.0: W = 10, 48 // 10 = 4;
    # 64 regs x 1024 threads -> 1 block; 65 regs x 1024 -> cannot launch (see above)
    got = blocks_per_sm(cc="9.0", threads_per_block=[256, 320, 1024, 1024],
                        registers_per_thread=[40, 37, 64, 65], shared_mem_per_block=0)
    assert got.tolist() == [6, 4, 1, 0]
    grid = blocks_per_sm(gpu="H100", threads_per_block=np.array([[128], [256]]),
                         registers_per_thread=np.array([32, 40, 64]))
    # 128 threads (W = 4): 64 // 4 = 16 -> block limit 32 not reached; 48 // 4 = 12; 32 // 4 = 8
    # 256 threads (W = 8): 8; 6; 4
    assert grid.tolist() == [[16, 12, 8], [8, 6, 4]]


def test_blocks_per_sm_bad_input():
    with pytest.raises(TypeError, match="registers_per_thread"):
        blocks_per_sm(cc="9.0", threads_per_block=256, registers_per_thread=[1.5, 2.0])
    with pytest.raises(ValueError, match="threads_per_block"):
        blocks_per_sm(cc="9.0", threads_per_block=[0, 32], registers_per_thread=32)
    with pytest.raises(ValueError, match="1024"):
        blocks_per_sm(cc="9.0", threads_per_block=[2048], registers_per_thread=32)


# -- (5) bad input -----------------------------------------------------------------------------

BASE = dict(cc="9.0", threads_per_block=256, registers_per_thread=32)


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        (dict(threads_per_block=0), ValueError, "threads_per_block"),
        (dict(threads_per_block=-32), ValueError, "threads_per_block"),
        (dict(threads_per_block=1025), ValueError, "1024"),
        (dict(threads_per_block=256.5), TypeError, "threads_per_block"),
        (dict(threads_per_block="256"), TypeError, "threads_per_block"),
        (dict(threads_per_block=True), TypeError, "threads_per_block"),
        (dict(registers_per_thread=-1), ValueError, "registers_per_thread"),
        (dict(registers_per_thread=1.5), TypeError, "registers_per_thread"),
        (dict(shared_mem_per_block=-1), ValueError, "shared_mem_per_block"),
        (dict(carveout=101), ValueError, "carveout"),
        (dict(carveout=-2), ValueError, "carveout"),
        (dict(carveout=50.5), TypeError, "carveout"),
        (dict(cc="9.1"), ValueError, "7.0, 7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 12.0"),
        (dict(cc="hopper"), ValueError, "valid"),
        (dict(cc=None), TypeError, "cc="),
        (dict(cc=[9, 0]), TypeError, "cc"),
        (dict(gpu="H100"), ValueError, "not both"),
        (dict(cc=None, gpu="H9000"), ValueError, "gpu="),
        (dict(opt_in="yes"), TypeError, "opt_in"),
    ],
)
def test_bad_input_raises_a_clear_error(change, error, words):
    with pytest.raises(error, match=None) as info:
        occupancy(**{**BASE, **change})
    assert words in str(info.value)


def test_bad_curve_input_raises():
    with pytest.raises(ValueError, match="threads_per_block"):
        occupancy_vs_registers(cc="9.0", threads_per_block=2048)
    with pytest.raises(ValueError, match="step"):
        occupancy_vs_shared_mem(cc="9.0", threads_per_block=256, registers_per_thread=32,
                                step=0)
    with pytest.raises(ValueError, match="carveout"):
        occupancy_vs_block_size(cc="9.0", registers_per_thread=32, carveout=200)


@pytest.mark.parametrize("spelling", ["9.0", "sm_90", "sm_90a", "SM90", 9.0, (9, 0)])
def test_cc_spellings(spelling):
    assert compute_capability(spelling).cc == "9.0"


def test_carveout_minus_one_means_default():
    a = occupancy(**BASE, shared_mem_per_block=30000, carveout=-1)
    b = occupancy(**BASE, shared_mem_per_block=30000)
    assert (a.blocks_per_sm, a.sm_shared_mem, a.carveout) == (b.blocks_per_sm, b.sm_shared_mem,
                                                              None)


# -- the data file -----------------------------------------------------------------------------

def test_table_matches_the_programming_guide_and_has_sources():
    # CUDA C++ Programming Guide, compute-capability tables: max warps, max blocks, smem/SM max
    # (KB), opt-in (KB)
    facts = {"7.0": (64, 32, 96, 96), "7.5": (32, 16, 64, 64), "8.0": (64, 32, 164, 163),
             "8.6": (48, 16, 100, 99), "8.7": (48, 16, 164, 163), "8.9": (48, 24, 100, 99),
             "9.0": (64, 32, 228, 227), "10.0": (64, 32, 228, 227), "12.0": (48, 24, 100, 99)}
    table = compute_capabilities()
    assert tuple(table) == ALL_CCS
    for cc, (warps, blocks, sm_kb, optin_kb) in facts.items():
        s = table[cc]
        assert (s.max_warps_per_sm, s.max_blocks_per_sm) == (warps, blocks)
        assert (s.max_sm_shared, s.shared_per_block_optin) == (sm_kb * KB, optin_kb * KB)
        assert s.reserved_shared_per_block == (1024 if cc not in ("7.0", "7.5") else 0)
        assert s.shared_unit == (256 if cc.startswith("7.") else 128)
        assert s.registers_per_sm == 65536 and s.register_unit == 256
        assert list(s.sm_shared_sizes) == sorted(s.sm_shared_sizes)
        assert len(s.source) > 40
    # H200 as read with the CUDA runtime (docs/measured/h200.md): 233,472 / 232,448 / 1,024
    h = table["9.0"]
    assert (h.max_sm_shared, h.shared_per_block_optin, h.reserved_shared_per_block) == \
        (233472, 232448, 1024)
    assert [s // KB for s in table["9.0"].sm_shared_sizes] == \
        [0, 8, 16, 32, 64, 100, 132, 164, 196, 228]
    assert [s // KB for s in table["7.5"].sm_shared_sizes] == [32, 64]


def test_repr_and_html_explain_the_binding_limit():
    r = occupancy(cc="9.0", threads_per_block=256, registers_per_thread=40,
                  shared_mem_per_block=4096)
    text = repr(r)
    assert "75 % occupancy" in text and "limited by registers" in text
    assert "registers: 6 blocks/SM  ← binds" in text
    page = r._repr_html_()
    assert page.count("<tr") == 5 and "◀ binds" in page and "1,280" in page


# -- (6) the CUDA runtime on an H200 -----------------------------------------------------------

H200_DATA = Path(__file__).parents[1] / "data" / "h200_occupancy.json"
COLUMNS = ["kernel", "registers_per_thread", "static_smem", "threads_per_block", "dynamic_smem",
           "carveout", "blocks_per_sm"]

# A few rows in the hardware file's schema, derived by hand from the CC 9.0 rules (CC 9.0,
# 228 KB SM, 1 KB reserved, 128 B unit), to exercise the checker until the real file exists.
HAND_FIXTURE = {
    "meta": {"gpu": "hand-derived from the CC 9.0 rules", "cc": "9.0"},
    "columns": COLUMNS,
    "rows": [
        # M19: 40 regs -> 48 warps -> 6 blocks of 256 threads
        ["regs40", 40, 0, 256, 4096, None, 6],
        # 64 regs -> 2,048/warp -> 32 warps -> 1 block of 1024
        ["regs64", 64, 0, 1024, 0, None, 1],
        # 16 regs, 32 threads: the 32-block limit
        ["small", 16, 0, 32, 0, None, 32],
        # static 4 KB + dynamic 3,000 + 1 KB = 8,120 -> 8,192; 233,472 // 8,192 = 28;
        # 64 threads -> warps 32, blocks 32
        ["smem", 16, 4096, 64, 3000, None, 28],
        # carveout 0: the 1 KB reservation needs the 8 KB size -> 8 blocks
        ["carve0", 16, 0, 64, 0, 0, 8],
        # carveout 50 -> 132 KB; 30,000 + 1,024 -> 31,104; 135,168 // 31,104 = 4
        ["carve50", 32, 0, 256, 30000, 50, 4],
        # 227 KB + 1 byte cannot launch
        ["toobig", 32, 0, 128, 227 * KB + 1, None, 0],
    ],
}


def _mismatches(data: dict, scalar_every: int = 1) -> list[str]:
    """Rows whose measured blocks/SM differ from the calculator's, as readable lines.

    Every row goes through the array form (``blocks_per_sm``); every ``scalar_every``-th row
    also through ``occupancy()`` itself, the contract outside code calls.  A negative measured
    value is the runtime's error code: the calculator must then refuse or give 0 blocks.
    """
    assert data["columns"] == COLUMNS, f"unexpected columns {data['columns']}"
    cc = data.get("meta", {}).get("cc", "9.0")
    rows = [dict(zip(COLUMNS, row, strict=True)) for row in data["rows"]]
    out = []

    def report(rec, got, how):
        r = occupancy(cc=cc, threads_per_block=rec["threads_per_block"],
                      registers_per_thread=rec["registers_per_thread"],
                      shared_mem_per_block=rec["static_smem"] + rec["dynamic_smem"],
                      carveout=rec["carveout"])
        out.append(f"{rec}: runtime {rec['blocks_per_sm']}, calculator {got} ({how}; "
                   f"limits {r.limits}, SM shared {r.sm_shared_mem} B, "
                   f"block {r.shared_mem_allocated} B)")

    by_carveout: dict = {}
    for rec in rows:
        if rec["blocks_per_sm"] < 0:
            try:
                got = occupancy(cc=cc, threads_per_block=rec["threads_per_block"],
                                registers_per_thread=rec["registers_per_thread"],
                                shared_mem_per_block=rec["static_smem"] + rec["dynamic_smem"],
                                carveout=rec["carveout"]).blocks_per_sm
            except ValueError:
                continue
            if got != 0:
                out.append(f"{rec}: the runtime refused (error {-rec['blocks_per_sm']}), "
                           f"the calculator gives {got} blocks")
            continue
        by_carveout.setdefault(rec["carveout"], []).append(rec)
    for carveout, group in by_carveout.items():
        got = blocks_per_sm(
            cc=cc, carveout=carveout,
            threads_per_block=[g["threads_per_block"] for g in group],
            registers_per_thread=[g["registers_per_thread"] for g in group],
            shared_mem_per_block=[g["static_smem"] + g["dynamic_smem"] for g in group])
        for rec, blocks in zip(group, got.tolist(), strict=True):
            if blocks != rec["blocks_per_sm"]:
                report(rec, blocks, "blocks_per_sm")
    for rec in rows[::scalar_every]:
        if rec["blocks_per_sm"] < 0:
            continue
        got = occupancy(cc=cc, threads_per_block=rec["threads_per_block"],
                        registers_per_thread=rec["registers_per_thread"],
                        shared_mem_per_block=rec["static_smem"] + rec["dynamic_smem"],
                        carveout=rec["carveout"]).blocks_per_sm
        if got != rec["blocks_per_sm"]:
            report(rec, got, "occupancy()")
    return out


def test_checker_on_hand_fixture():
    assert _mismatches(HAND_FIXTURE) == []


def test_checker_reports_a_wrong_row():
    broken = {**HAND_FIXTURE, "rows": [*HAND_FIXTURE["rows"], ["wrong", 40, 0, 256, 0, None, 7]]}
    found = _mismatches(broken)
    # caught twice: by the array form and by occupancy()
    assert len(found) == 2 and all("runtime 7, calculator 6" in line for line in found)
    refused = {**HAND_FIXTURE, "rows": [["refused", 40, 0, 256, 0, None, -1]]}
    assert len(_mismatches(refused)) == 1


def test_h200_cuda_runtime_agrees_on_every_row():
    if not H200_DATA.exists():
        pytest.skip(f"{H200_DATA.name} not collected yet: it needs an H200 and the CUDA runtime "
                    "(cuOccupancyMaxActiveBlocksPerMultiprocessor)")
    data = json.loads(H200_DATA.read_text())
    assert data["rows"], "the hardware file has no rows"
    # occupancy() itself on every 50th row keeps this test to a second or two
    bad = _mismatches(data, scalar_every=50)
    shown = "\n".join(bad[:40])
    assert not bad, (f"{len(bad)} of {len(data['rows'])} rows differ from the CUDA runtime "
                     f"({data.get('meta')}):\n{shown}")
