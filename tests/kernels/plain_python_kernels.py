"""Kernels written as a Python programmer writes them, each with a NumPy reference.

Plain ``if``/``elif``/``while``, ``and``/``or``/``not``, chained comparisons, guarded conditional
reads, tuple assignment, loops over literal tuples with shuffles, ``+=`` on per-lane values,
``min``/``max``/``abs``, ``math.*``, per-lane ``break``/``continue``/``return``, and the
unsigned built-ins in arithmetic that can go negative.  ``CASES`` maps a name to a
:class:`Case`: the kernel, its inputs, its launch, the outputs NumPy says it must write (written
here from the kernel's intent, not from the translation) and, for kernels calling ``exp``-like
functions, a tolerance in float32 ulps.  Used by tests/kernels/test_plain_python.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Case:
    kernel: Callable
    make: Callable          # rng -> tuple of kernel arguments
    grid: object
    block: object
    expected: Callable      # args -> {parameter index: expected array}
    ulps: int = 0           # 0: bit for bit
    shows: tuple = field(default_factory=tuple)   # C text the translation must contain


def guarded_neighbour(t, x, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        left = x[i - 1] if i > 0 else 0.0
        right = x[i + 1] if i + 1 < n else 0.0
        out[i] = x[i] - 0.5 * (left + right)


def _guarded_neighbour(x, out, n):
    left = np.concatenate([[0], x[:n - 1]]).astype(np.float32)
    right = np.concatenate([x[1:n], [0]]).astype(np.float32)
    r = out.copy()
    r[:n] = x[:n] - np.float32(0.5) * (left + right)
    return {1: r}


def early_return(t, x, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i >= n:
        return
    out[i] = x[i] * 2.0 + 1.0


def _early_return(x, out, n):
    r = out.copy()
    r[:n] = x[:n] * np.float32(2) + np.float32(1)
    return {1: r}


def window(t, x, out, lo, hi):
    i = t.thread_idx.x
    v = x[i]
    inside = lo < v <= hi and not v == 0.5  # noqa: SIM201 - `not` on a per-lane condition
    if inside or i == 0:
        out[i] = 1.0
    elif v < lo and i % 2 == 1:
        out[i] = -1.0
    else:
        out[i] = 0.0


def _window(x, out, lo, hi):
    i = np.arange(len(x))
    inside = (lo < x) & (x <= hi) & ~(x == 0.5)
    r = np.where(inside | (i == 0), 1.0, np.where((x < lo) & (i % 2 == 1), -1.0, 0.0))
    return {1: r.astype(np.float32)}


def sort_pairs(t, x, out):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    a, b = x[2 * i], x[2 * i + 1]
    if a > b:
        a, b = b, a
    out[2 * i] = a
    out[2 * i + 1] = b


def _sort_pairs(x, out):
    pairs = x.reshape(-1, 2)
    return {1: np.stack([pairs.min(1), pairs.max(1)], 1).reshape(-1)}


def warp_sums(t, x, out):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    v = x[i]
    for d in (16, 8, 4, 2, 1):
        v += t.shfl_down(v, d)
    if t.lane == 0:
        out[i // 32] = v


def _warp_sums(x, out):
    # the shuffle tree's own order: v[l] += v[l + d] for d = 16, 8, 4, 2, 1 (lanes past 31 keep
    # their own value)
    v = x.reshape(-1, 32).copy()
    for d in (16, 8, 4, 2, 1):
        src = np.where(np.arange(32) + d < 32, np.arange(32) + d, np.arange(32))
        v = v + v[:, src]
    return {1: v[:, 0].astype(np.float32)}


def warp_max(t, x, out):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    v = x[i]
    for m in [1, 2, 4, 8, 16]:
        v = max(v, t.shfl_xor(v, m))
    out[i] = v


def _warp_max(x, out):
    return {1: np.repeat(x.reshape(-1, 32).max(1), 32)}


def rank(t, x, out, n):
    i = t.thread_idx.x
    count = 0
    for j in range(n):
        if x[j] < x[i] or (x[j] == x[i] and j < i):
            count += 1
    out[count] = x[i]


def _rank(x, out, n):
    return {1: np.sort(x[:n], kind="stable")}


def first_negative(t, x, out, n):
    i = t.thread_idx.x
    found = -1
    j = 0
    while j < n:
        if x[(i + j) % n] < 0:
            found = j
            break
        j += 1
    out[i] = found


def _first_negative(x, out, n):
    r = np.full(len(out), -1, np.int32)
    for i in range(len(out)):
        for j in range(n):
            if x[(i + j) % n] < 0:
                r[i] = j
                break
    return {1: r}


def collatz(t, a, out):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    v = a[i]
    steps = 0
    while v != 1:
        if v % 2 == 0:
            v //= 2
        else:
            v = 3 * v + 1
        steps += 1
    out[i] = steps


def _collatz(a, out):
    r = np.zeros(len(a), np.int32)
    for k, v in enumerate(a.tolist()):
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            r[k] += 1
    return {1: r}


def exact_math(t, x, out):
    i = t.thread_idx.x
    v = x[i]
    out[i] = math.sqrt(abs(v)) + math.floor(v) * 0.25 + math.ceil(v) + math.trunc(-v) \
        + math.fabs(v - 1.0)


def _exact_math(x, out):
    v = x
    return {1: (np.sqrt(np.abs(v)) + np.floor(v) * np.float32(0.25) + np.ceil(v) + np.trunc(-v)
                + np.fabs(v - np.float32(1))).astype(np.float32)}


def transcendental(t, x, out):
    i = t.thread_idx.x
    v = x[i]
    out[i] = math.exp(-v * v) + math.tanh(v) + math.log(1.0 + abs(v)) + math.sin(v) * math.cos(v)


def _transcendental(x, out):
    v = x.astype(np.float64)
    return {1: (np.exp(-v * v) + np.tanh(v) + np.log1p(np.abs(v))
                + np.sin(v) * np.cos(v)).astype(np.float32)}


def unsigned_builtins(t, x, f64, i64, i32, n):
    i = t.thread_idx.x
    f64[i] = (t.thread_idx.x - 5) * 0.5
    i64[i] = t.thread_idx.x - 5
    x[i] = t.where(t.thread_idx.x > n, 1.0, 0.0) + (2.0 if t.thread_idx.x < n + 3 else 0.0)
    i32[i] = (-t.thread_idx.x) // 3 + (t.thread_idx.x - 7) % 5 * 10 + min(t.thread_idx.x, n) * 100 \
        + (t.block_dim.x - 40 > 0) * 1000


def _unsigned_builtins(x, f64, i64, i32, n):
    i = np.arange(len(x))
    return {0: (np.where(i > n, 1.0, 0.0) + np.where(i < n + 3, 2.0, 0.0)).astype(np.float32),
            1: (i - 5) * 0.5, 2: (i - 5).astype(np.int64),
            3: ((-i) // 3 + (i - 7) % 5 * 10 + np.minimum(i, n) * 100
                + (len(x) - 40 > 0) * 1000).astype(np.int32)}


def clamp_mix(t, x, out):
    i = t.thread_idx.x
    v = x[i]
    out[i] = min(v, 0.5) + max(v, -0.5, v * 2.0) + abs(v) - min(i, 7) + max(3, i - 20)


def _clamp_mix(x, out):
    i = np.arange(len(x))
    v = x
    r = (np.minimum(v, np.float32(0.5)) + np.maximum(np.maximum(v, np.float32(-0.5)), v * 2)
         + np.abs(v) - np.minimum(i, 7) + np.maximum(3, i - 20))
    return {1: r.astype(np.float32)}


def prefix_until(t, x, out, n):
    i = t.thread_idx.x
    acc = 0.0
    for j in range(n):
        if x[j] < 0:
            continue
        if j > i:
            break
        acc += x[j]
    out[i] = acc


def _prefix_until(x, out, n):
    r = np.zeros(len(out), np.float32)
    for i in range(len(out)):
        acc = np.float32(0)
        for j in range(min(i + 1, n)):
            if x[j] >= 0:
                acc = np.float32(acc + x[j])
        r[i] = acc
    return {1: r}


def classify(t, x, out):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    v = x[i]
    if v < -1:
        c = 0
    elif v < 0:
        c = 1
    elif v < 1:
        c = 2
    else:
        c = 3
    out[i] = c * 10 + (1 if -0.5 <= v < 0.5 else 0)


def _classify(x, out):
    c = np.select([x < -1, x < 0, x < 1], [0, 1, 2], 3)
    return {1: (c * 10 + ((x >= -0.5) & (x < 0.5))).astype(np.int32)}


def wide_index(t, x, out, n):
    i = np.int64(t.block_idx.x) * t.block_dim.x + t.thread_idx.x
    big = np.int64(n) * n
    if i < len(out):
        out[i] = (big + i * x[i]) % 1000003


def _wide_index(x, out, n):
    i = np.arange(len(out), dtype=np.int64)
    return {1: (np.int64(n) * n + i * x.astype(np.int64)) % 1000003}


def is_max(t, x, out, n):
    i = t.thread_idx.x
    out[i] = 0
    for j in range(n):
        if x[j] > x[i]:
            return
    out[i] = 1


def _is_max(x, out, n):
    return {1: (x[:len(out)] >= x[:n].max()).astype(np.int32)}


def fibonacci(t, k, out):
    i = t.thread_idx.x
    a, b = 0, 1
    j = 0
    while j < k[i]:
        a, b = b, a + b
        j += 1
    out[i] = a


def _fibonacci(k, out):
    r = []
    for m in k.tolist():
        a, b = 0, 1
        for _ in range(m):
            a, b = b, a + b
        r.append(a)
    return {1: np.array(r, np.int32)}


def _f32(rng, n, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, n).astype(np.float32)


CASES = {
    "guarded_neighbour": Case(guarded_neighbour, lambda r: (_f32(r, 64), np.zeros(64, np.float32),
                                                             50), 2, 32, lambda a: _guarded_neighbour(*a),
                              shows=("i > 0 ? x[i - 1] : 0.0f",)),
    "early_return": Case(early_return, lambda r: (_f32(r, 64), np.zeros(64, np.float32), 45), 2,
                         32, lambda a: _early_return(*a), shows=("return;",)),
    "window": Case(window, lambda r: (np.round(_f32(r, 32) * 4) / 4, np.zeros(32, np.float32),
                                      -0.5, 1.0), 1, 32, lambda a: _window(*a),
                   shows=("&&", "||", "} else if (")),
    "sort_pairs": Case(sort_pairs, lambda r: (_f32(r, 128), np.zeros(128, np.float32)), 2, 32,
                       lambda a: _sort_pairs(*a)),
    "warp_sums": Case(warp_sums, lambda r: (np.round(_f32(r, 64) * 8), np.zeros(2, np.float32)),
                      1, 64, lambda a: _warp_sums(*a), shows=("#pragma unroll",
                                                              "__shfl_down_sync(0xffffffff, v, d)")),
    "warp_max": Case(warp_max, lambda r: (_f32(r, 64), np.zeros(64, np.float32)), 2, 32,
                     lambda a: _warp_max(*a), shows=("__shfl_xor_sync",)),
    "rank": Case(rank, lambda r: (np.round(_f32(r, 32) * 3), np.zeros(32, np.float32), 32), 1, 32,
                 lambda a: _rank(*a), shows=("count += 1;",)),
    "first_negative": Case(first_negative, lambda r: (_f32(r, 40, -0.3, 2.0),
                                                      np.zeros(32, np.int32), 40), 1, 32,
                           lambda a: _first_negative(*a), shows=("break;",)),
    "collatz": Case(collatz, lambda r: (r.integers(1, 60, 64).astype(np.int32),
                                        np.zeros(64, np.int32)), 2, 32, lambda a: _collatz(*a)),
    "exact_math": Case(exact_math, lambda r: (_f32(r, 32, -5, 5), np.zeros(32, np.float32)), 1, 32,
                       lambda a: _exact_math(*a), shows=("sqrtf(fabsf(v))", "floorf(v)")),
    "transcendental": Case(transcendental, lambda r: (_f32(r, 32), np.zeros(32, np.float32)), 1,
                           32, lambda a: _transcendental(*a), ulps=8, shows=("expf(", "tanhf(")),
    "unsigned_builtins": Case(unsigned_builtins, lambda r: (np.zeros(64, np.float32),
                                                            np.zeros(64, np.float64),
                                                            np.zeros(64, np.int64),
                                                            np.zeros(64, np.int32), -1), 1, 64,
                              lambda a: _unsigned_builtins(*a),
                              shows=("((int)threadIdx.x - 5) * 0.5", "(int)threadIdx.x > n")),
    "clamp_mix": Case(clamp_mix, lambda r: (_f32(r, 64), np.zeros(64, np.float32)), 1, 64,
                      lambda a: _clamp_mix(*a)),
    "prefix_until": Case(prefix_until, lambda r: (_f32(r, 32, -1, 2), np.zeros(32, np.float32), 32),
                         1, 32, lambda a: _prefix_until(*a), shows=("continue;", "break;")),
    "classify": Case(classify, lambda r: (_f32(r, 64), np.zeros(64, np.int32)), 2, 32,
                     lambda a: _classify(*a)),
    "wide_index": Case(wide_index, lambda r: (r.integers(0, 1000, 64).astype(np.int32),
                                              np.zeros(64, np.int64), 100_000), 2, 32,
                       lambda a: _wide_index(*a), shows=("long long i = (long long)blockIdx.x",
                                                         "(long long)n * n")),
    "is_max": Case(is_max, lambda r: (_f32(r, 32), np.zeros(32, np.int32), 32), 1, 32,
                   lambda a: _is_max(*a)),
    "fibonacci": Case(fibonacci, lambda r: (r.integers(0, 30, 32).astype(np.int32),
                                            np.zeros(32, np.int32)), 1, 32,
                      lambda a: _fibonacci(*a)),
}
