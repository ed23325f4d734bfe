"""``run``: a kernel launch in the simulator (the arguments checked, every block run)."""

from __future__ import annotations

import numpy as np

from ... import _validate
from ..._math import cdiv, round_up
from ...hardware import WARP_SIZE
from ..desugar import simulator_function
from .block import _BlockRun, _Sim
from .errors import kernel_error
from .lanes import (
    GLOBAL_ALIGN,
    MAX_BLOCK_DIM,
    MAX_GRID_DIM,
    MAX_THREADS_PER_BLOCK,
    ORDERS,
    SIM_FILES,
    Dim3,
    _GlobalArg,
    _is_scalar,
)
from .result import Fp64Use, SimResult, _stats


def _dim3(name: str, value, limits) -> Dim3:
    return Dim3(*_validate.launch_dims(name, value, high=limits))


def _kernel_params(kernel) -> list[str]:
    code = getattr(kernel, "__code__", None)
    if code is None:
        return []
    return list(code.co_varnames[1:code.co_argcount])


def run(kernel, grid, block, *args, order="ascending", max_instructions: int = 200_000,
        max_warps: int = 4096, record_indices: bool = False) -> SimResult:
    """Run ``kernel<<<grid, block>>>(*args)`` warp by warp and record what happened.

    ``kernel(t, *args)``: a Python function written from one thread's view (see the module
    docstring).  ``grid``, ``block``: an int or a tuple (x, y, z), CUDA's limits apply
    (block at most 1024 threads; x, y <= 1024, z <= 64).  ``args``: NumPy arrays (global
    memory, written in place as device memory would be) and Python numbers.
    ``order``: the order in which a block's warps take turns between barriers:
    ``"ascending"``, ``"descending"``, or an int seed for a random order per barrier phase.
    ``max_instructions``, ``max_warps``: guards against runaway kernels and huge grids.
    ``record_indices``: keep, for every memory instruction, the element each active lane
    touched (``Event.indices``), for pictures of the access pattern.

    Anything the kernel raises comes out as a :class:`KernelError` at the kernel's line
    (:mod:`gpu_lessons.kernels.simt.errors`); arrays keep what the kernel wrote before the error.
    """
    if not callable(kernel):
        raise TypeError(f"kernel must be a function kernel(t, ...), got {type(kernel).__name__}")
    grid = _dim3("grid", grid, MAX_GRID_DIM)
    block = _dim3("block", block, MAX_BLOCK_DIM)
    threads = block.x * block.y * block.z
    if threads > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"block={tuple(block)} has {threads} threads; a block may have at "
                         f"most {MAX_THREADS_PER_BLOCK} (allowed: 1 to {MAX_THREADS_PER_BLOCK})")
    if isinstance(order, str):
        _validate.choice("order", order, ORDERS)
    else:
        order = _validate.integer("order (a random seed)", order, low=0)
    max_instructions = _validate.integer("max_instructions", max_instructions, low=1)
    max_warps = _validate.integer("max_warps", max_warps, low=1)
    record_indices = _validate.flag("record_indices", record_indices)
    n_blocks = grid.x * grid.y * grid.z
    n_warps = n_blocks * cdiv(threads, WARP_SIZE)
    if n_warps > max_warps:
        raise ValueError(f"grid={tuple(grid)} x block={tuple(block)} is {n_warps} warps; the "
                         f"simulator runs at most max_warps={max_warps} (simulate a smaller "
                         f"problem, or raise max_warps and wait)")

    names = _kernel_params(kernel)
    wrapped, top, shapes = [], 0, {}
    for k, a in enumerate(args):
        name = names[k] if k < len(names) else f"arg{k}"
        if isinstance(a, np.ndarray):
            if a.dtype.itemsize not in (1, 2, 4, 8) or (a.dtype.kind not in "biuf"
                                                         and a.dtype.name != "bfloat16"):
                raise TypeError(f"{name}: arrays must hold numbers of 1, 2, 4 or 8 bytes "
                                f"(or ml_dtypes.bfloat16), got dtype {a.dtype}")
            if a.ndim == 0 or a.size == 0:
                raise ValueError(f"{name}: arrays must have at least one element and one "
                                 f"dimension, got shape {a.shape}")
            low = sum(min(0, s * (n - 1)) for s, n in zip(a.strides, a.shape, strict=True))
            high = sum(max(0, s * (n - 1)) for s, n in zip(a.strides, a.shape, strict=True))
            start = round_up(top, GLOBAL_ALIGN)
            wrapped.append(_GlobalArg(a, start - low, name))
            shapes[name] = ("global", a.shape, a.dtype.itemsize)
            top = start + high - low + a.dtype.itemsize
        elif _is_scalar(a):
            wrapped.append(a)
        else:
            raise TypeError(f"{name}: kernel arguments must be NumPy arrays or numbers, "
                            f"got {type(a).__name__}")

    sim = _Sim(simulator_function(kernel), grid, block, tuple(wrapped), order, max_instructions,
               record_indices, shapes)
    linear = 0
    try:
        for bz in range(grid.z):
            for by in range(grid.y):
                for bx in range(grid.x):
                    _BlockRun(sim, linear, Dim3(bx, by, bz)).run()
                    linear += 1
    except Exception as exc:
        err = kernel_error(exc, kernel)
        if err is None:
            raise
        raise err from exc

    events = tuple(sim.events)
    return SimResult(kernel=getattr(kernel, "__name__", "kernel"), grid=grid, block=block,
                     order=order, events=events, races=tuple(sim.races),
                     notes=tuple(sim.notes), barriers=sim.barriers,
                     totals=_stats(events), array_shapes=sim.shapes,
                     uninitialised_reads=tuple(sim.uninitialised),
                     shuffle_reads=tuple(sim.shuffle_reads),
                     shared_bytes_per_block=sim.shared_bytes,
                     shared_arrays=tuple(sim.shared_arrays.values()),
                     partial_warps=tuple(sim.partial_warps),
                     fp64=tuple(Fp64Use(line, n) for line, n in sorted(
                         sim.fp64_lines.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))))

SIM_FILES.add(__file__)
