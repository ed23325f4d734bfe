"""GPU compute measurements: matrix products (FLOP/s against the catalog peak, at full clock
and at the power limit), any kernel timed from its source, and the SIMT lesson's kernels.

Each measurement is ``measure_*_raw`` (runs on the GPU) and ``*_from_raw`` (pure arithmetic,
tested on the recorded H200 run); the public function chains the two.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import _validate
from .._format import Readout, Row, Table, bandwidth, binary_bytes, duration, si
from .gpu import DEVICE_ATTRIBUTES, catalog_gpu, compiled, cupy_module, device_name
from .gpu_occupancy import runtime_blocks_per_sm
from .timing import FlopRate, Progress, Timing, time_cuda

# -- GEMM --------------------------------------------------------------------------------

_GEMM_DTYPES = {"fp32": ("float32", 4), "fp16": ("float16", 2), "bf16": ("bfloat16", 2)}


GEMM_MODES = ("burst", "sustained")


def gemm_from_raw(raw: dict) -> FlopRate:
    """``2·n³`` FLOPs per product; minimum traffic ``3·n²`` elements; catalog peak if known.

    Where the raw run read the SM clock, the rate is also set against the peak at that clock
    (``FlopRate.clock_peak_flops``), and ``conditions`` says how the GPU was.
    """
    n, precision = int(raw["n"]), raw["precision"]
    _validate.choice("precision", precision, tuple(_GEMM_DTYPES))
    size = _GEMM_DTYPES[precision][1]
    g = catalog_gpu(raw.get("catalog_name"))
    peak = None
    if g is not None:
        try:
            peak = g.peak_flops(precision)
        except ValueError:
            peak = None
    clock = raw.get("clock")
    conditions, clock_peak = [], None
    rounds = raw.get("rounds", 1)
    each = f" (each of {rounds} allocations)" if rounds > 1 else ""
    if raw.get("mode") == "burst":
        conditions.append(f"timed after {duration(raw['rest_s'])} idle{each}")
    elif raw.get("mode") == "sustained":
        conditions.append(f"timed after {duration(raw['sustain_s'])} of back-to-back "
                          f"products{each}")
    if clock:
        lo, hi = clock["sm_mhz_min"], clock["sm_mhz_max"]
        span = (si(lo * 1e6, "Hz", 4) if lo == hi
                else f"{si(lo * 1e6, 'Hz', 4)} to {si(hi * 1e6, 'Hz', 4)}")
        limits = ", ".join(clock["reasons"]) or "nothing"
        conditions.append(f"SM clock {span}, held back by {limits}")
        if g is not None:
            clock_peak = g.peak_flops_at_clock(precision, clock["sm_mhz_median"])
    return FlopRate(raw["device"], f"GEMM {n}x{n}x{n} {precision} (cuBLAS)", 2.0 * n**3,
                    3.0 * n * n * size, Timing.from_raw(raw["timing"]), peak,
                    "; ".join(conditions), clock_peak)


def _settle(cp, run, mode: str, rest_s: float, sustain_s: float) -> None:
    """Bring the GPU to the state a GEMM ``mode`` measures: ``"burst"`` idles ``rest_s`` so the
    clock is back at full speed; ``"sustained"`` runs products back to back for ``sustain_s``
    so the power limit has pulled the clock down."""
    cp.cuda.Device().synchronize()
    if mode == "burst":
        time.sleep(rest_s)
        return
    start = time.perf_counter()
    while time.perf_counter() - start < sustain_s:
        run()
        cp.cuda.Device().synchronize()


def measure_gemm_raw(precision: str = "fp16", n: int = 8192, *, repeats: int = 10,
                     rounds: int = 3, budget_s: float = 2.0, data: str = "normal",
                     mode: str = "burst", rest_s: float = 1.0, sustain_s: float = 2.0) -> dict:
    """Time ``cupy.matmul`` (cuBLAS) on random n x n matrices; check rows against FP32.

    ``mode`` decides what the rate means, because a tensor-core product draws more power
    than a GPU may use for long (an H200 at its 700 W limit drops from 1,980 MHz to about
    1,400 MHz within a tenth of a second of back-to-back FP16 products):

    * ``"burst"`` (default) idles ``rest_s`` seconds, so the clock is back at full speed,
      then times ``repeats`` products: the rate the chip reaches at full clock, to set
      against the datasheet peak.
    * ``"sustained"`` first runs products back to back for ``sustain_s`` seconds, then
      times: the rate a long training run sees.

    This is done in ``rounds`` rounds, each on newly drawn matrices in new memory, and the
    timings are pooled: on the H200 the same product ran 3-6 % slower on some allocations
    than on others at the same clock (``docs/measured/h200.md``), so one allocation can be
    unlucky.  The SM clock, power, temperature and limit reasons are read through NVML
    during every timed product (``clock`` in the result; None where NVML is missing).
    ``data``: ``"normal"`` (standard normal) or ``"uniform"`` (uniform in [0, 1)).  Never
    time on zeros.
    """
    _validate.choice("precision", precision, tuple(_GEMM_DTYPES))
    n = _validate.integer("n", n, low=16, high=32768)
    repeats = _validate.integer("repeats", repeats, low=1, high=10_000)
    rounds = _validate.integer("rounds", rounds, low=1, high=20)
    _validate.choice("data", data, ("normal", "uniform"))
    _validate.choice("mode", mode, GEMM_MODES)
    rest_s = _validate.real("rest_s", rest_s, low=0.0, high=60.0)
    sustain_s = _validate.real("sustain_s", sustain_s, low=0.0, high=600.0)
    cp = cupy_module()
    from ..env import match_catalog
    from .nvml import Nvml, summarize

    dtype_name, size = _GEMM_DTYPES[precision]
    need = rounds * 3 * n * n * size + 4 * n * n
    free = cp.cuda.runtime.memGetInfo()[0]
    if need > free // 2:
        raise ValueError(f"n={n}, rounds={rounds}: the matrices need {binary_bytes(need)}, more "
                         f"than half the free GPU memory ({binary_bytes(free)})")
    if dtype_name == "bfloat16":
        try:
            import ml_dtypes  # CuPy >= 14 takes NumPy's bfloat16 from ml_dtypes
        except ImportError:
            raise ValueError("precision='bf16' needs CuPy >= 14 and the ml_dtypes package "
                             "(pip install ml_dtypes); 'fp16' and 'fp32' work without") from None
        dtype = ml_dtypes.bfloat16
    else:
        dtype = getattr(cp, dtype_name)
    rng = cp.random.default_rng(2)
    draw = rng.standard_normal if data == "normal" else rng.random
    nvml = Nvml.for_bus_id(cp.cuda.Device().pci_bus_id)
    readings, samples, errors, kept = [], [], [], []

    def read_clock():  # the product is queued or running: read the clock it runs at
        readings.append(nvml.sample())

    with Progress(rounds, f"GEMM {n}^3 {precision}, {mode}") as bar:
        for i in range(rounds):
            bar.update(0, f"allocation {i + 1}")
            a = draw((n, n), dtype=cp.float32).astype(dtype)
            b = draw((n, n), dtype=cp.float32).astype(dtype)
            c = cp.empty((n, n), dtype=dtype)
            kept.append((a, b, c))  # held until the end, so the next round lands elsewhere

            def run(a=a, b=b, c=c):
                cp.matmul(a, b, out=c)
            run()
            rows = min(n, 128)
            ref = a[:rows].astype(cp.float32) @ b.astype(cp.float32)
            errors.append(float(cp.linalg.norm(c[:rows].astype(cp.float32) - ref)
                                / cp.linalg.norm(ref)))
            if not errors[-1] < 5e-2:
                raise RuntimeError(f"GEMM {precision} result wrong: relative error {errors[-1]:.2e}")
            _settle(cp, run, mode, rest_s, sustain_s)
            t = time_cuda(run, warmup=1, repeats=repeats, budget_s=budget_s,
                          while_running=read_clock if nvml is not None else None)
            samples.extend(t.samples)
            bar.update(1, f"allocation {i + 1}")
    name = device_name(cp)
    sms = int(cp.cuda.runtime.deviceGetAttribute(DEVICE_ATTRIBUTES["multiprocessor_count"],
                                                 cp.cuda.Device().id))
    timing = Timing(tuple(samples), 1, "CUDA events")
    return {"device": name, "catalog_name": match_catalog(name, sms), "precision": precision,
            "n": n, "data": data, "mode": mode, "rest_s": rest_s, "sustain_s": sustain_s,
            "rounds": rounds, "timing": timing.to_raw(), "clock": summarize(readings),
            "relative_error": max(errors)}


def gemm_flops(precision: str = "fp16", n: int = 8192, **kw) -> FlopRate:
    """Matrix-multiply rate (cuBLAS via ``cupy.matmul``), with the catalog peak beside it.

    ``mode="burst"`` (default) is the rate at full clock; ``mode="sustained"`` the rate
    once the GPU has settled at its power limit (see :func:`measure_gemm_raw`).
    """
    return gemm_from_raw(measure_gemm_raw(precision, n, **kw))


# -- any kernel ------------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class KernelTiming(Readout):
    """One kernel's measured time with its launch configuration and resources."""

    name: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    shared_mem: int
    registers_per_thread: int
    static_smem: int
    blocks_per_sm: int
    timing: Timing
    extra: dict = field(default_factory=dict, compare=False)

    def readout_title(self) -> str:
        return self.name

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("median time", self.timing.median, "s"), Row("runs", self.timing.repeats),
                Row("grid", str(self.grid)), Row("block", str(self.block)),
                Row("registers per thread", self.registers_per_thread),
                Row("static shared memory per block", self.static_smem, "B"),
                Row("dynamic shared memory per block", self.shared_mem, "B"),
                Row("blocks per SM (CUDA runtime)", self.blocks_per_sm))


