"""Teaching kernels for the SIMT simulator, each also given as CUDA C for a real GPU.

Every kernel exists twice and the two are kept line-for-line equivalent:

* a Python function for :func:`gpu_lessons.kernels.run` (``KERNELS[name]``), and
* CUDA C source for ``cupy.RawKernel(SIMT_CUDA_SOURCES[name], name)`` (``extern "C"``, so the
  name is not mangled); :func:`cuda_launch` gives the grid, block, dynamic shared memory and
  argument order to launch it with.

The kernels and what they show:

``branch_by_parity`` / ``branch_by_warp``
    The same two equal-length paths, chosen by ``threadIdx.x % 2`` (every warp splits in
    half: 50 % SIMT efficiency inside the branch) or by the warp index
    ``threadIdx.x / 32 % 2`` (each warp takes one path whole: 100 %).  ``iters`` lengthens
    both paths (a dependent multiply-add chain) so the cost of divergence shows on a GPU;
    nvcc would turn a one-instruction branch into a select and hide it.
``reduce_interleaved`` / ``reduce_interleaved_strided`` / ``reduce_sequential``
    Kernels 1, 2 and 3 of M. Harris, "Optimizing Parallel Reduction in CUDA" (NVIDIA, 2007):
    interleaved addressing with a divergent ``tid % (2s) == 0`` branch; the same with a
    strided index (no divergence until the last steps, but 2-, 4-, 8-way bank conflicts);
    sequential addressing (neither).  One block sums ``blockDim.x`` values into ``out[block]``.
``reduce_missing_sync``
    Kernel 3 with the ``__syncthreads()`` inside the loop left out: the simulator reports the
    race, and its answer depends on the order the warps run in.
``transpose_naive`` / ``transpose_tiled`` / ``transpose_tiled_padded``
    From M. Harris, "An Efficient Matrix Transpose in CUDA C/C++" (NVIDIA Developer Blog,
    2013): 32x32 tiles, 32x8 threads per block, each thread moving 4 elements.  Naive: reads
    coalesced, writes strided (32 sectors per request).  Tiled: both coalesced through a
    shared tile, but reading a tile column is a 32-way bank conflict.  Padded: a 33-word row
    pitch spreads the column over all banks.

Sizes: reductions need ``n`` a multiple of a power-of-two block size; transposes an ``n x n``
matrix with ``n`` a multiple of 32 (as in the blog post, no edge handling).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import _validate
from ..._format import Readout, Row
from ..._math import cdiv
from .launch import run
from .result import SimResult

TILE = 32        # tile edge of the transposes (threads per block in x)
BLOCK_ROWS = 8   # threads per block in y: each thread moves TILE / BLOCK_ROWS elements


# -- divergence -----------------------------------------------------------------------------------

def branch_by_parity(t, x, out, n, iters):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    v = x[i]
    with t.if_(t.thread_idx.x % 2 == 0, "parity"):
        y = v
        for _ in range(iters):
            y = y * 1.0001 + 0.5
        out[i] = y
    with t.else_():
        y = v
        for _ in range(iters):
            y = y * 0.9999 - 0.5
        out[i] = y


def branch_by_warp(t, x, out, n, iters):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    v = x[i]
    warp_id = t.thread_idx.x // 32
    with t.if_(warp_id % 2 == 0, "by_warp"):
        y = v
        for _ in range(iters):
            y = y * 1.0001 + 0.5
        out[i] = y
    with t.else_():
        y = v
        for _ in range(iters):
            y = y * 0.9999 - 0.5
        out[i] = y


# -- reductions (Harris 2007) ---------------------------------------------------------------------

def reduce_interleaved(t, x, out):
    sdata = t.shared(t.block_dim.x, np.float32, name="sdata")
    tid = t.thread_idx.x
    i = t.block_idx.x * t.block_dim.x + tid
    sdata[tid] = x[i]
    t.sync()
    s = 1
    while s < t.block_dim.x:
        with t.if_(tid % (2 * s) == 0, "add"):
            sdata[tid] += sdata[tid + s]
        t.sync()
        s *= 2
    with t.if_(tid == 0, "write"):
        out[t.block_idx.x] = sdata[0]


def reduce_interleaved_strided(t, x, out):
    sdata = t.shared(t.block_dim.x, np.float32, name="sdata")
    tid = t.thread_idx.x
    i = t.block_idx.x * t.block_dim.x + tid
    sdata[tid] = x[i]
    t.sync()
    s = 1
    while s < t.block_dim.x:
        index = 2 * s * tid
        with t.if_(index < t.block_dim.x, "add"):
            sdata[index] += sdata[index + s]
        t.sync()
        s *= 2
    with t.if_(tid == 0, "write"):
        out[t.block_idx.x] = sdata[0]


def reduce_sequential(t, x, out):
    sdata = t.shared(t.block_dim.x, np.float32, name="sdata")
    tid = t.thread_idx.x
    i = t.block_idx.x * t.block_dim.x + tid
    sdata[tid] = x[i]
    t.sync()
    s = t.block_dim.x // 2
    while s > 0:
        with t.if_(tid < s, "add"):
            sdata[tid] += sdata[tid + s]
        t.sync()
        s //= 2
    with t.if_(tid == 0, "write"):
        out[t.block_idx.x] = sdata[0]


def reduce_missing_sync(t, x, out):
    sdata = t.shared(t.block_dim.x, np.float32, name="sdata")
    tid = t.thread_idx.x
    i = t.block_idx.x * t.block_dim.x + tid
    sdata[tid] = x[i]
    t.sync()
    s = t.block_dim.x // 2
    while s > 0:
        with t.if_(tid < s, "add"):
            sdata[tid] += sdata[tid + s]
        # BUG (on purpose): no t.sync() here, so the next step may read sdata[tid + s]
        # before the warp that owns it has added its own partner.
        s //= 2
    t.sync()
    with t.if_(tid == 0, "write"):
        out[t.block_idx.x] = sdata[0]


# -- transposes (Harris 2013) ---------------------------------------------------------------------

def transpose_naive(t, a, out):
    x = t.block_idx.x * TILE + t.thread_idx.x
    y = t.block_idx.y * TILE + t.thread_idx.y
    for j in range(0, TILE, BLOCK_ROWS):
        out[x, y + j] = a[y + j, x]


def transpose_tiled(t, a, out):
    tile = t.shared((TILE, TILE), np.float32, name="tile")
    x = t.block_idx.x * TILE + t.thread_idx.x
    y = t.block_idx.y * TILE + t.thread_idx.y
    for j in range(0, TILE, BLOCK_ROWS):
        tile[t.thread_idx.y + j, t.thread_idx.x] = a[y + j, x]
    t.sync()
    x = t.block_idx.y * TILE + t.thread_idx.x
    y = t.block_idx.x * TILE + t.thread_idx.y
    for j in range(0, TILE, BLOCK_ROWS):
        out[y + j, x] = tile[t.thread_idx.x, t.thread_idx.y + j]


def transpose_tiled_padded(t, a, out):
    tile = t.shared((TILE, TILE + 1), np.float32, name="tile")
    x = t.block_idx.x * TILE + t.thread_idx.x
    y = t.block_idx.y * TILE + t.thread_idx.y
    for j in range(0, TILE, BLOCK_ROWS):
        tile[t.thread_idx.y + j, t.thread_idx.x] = a[y + j, x]
    t.sync()
    x = t.block_idx.y * TILE + t.thread_idx.x
    y = t.block_idx.x * TILE + t.thread_idx.y
    for j in range(0, TILE, BLOCK_ROWS):
        out[y + j, x] = tile[t.thread_idx.x, t.thread_idx.y + j]


KERNELS = {f.__name__: f for f in (
    branch_by_parity, branch_by_warp,
    reduce_interleaved, reduce_interleaved_strided, reduce_sequential, reduce_missing_sync,
    transpose_naive, transpose_tiled, transpose_tiled_padded)}

BRANCHES = ("branch_by_parity", "branch_by_warp")
REDUCTIONS = ("reduce_interleaved", "reduce_interleaved_strided", "reduce_sequential",
              "reduce_missing_sync")
TRANSPOSES = ("transpose_naive", "transpose_tiled", "transpose_tiled_padded")


# -- the same kernels in CUDA C -------------------------------------------------------------------

_BRANCH_CUDA = r'''
extern "C" __global__ void {name}(const float* x, float* out, int n, int iters)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if ({cond}) {{
        float y = v;
        for (int k = 0; k < iters; ++k) y = y * 1.0001f + 0.5f;
        out[i] = y;
    }} else {{
        float y = v;
        for (int k = 0; k < iters; ++k) y = y * 0.9999f - 0.5f;
        out[i] = y;
    }}
}}
'''

_REDUCE_CUDA = r'''
extern "C" __global__ void {name}(const float* x, float* out)
{{
    extern __shared__ float sdata[];   // blockDim.x floats (dynamic shared memory)
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + tid;
    sdata[tid] = x[i];
    __syncthreads();
{loop}
    if (tid == 0) out[blockIdx.x] = sdata[0];
}}
'''

_REDUCE_LOOPS = {
    "reduce_interleaved": '''\
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }''',
    "reduce_interleaved_strided": '''\
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        unsigned int index = 2 * s * tid;
        if (index < blockDim.x) sdata[index] += sdata[index + s];
        __syncthreads();
    }''',
    "reduce_sequential": '''\
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }''',
    "reduce_missing_sync": '''\
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        // BUG (on purpose): no __syncthreads() here
    }
    __syncthreads();''',
}

_TRANSPOSE_NAIVE_CUDA = r'''
extern "C" __global__ void transpose_naive(const float* a, float* out)
{
    const int TILE = 32, BLOCK_ROWS = 8;
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    int width = gridDim.x * TILE;
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        out[x * width + (y + j)] = a[(y + j) * width + x];
}
'''

_TRANSPOSE_TILED_CUDA = r'''
extern "C" __global__ void {name}(const float* a, float* out)
{{
    const int TILE = 32, BLOCK_ROWS = 8;
    __shared__ float tile[TILE][TILE + {pad}];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    int width = gridDim.x * TILE;
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        tile[threadIdx.y + j][threadIdx.x] = a[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        out[(y + j) * width + x] = tile[threadIdx.x][threadIdx.y + j];
}}
'''

#: CUDA C source of every kernel in :data:`KERNELS`, keyed by the same name.
SIMT_CUDA_SOURCES = {
    "branch_by_parity": _BRANCH_CUDA.format(name="branch_by_parity",
                                            cond="threadIdx.x % 2 == 0"),
    "branch_by_warp": _BRANCH_CUDA.format(name="branch_by_warp",
                                          cond="(threadIdx.x / 32) % 2 == 0"),
    **{name: _REDUCE_CUDA.format(name=name, loop=loop) for name, loop in _REDUCE_LOOPS.items()},
    "transpose_naive": _TRANSPOSE_NAIVE_CUDA,
    "transpose_tiled": _TRANSPOSE_TILED_CUDA.format(name="transpose_tiled", pad=0),
    "transpose_tiled_padded": _TRANSPOSE_TILED_CUDA.format(name="transpose_tiled_padded",
                                                           pad=1),
}


# -- launching and checking -----------------------------------------------------------------------

@dataclass(frozen=True)
class Launch:
    """How to launch one teaching kernel on ``n`` elements (or an n x n matrix).

    ``args``: the argument names in order; ``inputs``: NumPy arrays for them (float32 data,
    outputs zeroed, scalars as Python ints); ``expected``: what ``out`` must hold afterwards
    (NumPy's answer); ``shared_bytes``: dynamic shared memory for the CUDA launch.
    """

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[str, ...]
    inputs: tuple
    expected: np.ndarray


def cuda_launch(name: str, n: int | None = None, *, block: int = 256, iters: int = 1,
                seed: int = 0) -> Launch:
    """Grid, block, shared memory, inputs and NumPy's expected output for kernel ``name``.

    Defaults: n = 256 for the branches and reductions (one block of 256), n = 64 for the
    transposes (a 64 x 64 matrix, 2 x 2 blocks of 32 x 8 threads).  Inputs are small
    integers stored as float32, so every sum is exact and reductions can be compared with
    ``==``.
    """
    _validate.choice("name", name, KERNELS)
    rng = np.random.default_rng(_validate.integer("seed", seed, low=0))
    if name in TRANSPOSES:
        n = 64 if n is None else _validate.integer("n", n, low=TILE)
        if n % TILE:
            raise ValueError(f"n={n}: the transposes handle n x n matrices with n a multiple "
                             f"of {TILE} (they have no edge handling)")
        a = rng.integers(0, 100, size=(n, n)).astype(np.float32)
        return Launch(name, (n // TILE, n // TILE, 1), (TILE, BLOCK_ROWS, 1), 0,
                      ("a", "out"), (a, np.zeros((n, n), np.float32)), a.T.copy())
    block = _validate.integer("block", block, low=32, high=1024)
    if name in REDUCTIONS:
        if block & (block - 1):
            raise ValueError(f"block={block}: the reductions halve the block each step, so "
                             f"the block size must be a power of two (32, 64, ..., 1024)")
        n = block if n is None else _validate.integer("n", n, low=block)
        if n % block:
            raise ValueError(f"n={n} must be a multiple of block={block}: each block sums "
                             f"exactly block values (Harris's kernels have no bounds check)")
        x = rng.integers(0, 10, size=n).astype(np.float32)
        return Launch(name, (n // block, 1, 1), (block, 1, 1), block * 4, ("x", "out"),
                      (x, np.zeros(n // block, np.float32)),
                      x.reshape(-1, block).sum(axis=1, dtype=np.float32))
    n = 256 if n is None else _validate.integer("n", n, low=1)
    iters = _validate.integer("iters", iters, low=0, high=10_000)
    x = rng.integers(0, 100, size=n).astype(np.float32)
    idx = np.arange(n) % block
    even = (idx % 2 == 0) if name == "branch_by_parity" else (idx // 32 % 2 == 0)
    ya, yb = x.copy(), x.copy()
    for _ in range(iters):  # float32 throughout, as the kernel computes it
        ya = ya * np.float32(1.0001) + np.float32(0.5)
        yb = yb * np.float32(0.9999) - np.float32(0.5)
    return Launch(name, (cdiv(n, block), 1, 1), (block, 1, 1), 0, ("x", "out", "n", "iters"),
                  (x, np.zeros(n, np.float32), n, iters), np.where(even, ya, yb))


@dataclass(frozen=True, repr=False)
class KernelRun(Readout):
    """A teaching kernel run in the simulator: the record, the output and NumPy's answer."""

    name: str
    sim: SimResult
    output: np.ndarray
    expected: np.ndarray

    @property
    def correct(self) -> bool:
        return bool(np.array_equal(self.output, self.expected))

    def readout_title(self) -> str:
        return self.sim.readout_title()

    def readout_rows(self) -> tuple[Row, ...]:
        if self.correct:
            verdict = "matches NumPy"
        else:
            wrong = int(np.count_nonzero(self.output != self.expected))
            verdict = f"DIFFERS from NumPy in {wrong:,} of {self.output.size:,} values"
        return (*self.sim.readout_rows(), Row("output", verdict))


def simulate(name: str, n: int | None = None, *, block: int = 256, iters: int = 1,
             order="ascending", seed: int = 0) -> KernelRun:
    """Run teaching kernel ``name`` in the simulator on the inputs :func:`cuda_launch` makes.

    >>> r = simulate("reduce_sequential")
    >>> r.correct, r.sim.bank_conflicts
    (True, 0)
    """
    launch = cuda_launch(name, n, block=block, iters=iters, seed=seed)
    sim = run(KERNELS[name], launch.grid, launch.block, *launch.inputs, order=order)
    return KernelRun(name, sim, launch.inputs[1], launch.expected)
