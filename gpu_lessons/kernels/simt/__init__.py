"""A SIMT simulator: write a kernel from one thread's point of view, run it as warps.

A kernel is a plain Python function that receives a *warp context* ``t`` followed by its
arguments, the way a CUDA kernel receives ``threadIdx`` and pointers:

>>> import numpy as np
>>> def scale(t, x, out, n):
...     i = t.block_idx.x * t.block_dim.x + t.thread_idx.x    # int i = blockIdx.x * ...
...     t.return_if(i >= n)                                     # if (i >= n) return;
...     with t.if_(t.thread_idx.x % 2 == 0):                    # if (threadIdx.x % 2 == 0)
...         out[i] = x[i] * 2.0
...     with t.else_():                                         # else
...         out[i] = x[i] * 0.5
>>> x, out = np.ones(256, np.float32), np.zeros(256, np.float32)
>>> result = run(scale, 2, 128, x, out, 256)     # scale<<<2, 128>>>(x, out, 256)
>>> out[:4]                                       # arrays are written in place
array([2. , 0.5, 2. , 0.5], dtype=float32)
>>> result.simt_efficiency, result.sectors_per_request
(0.75, 4.0)

Per warp, 6 instructions run with all 32 lanes (``+ thread_idx.x``, ``>=``, the return test,
``%``, ``==``, the if test) and 6 with 16 lanes (load, multiply, store in each path):
(6·32 + 6·16) / (12·32) = 0.75.  Every load or store of 16 alternate floats still touches
the same 4 sectors as 32 consecutive ones.

How it works
------------
* **A warp executes together.**  The simulator calls the kernel once per warp.  Every
  per-thread value (``t.thread_idx.x``, a load, ``i * 2``) is a :class:`Lanes`: 32 numbers,
  one per lane, held in a NumPy array.  Each Python operator on lane values is one warp
  instruction, recorded with the warp's *active mask* at that moment.  Values that are the
  same for the whole block (``t.block_idx``, ``t.block_dim``, Python ints) are plain Python
  numbers and cost nothing, like CUDA's uniform values.
* **Branches are visible.**  A per-lane condition cannot steer a Python ``if`` (one Python
  ``if`` cannot go both ways), so branches are written ``with t.if_(cond):`` /
  ``with t.else_():``.  Both bodies run, each with the lanes that took it; a body whose mask
  is empty issues nothing (the warp jumps over it).  Paths therefore run one after the other
  and the lanes meet again (reconverge) after the ``else`` — the classic SIMT stack
  behaviour (CUDA C++ Programming Guide, "SIMT Architecture").  ``t.while_`` is a loop whose
  trip count differs per lane; ``t.return_if`` retires lanes; ``t.where`` selects.
  Python itself still executes every body for every warp — only the simulated operations
  are masked — so keep plain-Python side effects (``print``, ``raise``, appending to a
  list) out of branch bodies, or expect them once per warp.
* **A value made inside a branch exists only for the lanes that made it.**  Python
  assignment cannot be masked, so a value computed inside ``t.if_`` carries the lanes it is
  defined on, and using it where other lanes are active raises an error that says how to fix
  it (declare ``y = t.local(0.0)`` before the branch and write ``y[...] = ...`` inside it, or
  merge with ``t.where``) — in CUDA the variable would simply be out of scope.
* **Memory.**  Array arguments are global memory; ``t.shared(shape)`` declares a block's
  ``__shared__`` array.  ``a[i]`` and ``a[i] = v`` are warp-wide loads and stores: every
  access is fed, as 32 byte addresses, to :func:`gpu_lessons.memory.global_load` (32-byte
  sectors) or :func:`gpu_lessons.memory.shared_load` (banks and wavefronts).  Global arrays
  get 256-byte-aligned base addresses (as ``cudaMalloc`` gives); each shared array starts at
  a multiple of 128 bytes, i.e. at bank 0.  Stores are counted with the same sector and bank
  rules as loads.
* **Barriers and scheduling.**  ``t.sync()`` is ``__syncthreads()``.  Each warp runs as a
  greenlet (a coroutine with its own stack), and only one runs at a time: the warps of a
  block take turns, each running until its next barrier (or the end), in the order
  ``order`` says.  That is one legal schedule of the real machine; code whose answer
  depends on the schedule has a race.
* **Race detection.**  Between two barriers, a shared-memory word written by one warp and
  read or written by another warp is a race (a missing ``__syncthreads()``); each is reported
  with the array, index, warps and source lines.  Two atomics on one word never race; an
  atomic and another warp's plain read or write of that word do.  Within one warp, a word one
  lane writes and another lane reads or writes in a later instruction, with no
  ``t.syncwarp()`` between, is a race too: the simulator runs a warp's lanes in lockstep, but
  since Volta each thread has its own program counter and only ``__syncwarp()`` orders the
  lanes (Programming Guide, "Independent Thread Scheduling").
* **Atomics.**  ``old = t.atomic_add(a, i, v)``, ``t.atomic_max(a, i, v)`` and
  ``t.atomic_cas(a, i, compare, v)`` read-modify-write one element per active lane of a
  global or shared array and return the value it held before, as ``atomicAdd``,
  ``atomicMax`` and ``atomicCAS`` do (Programming Guide, "Atomic Functions").  Lanes of one
  warp that hit the same address are applied one after another in lane order; CUDA leaves
  that order unspecified, so a kernel must not depend on it.  Atomics to one address are
  performed one at a time, which is why contended counters are slow and why histograms
  privatise into shared memory first (N. Sakharnykh, "GPU Pro Tip: Fast Histograms Using
  Shared Atomics on Maxwell", NVIDIA Developer Blog, 2015; A. Adinets, "CUDA Pro Tip:
  Optimized Filtering with Warp-Aggregated Atomics", 2014).  So each atomic instruction
  records its *serialisation*: the most active lanes that hit one address (32 for a
  warp-wide counter, 1 when all differ), summed in ``Stats.atomic_serialisation``.  It
  counts the atomics as written; since CUDA 9 nvcc may itself aggregate a warp's atomics
  on one address (Adinets, 2017 update), so on a GPU the cost can be lower.  An atomic's
  memory traffic is counted with the same sector and bank rules as a load.  Supported element
  types are CUDA's: ``atomicAdd`` int32, uint32, uint64, float32, float64; ``atomicMax``
  int32, uint32, int64, uint64; ``atomicCAS`` int32, uint32, uint64.
* **Warp shuffles.**  ``t.shfl_down(v, delta)``, ``t.shfl_up(v, delta)``,
  ``t.shfl_xor(v, lane_mask)`` and ``t.shfl_idx(v, src_lane)`` are
  ``__shfl_*_sync(0xffffffff, v, ..., 32)`` (Programming Guide, "Warp Shuffle Functions"):
  each lane gets ``v`` from lane ``lane + delta``, ``lane - delta``, ``lane ^ lane_mask`` or
  ``src_lane % 32``; a source outside 0..31 gives the lane its own ``v``.  CUDA leaves the
  value read from an inactive lane undefined; the simulator returns that lane's register
  and records it (``SimResult.shuffle_reads``, a note, ``Stats.shuffle_inactive_reads``).
  ``t.syncwarp()`` is ``__syncwarp()``: one ``bar.warp`` instruction.  Since Volta the lanes
  of a warp may be scheduled independently (Programming Guide, "Independent Thread
  Scheduling"), which is why the shuffles take a mask and ``__syncwarp()`` exists; here a
  warp's active lanes always run in lockstep, so ``t.syncwarp()`` only costs its slot.
* **Errors point at the kernel's line.**  Whatever a kernel raises while it runs (an index
  outside an array by an active lane, a Python ``if`` on lane values, a ``NameError``) comes
  out of :func:`run` as a :class:`KernelError` whose message starts with the file or cell,
  the line and its source text (see :mod:`gpu_lessons.kernels.simt.errors`).  Lanes that a branch
  switched off are never checked: ``s[tid - 1]`` under ``t.if_(tid >= 1)`` is fine.

The instruction set is the simulator's own, not SASS: one warp instruction per operator on
lane values (``alu``), per ``t.if_``/``t.while_`` test or ``t.return_if`` (``branch``), per
load, store or atomic (``ld.global``, ``st.global``, ``atom.global``, ``ld.shared``,
``st.shared``, ``atom.shared``), per ``t.where`` or ``t.local`` (``alu``), per shuffle
(``shfl``) and per barrier (``bar.sync``, ``bar.warp`` for ``t.syncwarp()``).  Python
``for`` loops over plain ints are unrolled at no cost, as ``#pragma unroll`` would.  The
counts are for reasoning about ratios (SIMT efficiency, sectors per request, conflicts,
serialisation), not for predicting cycle counts.

SIMT efficiency = (sum of active lanes over issued warp instructions) / (32 x instructions),
the quantity Nsight Compute reports as "Avg. Active Threads Per Warp" / 32.
"""


from .errors import KernelError, SimtError
from .lanes import ATOMIC_DTYPES, WARP_SIZE, Dim3, Lanes
from .launch import run
from .result import (
    KINDS,
    MEMORY_KINDS,
    AccessMap,
    ArrayStats,
    Event,
    Fp64Use,
    PartialWarp,
    Race,
    SharedArray,
    ShuffleRead,
    SimResult,
    Stats,
    UninitialisedRead,
)
from .warp import WarpContext

__all__ = [
    "ATOMIC_DTYPES",
    "KINDS",
    "MEMORY_KINDS",
    "WARP_SIZE",
    "AccessMap",
    "ArrayStats",
    "Dim3",
    "Event",
    "Fp64Use",
    "KernelError",
    "Lanes",
    "PartialWarp",
    "Race",
    "SharedArray",
    "ShuffleRead",
    "SimResult",
    "SimtError",
    "Stats",
    "UninitialisedRead",
    "WarpContext",
    "run",
]