def time_kernel(source: str, name: str, *, grid, block, args: Sequence = (),
                shared_mem: int = 0, options: Sequence[str] = (), warmup: int = 2,
                repeats: int = 20, budget_s: float = 2.0) -> KernelTiming:
    """Compile ``name`` from CUDA ``source`` and time one launch with CUDA events.

    For any kernel a lesson shows as source (e.g. the SIMT teaching kernels): ``args`` are
    CuPy arrays and NumPy scalars in the kernel's parameter order.
    """
    if not isinstance(source, str) or not isinstance(name, str) or not name:
        raise TypeError(f"source and name must be strings (CUDA C source and a kernel name), "
                        f"got name={name!r}")
    grid = _validate.launch_dims("grid", grid)
    block = _validate.launch_dims("block", block, high=1024)
    threads = math.prod(block)
    if threads > 1024:
        raise ValueError(f"block={block}: {threads} threads per block, the limit is 1024")
    shared_mem = _validate.integer("shared_mem", shared_mem, low=0, high=256 * 1024)
    k = compiled(source, name, tuple(options))
    if shared_mem > 48 * 1024:
        k.max_dynamic_shared_size_bytes = shared_mem
    timing = time_cuda(lambda: k(grid, block, tuple(args), shared_mem=shared_mem),
                       warmup=warmup, repeats=repeats, budget_s=budget_s)
    return KernelTiming(name, grid, block, shared_mem, int(k.num_regs),
                        int(k.shared_size_bytes), runtime_blocks_per_sm(k, threads, shared_mem),
                        timing)


