"""Running a translated kernel on a GPU: NVRTC through CuPy, CUDA-event timing, and the
simulator beside it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate
from .._format import Readout, Row
from .cuda_c import to_cuda
from .cuda_types import (
    _NUMPY_OF_C,
    EXACT_OPTIONS,
    HALF_DTYPES,
    CudaSource,
)
from .simt.lanes import MAX_BLOCK_DIM, MAX_GRID_DIM
from .simt.result import launch_text

# -- running on a GPU -----------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class GpuRun(Readout):
    """A kernel run on a GPU: its launch, its measured time and where it ran.

    ``timing``: CUDA-event times of the timed launches (:class:`gpu_lessons.measure.Timing`);
    ``exact``: compiled with ``-fmad=false`` (float results bit-identical to the simulator's).
    """

    kernel: str
    grid: tuple
    block: tuple
    device: str
    timing: object
    dynamic_shared_bytes: int
    registers_per_thread: int
    exact: bool = True

    @property
    def us(self) -> float:
        """Median kernel time in µs."""
        return self.timing.median * 1e6

    def readout_title(self) -> str:
        return f"{self.kernel} on {self.device}"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("median kernel time", self.timing.median, "s"),
                Row("timed runs", self.timing.repeats), Row("warm-up runs", self.timing.warmup),
                Row("timer", "CUDA events"),
                Row("launch", f"<<<{launch_text(self.grid, self.block, drop_trailing_ones=True)}>>>"),
                Row("registers per thread", self.registers_per_thread),
                Row("dynamic shared memory", self.dynamic_shared_bytes, "B"),
                Row("arithmetic", "exact (-fmad=false)" if self.exact
                    else "fused multiply-adds allowed"))


def launch_args(source: CudaSource, args) -> list:
    """The arguments for ``RawKernel`` in parameter order: device copies of the arrays (flat,
    C order) and NumPy scalars of the exact C types.  Needs CuPy."""
    import cupy as cp

    out = []
    for p, a in zip(source.params, args, strict=True):
        if p.kind == "array":
            flat = np.ascontiguousarray(a).reshape(-1)
            # 16-bit floats travel as their bits (CuPy has no bfloat16; the kernel's half_t
            # and bf16_t are those bits)
            out.append(cp.asarray(flat.view(np.uint16) if a.dtype.name in HALF_DTYPES
                                  else flat))
        else:
            out.append(_NUMPY_OF_C[p.ctype](a))
    return out


def run_on_gpu(kernel, grid, block, *args, repeats: int = 20, warmup: int = 2,
               exact: bool = True):
    """Translate ``kernel`` (:func:`to_cuda`), compile it with NVRTC, run it on ``args``.

    Like ``gpu_lessons.kernels.run(kernel, grid, block, *args)`` but on the GPU: the arrays are
    copied to the device, the kernel runs once, and what it wrote is copied back **into the
    NumPy arrays**.  Then it is timed on separate device copies (reset before every run, so
    kernels that accumulate or use atomics time the same work each time and cannot change the
    result you got): ``warmup`` untimed launches, then ``repeats`` launches timed with CUDA
    events; the median is reported (:class:`GpuRun`).  ``exact``: compile with ``-fmad=false``
    so float results match the simulator's bit for bit where the arithmetic allows.

    Without a GPU it prints the course's one skip line and returns ``None`` (the translation
    still runs first, so a kernel the GPU could not take is reported either way).
    """
    source = to_cuda(kernel, *args)
    grid3 = _validate.launch_dims("grid", grid, high=MAX_GRID_DIM)
    block3 = _validate.launch_dims("block", block, high=MAX_BLOCK_DIM)
    threads = block3[0] * block3[1] * block3[2]
    if threads > 1024:
        raise ValueError(f"block={block3} has {threads} threads; a block may have at most 1024")
    repeats = _validate.integer("repeats", repeats, low=1, high=10_000)
    warmup = _validate.integer("warmup", warmup, low=0, high=1000)
    from ..measure.gpu import FAIL_LINE, _cuda_errors, skip_line

    line = skip_line()
    if line is not None:
        print(line)
        return None
    try:
        return _run(source, grid3, block3, args, repeats, warmup, exact)
    except _cuda_errors() as exc:
        print(FAIL_LINE.format(why=f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"))
        return None


def _run(source: CudaSource, grid, block, args, repeats, warmup, exact) -> GpuRun:
    import cupy as cp

    from ..measure.gpu import compiled, device_name
    from ..measure.timing import Timing

    k = compiled(str(source), source.kernel_name, EXACT_OPTIONS if exact else ())
    shared = source.dynamic_shared_bytes(block, *args)
    if shared > 48 * 1024:
        k.max_dynamic_shared_size_bytes = shared
    fresh = launch_args(source, args)
    result = [a.copy() if isinstance(a, cp.ndarray) else a for a in fresh]
    k(grid, block, tuple(result), shared_mem=shared)
    scratch = [a.copy() if isinstance(a, cp.ndarray) else a for a in fresh]
    pairs = [(s, f) for s, f in zip(scratch, fresh, strict=True) if isinstance(s, cp.ndarray)]
    start, end = cp.cuda.Event(), cp.cuda.Event()
    samples = []
    for i in range(warmup + repeats):
        for s, f in pairs:
            s[...] = f     # the same inputs every run, outside the timed window
        start.record()
        k(grid, block, tuple(scratch), shared_mem=shared)
        end.record()
        end.synchronize()
        if i >= warmup:
            samples.append(max(cp.cuda.get_elapsed_time(start, end) * 1e-3, 1e-9))
    for p, a, d in zip(source.params, args, result, strict=True):
        if p.kind == "array" and p.written:
            a[...] = cp.asnumpy(d).view(a.dtype).reshape(a.shape)
    return GpuRun(source.kernel_name, grid, block, device_name(cp),
                  Timing(tuple(samples), warmup, "CUDA events"), shared, int(k.num_regs), exact)


#: Below this, a kernel's measured time is its launch and the timing events, not its traffic
#: (an empty kernel measured 6 µs per launch on the H200; lesson 08, "launch overhead").
LAUNCH_BOUND_SECONDS = 1e-6


def memory_model_rows(measured: float, predicted: float, bandwidth_bps: float) -> tuple[Row, ...]:
    """The memory model's time beside a measured one, as the GPU cells show it: the model's
    time, the bandwidth, the ratio, and - where the model predicts under a microsecond - that
    the measurement is the launch's, so the ratio says nothing about memory."""
    rows = (Row("memory model: time at the catalog bandwidth", predicted, "s"),
            Row("catalog bandwidth", bandwidth_bps, "B/s"),
            Row("measured / predicted", measured / predicted))
    if predicted < LAUNCH_BOUND_SECONDS:
        rows += (Row("note", "at this size the measured time is the launch's (a few µs however "
                             "little a kernel moves, lesson 08), not memory's"),)
    return rows


