"""Asynchronous copies (``t.copy_async``, ``t.commit``, ``t.wait``): a double-buffered matrix
product whose tiles travel from global to shared memory without registers computes NumPy's
product in the simulator and, translated, on the CPU (g++) bit for bit; NVRTC makes LDGSTS of
them for sm_80 and sm_90; a read of a copy that has not landed, or of one landed without the
barrier after it, is reported; the forms the hardware cannot take are refused."""

import cuda_cpu as cpu
import numpy as np
import pytest

from gpu_lessons.kernels import KernelLanguageError, compile, nvrtc, run, to_cuda, validate
from gpu_lessons.kernels.simt import KernelError

needs_nvrtc = pytest.mark.skipif(nvrtc.newest_library() is None,
                                 reason="NVRTC is not installed (the test extra brings it)")


def staged_product(t, a, b, c, m, n, k):
    """c = a @ b, 64 x 64 per block of 64 threads (8 x 8 each), k in tiles of 8: each tile is
    copied into the other stage while this one is computed, one barrier a tile."""
    sa = t.shared((2, 64, 8), np.float32)
    sb = t.shared((2, 8, 64), np.float32)
    acc = t.local((8, 8), np.float32)
    tid = t.thread_idx.x
    ty = tid // 8                      # rows ty + 8 r, columns tx + 8 q
    tx = tid % 8
    row0 = t.block_idx.y * 64
    col0 = t.block_idx.x * 64
    for p in range(2):                 # 64 x 8 of a and 8 x 64 of b: 2 float4s a thread each
        f = tid + 64 * p
        t.copy_async(sa, (0, f // 2, f % 2 * 4), a, (row0 + f // 2) * k + f % 2 * 4, 4)
        t.copy_async(sb, (0, f // 16, f % 16 * 4), b, (f // 16) * n + col0 + f % 16 * 4, 4)
    t.commit()
    for k0 in range(0, k, 8):
        s = k0 // 8 % 2
        t.wait(0)                      # this thread's copies of tile k0 have landed ...
        t.sync()                       # ... and everyone's; stage 1 - s is no longer read
        if k0 + 8 < k:
            for p in range(2):
                f = tid + 64 * p
                t.copy_async(sa, (1 - s, f // 2, f % 2 * 4), a,
                             (row0 + f // 2) * k + k0 + 8 + f % 2 * 4, 4)
                t.copy_async(sb, (1 - s, f // 16, f % 16 * 4), b,
                             (k0 + 8 + f // 16) * n + col0 + f % 16 * 4, 4)
        t.commit()
        for kk in range(8):
            for r in range(8):
                for q in range(8):
                    acc[r, q] += sa[s, ty + 8 * r, kk] * sb[s, kk, tx + 8 * q]
    for r in range(8):
        for q in range(8):
            c[(row0 + ty + 8 * r) * n + col0 + tx + 8 * q] = acc[r, q]


def _args(m, n, k, seed=0, ints=True):
    rng = np.random.default_rng(seed)
    if ints:
        a = rng.integers(-4, 5, m * k).astype(np.float32)
        b = rng.integers(-4, 5, k * n).astype(np.float32)
    else:
        a = rng.standard_normal(m * k).astype(np.float32)
        b = rng.standard_normal(k * n).astype(np.float32)
    return a, b, np.full(m * n, np.nan, np.float32), m, n, k


@pytest.mark.parametrize("m, n, k", [(64, 64, 32), (128, 64, 8), (64, 128, 16)])
def test_the_staged_product_is_numpy_s_and_its_tiles_take_no_store_instructions(m, n, k):
    a, b, c, *_ = args = _args(m, n, k)
    r = run(staged_product, (n // 64, m // 64), 64, *args, max_instructions=10**6)
    np.testing.assert_array_equal(c.reshape(m, n), a.reshape(m, k) @ b.reshape(k, n))
    loads = [e for e in r.events if e.kind == "ld.global"]
    # every copy is one 16-byte-per-lane request: 32 float4s of a row of b are 16 sectors
    assert {e.width for e in loads} == {4}
    assert all(e.requests == 1 for e in loads)
    assert not [e for e in r.events if e.kind == "st.shared"]     # no registers on the way
    # a commit and a wait per tile, plus the first commit
    copies = sum(e.kind == "cp.async" for e in r.events)   # 2 warps a block
    assert copies == (2 * (k // 8) + 1) * (n // 64) * (m // 64) * 2


def test_reading_a_copy_that_has_not_landed_is_reported_with_its_lines():
    def early(t, x, out):
        s = t.shared(32, np.float32)
        i = t.thread_idx.x
        t.copy_async(s, i, x, i, 1)
        t.commit()
        t.sync()                       # a barrier does not wait for cp.async
        out[i] = s[31 - i]
    with pytest.raises(KernelError, match=r"s\[31\], which the t.copy_async of line \d+ has "
                                          r"not landed in yet: its thread must t.commit\(\) "
                                          r"and t.wait"):
        run(early, 1, 32, np.arange(32, dtype=np.float32), np.zeros(32, np.float32))


def test_a_wait_without_the_barrier_after_it_races():
    def no_barrier(t, x, out):
        s = t.shared(64, np.float32)
        i = t.thread_idx.x
        t.copy_async(s, i, x, i, 1)
        t.commit()
        t.wait(0)                      # this thread's copy only
        out[i] = s[63 - i]             # another warp's copy
    r = run(no_barrier, 1, 64, np.arange(64, dtype=np.float32), np.zeros(64, np.float32))
    assert r.races and r.races[0].array == "s"


def test_wait_one_lets_the_newest_group_stay_in_flight():
    def two_groups(t, x, out):
        s = t.shared((2, 32), np.float32)
        i = t.thread_idx.x
        t.copy_async(s, (0, i), x, i, 1)
        t.commit()
        t.copy_async(s, (1, i), x, 32 + i, 1)
        t.commit()
        t.wait(1)
        t.sync()
        out[i] = s[0, 31 - i]          # landed
        out[32 + i] = s[1, i]          # still in flight
    with pytest.raises(KernelError, match=r"s\[1, 0\], which the t.copy_async"):
        run(two_groups, 1, 32, np.arange(64, dtype=np.float32), np.zeros(64, np.float32))


@pytest.mark.parametrize("body, match", [
    ("t.copy_async(s, i, x, i, 3)", "the width is the number 1, 2 or 4"),
    ("t.copy_async(s, i, x, i, w)", "the width is the number 1, 2 or 4"),
    ("t.wait(w)", "a number written out, 0 or more"),
    ("t.copy_async(s, i, x + 1, i, 1)", "the destination and the source are arrays, by name"),
])
def test_what_the_hardware_cannot_take_is_refused_when_the_kernel_is_read(body, match):
    src = ("def k(t, x, out):\n    s = t.shared(64, np.float32)\n    i = t.thread_idx.x\n"
           f"    w = 4\n    {body}\n    out[i] = 0.0\n")
    with pytest.raises(KernelLanguageError, match=match):
        validate(src)


def test_a_copy_into_global_memory_or_a_misaligned_float4_is_refused_when_it_runs():
    def backwards(t, x, out):
        s = t.shared(64, np.float32)
        i = t.thread_idx.x
        t.copy_async(out, i, s, i, 1)
    with pytest.raises(KernelError, match="destination must be a shared array"):
        run(backwards, 1, 32, np.zeros(64, np.float32), np.zeros(64, np.float32))

    def misaligned(t, x, out):
        s = t.shared(256, np.float32)
        i = t.thread_idx.x
        t.copy_async(s, 4 * i, x, 4 * i + 1, 4)
    with pytest.raises(KernelError, match="not a multiple of 4"):
        run(misaligned, 1, 32, np.zeros(256, np.float32), np.zeros(64, np.float32))


@pytest.mark.skipif(not cpu.available(), reason="g++ is not installed")
def test_the_translation_computes_what_the_simulator_computes():
    # random floats: every rounding of every multiply and add must agree
    a, b, c_sim, m, n, k = _args(128, 64, 16, seed=3, ints=False)
    c_cpu = c_sim.copy()
    run(staged_product, (1, 2), 64, a, b, c_sim, m, n, k, max_instructions=10**6)
    src = to_cuda(staged_product, a, b, c_cpu, m, n, k)
    assert "cp_async<16>(&sa[" in str(src) and "cp_async_wait<0>();" in str(src)
    cpu.run_cpu(src, (1, 2), 64, a, b, c_cpu, m, n, k)
    np.testing.assert_array_equal(c_cpu.view(np.uint32), c_sim.view(np.uint32))


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_makes_ldgsts_and_the_group_barriers(arch):
    ck = compile(staged_product, *_args(64, 64, 32), arch=arch, exact=False)
    sass = [line.text for line in ck.sass]
    assert sum("LDGSTS" in s and ".128" in s for s in sass) >= 4   # 4 float4 copies a tile
    assert any("LDGDEPBAR" in s for s in sass) and any("DEPBAR" in s for s in sass)
    assert ck.local_bytes == 0