# -- the SIMT teaching kernels on a real GPU -------------------------------------------------

#: launch sizes for timing: big enough that each kernel runs well past launch overhead
SIMT_SIZES = {"branch": {"n": 2**22, "iters": 256}, "reduce": {"n": 2**26, "block": 256},
              "transpose": {"n": 8192}}


def _simt_useful_bytes(name: str, n: int, block: tuple[int, ...]) -> int:
    """Bytes a kernel must read and write at least: its input once, its output once."""
    if name.startswith("transpose"):
        return 2 * n * n * 4
    if name.startswith("reduce"):
        return n * 4 + (n // block[0]) * 4
    return 2 * n * 4


@dataclass(frozen=True, repr=False)
class SimtTimings(Table):
    """The SIMT teaching kernels timed on a GPU: ``rows`` are
    ``(kernel, n, median seconds, useful GB/s, output correct)``."""

    device: str
    rows: tuple[tuple[str, int, float, float, bool], ...]

    def seconds(self, name: str) -> float:
        for r in self.rows:
            if r[0] == name:
                return r[2]
        raise ValueError(f"name={name!r} was not timed; timed: "
                         + ", ".join(r[0] for r in self.rows))

    def _cells(self):
        return [(k, f"{n:,}", duration(t), bandwidth(g * 1e9), "yes" if ok else "NO")
                for k, n, t, g, ok in self.rows]

    def table(self):
        return (f"{self.device}: SIMT teaching kernels",
                ("kernel", "n", "median time", "useful bandwidth", "correct"), self._cells())


def simt_from_raw(raw: dict) -> SimtTimings:
    rows = []
    for r in raw["kernels"]:
        t = Timing.from_raw(r["timing"]).median
        rows.append((r["name"], int(r["n"]), t, r["useful_bytes"] / t / 1e9, bool(r["correct"])))
    return SimtTimings(raw["device"], tuple(rows))


def measure_simt_raw(names: Sequence[str] | None = None, *, repeats: int = 20,
                     budget_s: float = 1.0) -> dict:
    """Time each kernel of ``gpu_lessons.kernels.simt.examples.SIMT_CUDA_SOURCES`` at :data:`SIMT_SIZES`.

    Inputs, launch shape and NumPy's expected output come from ``simt_kernels.cuda_launch``;
    the measured launch's output is compared with it (``reduce_missing_sync`` may differ:
    that is its lesson).
    """
    cp = cupy_module()
    from ..kernels.simt.examples import SIMT_CUDA_SOURCES, cuda_launch

    names = list(SIMT_CUDA_SOURCES) if names is None else list(names)
    for name in names:
        _validate.choice("names[i]", name, tuple(SIMT_CUDA_SOURCES))
    out = []
    with Progress(len(names), "SIMT kernels") as bar:
        for name in names:
            family = name.split("_")[0]
            launch = cuda_launch(name, **SIMT_SIZES[family])
            args = tuple(cp.asarray(v) if isinstance(v, np.ndarray) else np.int32(v)
                         for v in launch.inputs)
            kt = time_kernel(SIMT_CUDA_SOURCES[name], name, grid=launch.grid,
                             block=launch.block, args=args, shared_mem=launch.shared_bytes,
                             repeats=repeats, budget_s=budget_s)
            got = cp.asnumpy(args[1])
            correct = bool(np.allclose(got, launch.expected, rtol=1e-4, atol=1e-3))
            n = int(launch.expected.shape[0]) if family == "transpose" else \
                int(launch.inputs[0].size)
            out.append({"name": name, "n": n, "grid": list(launch.grid),
                        "block": list(launch.block), "shared_mem": launch.shared_bytes,
                        "registers_per_thread": kt.registers_per_thread,
                        "blocks_per_sm": kt.blocks_per_sm, "timing": kt.timing.to_raw(),
                        "useful_bytes": _simt_useful_bytes(name, n, launch.block),
                        "correct": correct})
            bar.update(1, name)
    return {"device": device_name(cp), "kernels": out}


def simt_timings(names: Sequence[str] | None = None, **kw) -> SimtTimings:
    """Time the SIMT lesson's kernels (divergence, reductions, transposes) on this GPU."""
    return simt_from_raw(measure_simt_raw(names, **kw))