@dataclass(frozen=True, repr=False)
class BesideSimulator(Readout):
    """One kernel on the same inputs in the simulator and on a GPU, with the models' predictions.

    ``matches``: every array the kernel writes holds the simulator's values bit for bit
    (compiled with ``-fmad=false``); ``difference``: the first element that differs.  The
    memory model's time is the bytes the simulator's sectors move (32 B each) over the catalog
    bandwidth of the GPU it ran on (``None`` for a GPU not in the catalog).
    """

    gpu: GpuRun
    matches: bool
    difference: str | None
    sectors_per_request: float
    shared_wavefronts: int
    bank_conflicts: int
    simt_efficiency: float
    moved_bytes: float
    predicted_seconds: float | None
    bandwidth: float | None
    model: object = None      # the performance model's TimePrediction, where it is installed

    def readout_title(self) -> str:
        return (f"{self.gpu.kernel}<<<"
                f"{launch_text(self.gpu.grid, self.gpu.block, drop_trailing_ones=True)}>>> "
                f"on {self.gpu.device}: GPU beside the simulator")

    def readout_rows(self) -> tuple[Row, ...]:
        spr = self.sectors_per_request
        rows = (Row("output", "the simulator's, bit for bit" if self.matches
                    else f"DIFFERS from the simulator's: {self.difference}"),
                Row("measured kernel time (median, CUDA events)", self.gpu.timing.median, "s"),
                Row("timed runs", self.gpu.timing.repeats),
                Row("simulator: global sectors / request", "–" if spr != spr else spr),
                Row("simulator: shared wavefronts", self.shared_wavefronts),
                Row("simulator: bank conflicts", self.bank_conflicts),
                Row("simulator: SIMT efficiency", self.simt_efficiency, "%"),
                Row("memory model: bytes moved (32 B per sector)", self.moved_bytes, "B"))
        if self.predicted_seconds is None:
            rows = (*rows, Row("memory model: time", f"{self.gpu.device} is not in the course's "
                                                     "GPU catalog, so no bandwidth to divide by"))
        else:
            rows += memory_model_rows(self.gpu.timing.median, self.predicted_seconds,
                                      self.bandwidth)
        if self.model is None:
            return rows
        return (*rows, Row("performance model: predicted time", self.model.seconds, "s"),
                Row("performance model: limited by", self.model.limiter),
                Row("performance model: measured / predicted",
                    self.gpu.timing.median / self.model.seconds))


#: The performance model's prediction for a launch, ``(kernel, grid, block, args) ->
#: TimePrediction``: installed by :mod:`gpu_lessons.perf` when it is imported (the toolchain
#: cannot import the model, which imports the toolchain), ``None`` until then.
TIME_MODEL = None


def beside_simulator(kernel, grid, block, *args, repeats: int = 20, warmup: int = 2):
    """Run ``kernel`` in the simulator and on the GPU on the same inputs, compare what both
    wrote, and set the GPU's measured time beside the simulator's counts and the memory
    model's time (:class:`BesideSimulator`).

    The GPU's results are copied back into ``args`` (as :func:`run_on_gpu` does); the simulator
    runs on copies, the same launch, every thread: keep the problem lesson-sized (thousands of
    threads, not millions; ``puzzles.run_on_gpu`` times a large size against a small simulated
    one).  Without a GPU it prints the course's one skip line and returns ``None`` (the
    translation still runs first).
    """
    from .. import roofline
    from ..measure.gpu import catalog_gpu, skip_line
    from . import simt

    source = to_cuda(kernel, *args)
    line = skip_line()
    if line is not None:
        print(line)
        return None
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    model = TIME_MODEL(kernel, grid, block, copies) if TIME_MODEL is not None else None
    sim = simt.run(kernel, grid, block, *copies)
    run = run_on_gpu(kernel, grid, block, *args, repeats=repeats, warmup=warmup)
    if run is None:      # a CUDA error, reported in one line
        return None
    difference = None
    for p, got, want in zip(source.params, args, copies, strict=True):
        if p.kind == "array" and p.written and not np.array_equal(got, want, equal_nan=True):
            i = int(np.flatnonzero(~((got == want) | ((got != got) & (want != want)))
                                   .ravel())[0])
            difference = (f"{p.name}[{i}] is {got.ravel()[i].item()!r} on the GPU, "
                          f"{want.ravel()[i].item()!r} in the simulator")
            break
    t = sim.totals
    moved = float(t.global_sectors * 32)
    g = catalog_gpu(run.device)
    predicted = (roofline.kernel_time(0.0, moved, g.peak_flops("fp32"), g.bandwidth)
                 if g is not None and moved > 0 else None)
    return BesideSimulator(run, difference is None, difference, t.sectors_per_request,
                           int(t.shared_wavefronts), int(t.bank_conflicts), t.simt_efficiency,
                           moved, predicted, g.bandwidth if g is not None else None, model)


