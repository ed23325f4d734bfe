"""GPU memory measurements beside the memory model: streaming bandwidth, the cache staircase,
strided and misaligned copies (against :func:`gpu_lessons.memory.predicted_traffic`) and
shared-memory bank conflicts (against the wavefronts :func:`gpu_lessons.memory.shared_load`
counts).

Each measurement is ``measure_*_raw`` (runs on the GPU, returns JSON-ready numbers) and
``*_from_raw`` (pure arithmetic on them, tested on the recorded H200 run); the public
function chains the two.  See :mod:`gpu_lessons.measure.gpu` for the gate every GPU cell
goes through.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import _validate
from .._format import Table, bandwidth, binary_bytes, percent
from ..memory import predicted_traffic
from . import cuda_sources
from .cpu import Staircase
from .gpu import DEVICE_ATTRIBUTES, GiB, MiB, compiled, cupy_module, device_name, l2_bytes, launch_1d
from .timing import Bandwidth, Progress, Timing, time_cuda

# -- streaming bandwidth ---------------------------------------------------------------------

def bandwidth_from_raw(raw: dict) -> Bandwidth:
    """A :class:`Bandwidth` from a recorded run (bytes moved per run and the run times)."""
    return Bandwidth(raw["device"], raw["kind"], int(raw["bytes_moved"]),
                     Timing.from_raw(raw["timing"]), int(raw.get("array_bytes", 0)),
                     raw.get("note", ""))


def default_gpu_array_bytes(arrays: int = 2) -> int:
    """Bytes per array: 16x the L2 cache, within 256 MiB..2 GiB, and within free memory.

    Sixteen times L2 makes L2 hits negligible (the H200's 60 MiB L2 gives 960 MiB arrays).
    """
    cp = cupy_module()
    arrays = _validate.integer("arrays", arrays, low=1, high=16)
    size = min(max(16 * l2_bytes(cp), 256 * MiB), 2 * GiB)
    free = cp.cuda.runtime.memGetInfo()[0]
    size = min(size, free // (2 * arrays))
    return int(size // 4096 * 4096)


def measure_bandwidth_raw(kind: str = "copy", *, array_bytes: int | None = None,
                          repeats: int = 20, budget_s: float = 2.0) -> dict:
    """Time the ``copy_f4`` or ``triad_f4`` kernel; bytes moved = 2 or 3 arrays per run."""
    _validate.choice("kind", kind, ("copy", "triad"))
    if array_bytes is not None:
        array_bytes = _validate.integer("array_bytes", array_bytes, low=16 * 1024,
                                        high=64 * GiB)
    arrays = 2 if kind == "copy" else 3
    cp = cupy_module()
    if array_bytes is None:
        array_bytes = default_gpu_array_bytes(arrays)
    n4 = array_bytes // 16  # float4 elements
    rng = cp.random.default_rng(1)
    a = rng.random(4 * n4, dtype=cp.float32)
    b = cp.empty_like(a)
    grid, block = launch_1d(n4)
    if kind == "copy":
        k = compiled(cuda_sources.STREAM_SOURCE, "copy_f4")

        def run():
            k(grid, block, (a, b, np.int64(n4)))
        run()
        ok = bool(cp.array_equal(a, b))
    else:
        c = rng.random(4 * n4, dtype=cp.float32)
        k = compiled(cuda_sources.STREAM_SOURCE, "triad_f4")
        s = np.float32(3.0)

        def run():
            k(grid, block, (b, a, c, s, np.int64(n4)))
        run()
        ok = bool(cp.allclose(b, a + s * c))
    cp.cuda.get_current_stream().synchronize()
    if not ok:
        raise RuntimeError(f"{kind} kernel produced a wrong result; timing discarded")
    timing = time_cuda(run, warmup=2, repeats=repeats, budget_s=budget_s)
    return {"device": device_name(cp), "kind": kind, "array_bytes": 16 * n4,
            "bytes_moved": arrays * 16 * n4, "timing": timing.to_raw(),
            "note": f"{kind}_f4 kernel, 16-byte accesses"}


def gpu_bandwidth(kind: str = "copy", *, array_bytes: int | None = None, repeats: int = 20,
                  budget_s: float = 2.0) -> Bandwidth:
    """Device-memory bandwidth of a copy (2 arrays) or triad ``a = b + s*c`` (3 arrays)."""
    return bandwidth_from_raw(measure_bandwidth_raw(kind, array_bytes=array_bytes,
                                                    repeats=repeats, budget_s=budget_s))


def size_sweep_from_raw(raw: dict) -> Staircase:
    """Copy bandwidth against working set (both arrays) from :func:`measure_size_sweep_raw`.

    Each recorded run is ``copies`` back-to-back copies (one CUDA graph), so the bytes of a
    run are ``copies x bytes_moved``.
    """
    sizes, gbps = [], []
    for point in raw["points"]:
        copies = int(point.get("copies", 1))
        bw = Bandwidth(raw["device"], "copy", copies * int(point["bytes_moved"]),
                       Timing.from_raw(point["timing"]), int(point["array_bytes"]))
        sizes.append(2 * bw.array_bytes)
        gbps.append(bw.gbps)
    return Staircase(raw["device"], tuple(sizes), tuple(gbps), {"L2": int(raw["l2_bytes"])})


def _graph(cp, stream, launch, count: int):
    """Capture ``count`` calls of ``launch()`` on ``stream`` into one CUDA graph."""
    with stream:
        stream.begin_capture()
        for _ in range(count):
            launch()
        return stream.end_capture()


def measure_size_sweep_raw(array_bytes: Sequence[int] | None = None, *, repeats: int = 20,
                           budget_s: float = 1.0) -> dict:
    """Copy bandwidth for arrays from 1 MiB to past 16x L2: the GPU's cache staircase.

    A small copy takes a few microseconds, less than launching it from Python, so each timed
    run replays a CUDA graph of several back-to-back copies of the same arrays; once they fit
    in L2, every copy after the first is served from L2.
    """
    cp = cupy_module()
    l2 = l2_bytes(cp)
    if array_bytes is None:
        top = min(max(16 * l2, 256 * MiB), 2 * GiB)
        array_bytes, s = [], MiB
        while s <= top:
            array_bytes.append(s)
            s *= 2
    array_bytes = [_validate.integer("array_bytes[i]", b, low=16 * 1024, high=16 * GiB)
                   for b in array_bytes]
    k = compiled(cuda_sources.STREAM_SOURCE, "copy_f4")
    stream = cp.cuda.Stream(non_blocking=True)
    points = []
    with Progress(len(array_bytes), "copy bandwidth by size") as bar:
        for size in array_bytes:
            n4 = size // 16
            a = cp.random.default_rng(3).random(4 * n4, dtype=cp.float32)
            b = cp.empty_like(a)
            # the arrays were filled on the default stream; the graph runs on another
            cp.cuda.Device().synchronize()
            grid, block = launch_1d(n4)
            copies = int(min(max(256 * MiB // size, 1), 64))
            graph = _graph(cp, stream, lambda a=a, b=b, grid=grid, block=block, n4=n4:
                           k(grid, block, (a, b, np.int64(n4))), copies)
            graph.launch(stream)
            stream.synchronize()
            if not bool(cp.array_equal(a, b)):
                raise RuntimeError(f"copy of {binary_bytes(size)} produced a wrong result")
            timing = time_cuda(lambda graph=graph: graph.launch(stream), warmup=2,
                               repeats=repeats, budget_s=budget_s, stream=stream)
            points.append({"array_bytes": 16 * n4, "bytes_moved": 2 * 16 * n4,
                           "copies": copies, "timing": timing.to_raw()})
            bar.update(1, binary_bytes(size))
            del graph, a, b
    return {"device": device_name(cp), "l2_bytes": l2, "points": points}


def gpu_size_sweep(array_bytes: Sequence[int] | None = None, **kw) -> Staircase:
    """Copy bandwidth against working-set size on the GPU (L2 vs HBM)."""
    return size_sweep_from_raw(measure_size_sweep_raw(array_bytes, **kw))

# -- strided and misaligned access vs the memory model -------------------------------------

@dataclass(frozen=True, repr=False)
class AccessSweep(Table):
    """Useful bandwidth of the strided (or misaligned) copy, measured and predicted.

    ``x`` holds the strides (``pattern == "stride"``) or offsets in elements
    (``"offset"``).  ``measured_gbps`` is useful bytes (32 elements read + 32 written per
    warp) per second; ``predicted_gbps`` = ``reference_gbps`` (the measured stride-1,
    offset-0 point) x ``useful_over_moved`` from the memory model's sectors, grouped into
    ``fetch_bytes`` blocks (32 = the sector model itself; see :func:`predicted_traffic`).
    ``l2_fetch_granularity`` is what the CUDA runtime reported during the measurement.
    """

    device: str
    pattern: str
    element_bytes: int
    x: tuple[int, ...]
    measured_gbps: tuple[float, ...]
    predicted_gbps: tuple[float, ...]
    useful_over_moved: tuple[float, ...]
    sectors_read: tuple[int, ...]
    sectors_written: tuple[int, ...]
    reference_gbps: float
    fetch_bytes: int = 32
    l2_fetch_granularity: int | None = None

    def arrays(self) -> dict[str, np.ndarray]:
        """Plot-ready arrays: x, measured and predicted GB/s, sectors per request."""
        return {"x": np.array(self.x), "measured_gbps": np.array(self.measured_gbps),
                "predicted_gbps": np.array(self.predicted_gbps),
                "sectors_read": np.array(self.sectors_read)}

    @property
    def relative_error(self) -> np.ndarray:
        """(measured - predicted) / predicted at each point."""
        m, p = np.array(self.measured_gbps), np.array(self.predicted_gbps)
        return (m - p) / p

    def misses(self, tolerance: float = 0.25) -> list[int]:
        """The x values whose measurement is more than ``tolerance`` from the prediction."""
        tolerance = _validate.real("tolerance", tolerance, low=0.0)
        return [x for x, e in zip(self.x, self.relative_error, strict=True) if abs(e) > tolerance]

    def _rows(self):
        return [(x, s, f"{u:.3f}", f"{p:,.0f}", f"{m:,.0f}", percent(e, signed=True))
                for x, s, u, p, m, e in zip(self.x, self.sectors_read, self.useful_over_moved,
                                            self.predicted_gbps, self.measured_gbps,
                                            self.relative_error, strict=True)]

    _HEADER = ("sectors read / warp", "useful/moved", "predicted GB/s", "measured GB/s",
               "error")

    def table(self):
        return (f"{self.device}: {self.element_bytes}-byte elements, useful bandwidth by "
                f"{self.pattern} (reference {bandwidth(self.reference_gbps * 1e9)}; prediction "
                f"moves {self.fetch_bytes}-byte blocks)", (self.pattern, *self._HEADER),
                self._rows())


def access_sweep_from_raw(raw: dict, reference_gbps: float | None = None, *,
                          fetch_bytes: int | None = None) -> AccessSweep:
    """Measured useful GB/s per point and the memory model's prediction beside it.

    ``fetch_bytes=32`` predicts with the memory model's 32-byte sectors alone;
    ``fetch_bytes=64`` also counts the 64-byte blocks L2 fetches from DRAM.  The default is
    the L2 fetch granularity the CUDA runtime reported during the measurement (32 if the
    raw result does not say).
    """
    if fetch_bytes is None:
        fetch_bytes = raw.get("l2_fetch_granularity") or 32
    eb, n = int(raw["element_bytes"]), int(raw["n_elements"])
    pattern = _validate.choice("pattern", raw["pattern"], ("stride", "offset"))
    xs, measured, preds = [], [], []
    for p in raw["points"]:
        seconds = Timing.from_raw(p["timing"]).median
        measured.append(2 * n * eb / seconds / 1e9)
        preds.append(predicted_traffic(p["stride"], eb, p["offset"], fetch_bytes=fetch_bytes))
        xs.append(int(p["stride"] if pattern == "stride" else p["offset"]))
    if reference_gbps is None:
        base = [m for m, p in zip(measured, raw["points"], strict=True)
                if p["stride"] == 1 and p["offset"] == 0]
        if not base:
            raise ValueError("raw has no stride-1, offset-0 point; pass reference_gbps")
        reference_gbps = base[0]
    reference_gbps = _validate.positive("reference_gbps", reference_gbps)
    return AccessSweep(raw["device"], pattern, eb, tuple(xs), tuple(measured),
                       tuple(reference_gbps * t["useful_over_moved"] for t in preds),
                       tuple(t["useful_over_moved"] for t in preds),
                       tuple(t["sectors_read"] for t in preds),
                       tuple(t["sectors_written"] for t in preds), reference_gbps,
                       fetch_bytes, raw.get("l2_fetch_granularity"))


DEFAULT_STRIDES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
DEFAULT_OFFSETS = (0, 1, 2, 3, 4, 8, 16, 31, 32)


#: cudaLimitMaxL2FetchGranularity (CUDA Runtime API, enum cudaLimit)
LIMIT_L2_FETCH_GRANULARITY = 0x05


def measure_access_raw(pattern: str = "stride", values: Sequence[int] | None = None, *,
                       element_bytes: int = 4, out_bytes: int | None = None,
                       repeats: int = 20, budget_s: float = 1.0,
                       l2_fetch_granularity: int | None = None) -> dict:
    """Time ``dst[i] = src[i*stride + offset]`` at each stride (or offset); check each result.

    ``out_bytes`` (default 4x L2, at least 128 MiB) is the size of the contiguous output;
    the input spans ``out_bytes x max stride`` so that each read element is new.
    ``l2_fetch_granularity`` (bytes, 32..128) sets the CUDA runtime's hint for how much L2
    fetches from DRAM per miss (``cudaLimitMaxL2FetchGranularity``) for this measurement
    only; the value in effect is recorded either way.
    """
    _validate.choice("pattern", pattern, ("stride", "offset"))
    _validate.choice("element_bytes", element_bytes, tuple(cuda_sources.ELEMENT_TYPES))
    if l2_fetch_granularity is not None:
        _validate.choice("l2_fetch_granularity", l2_fetch_granularity, (32, 64, 128))
    cp = cupy_module()
    rt = cp.cuda.runtime
    previous = rt.deviceGetLimit(LIMIT_L2_FETCH_GRANULARITY)
    if l2_fetch_granularity is not None:
        rt.deviceSetLimit(LIMIT_L2_FETCH_GRANULARITY, int(l2_fetch_granularity))
    try:
        raw = _measure_access(cp, pattern, values, element_bytes, out_bytes, repeats, budget_s)
        raw["l2_fetch_granularity"] = int(rt.deviceGetLimit(LIMIT_L2_FETCH_GRANULARITY))
    finally:
        rt.deviceSetLimit(LIMIT_L2_FETCH_GRANULARITY, int(previous))
    return raw


def _measure_access(cp, pattern, values, element_bytes, out_bytes, repeats, budget_s) -> dict:
    pattern = _validate.choice("pattern", pattern, ("stride", "offset"))
    eb = _validate.choice("element_bytes", element_bytes, tuple(cuda_sources.ELEMENT_TYPES))
    if values is None:
        values = DEFAULT_STRIDES if pattern == "stride" else DEFAULT_OFFSETS
    values = [_validate.integer("values[i]", v, low=0 if pattern == "offset" else 1, high=1024)
              for v in values]
    if out_bytes is None:
        out_bytes = max(4 * l2_bytes(cp), 128 * MiB)
    per_block = 256 * cuda_sources.STRIDED_UNROLL  # the kernel has no bounds checks
    n = _validate.integer("out_bytes", out_bytes, low=eb * per_block, high=16 * GiB) // eb
    n -= n % per_block
    span = n * max(values) + 1 if pattern == "stride" else n + max(values)
    free = cp.cuda.runtime.memGetInfo()[0]
    if (span + n) * eb > free // 2:
        raise ValueError(f"out_bytes={out_bytes}: the input would span {binary_bytes(span * eb)},"
                         f" more than half the free GPU memory ({binary_bytes(free)})")
    words = eb // 4
    src = cp.arange(span * words, dtype=cp.float32)  # nonzero, distinct values
    dst = cp.empty(n * words, dtype=cp.float32)
    k = compiled(cuda_sources.STRIDED_SOURCE, f"strided_copy_{eb}")
    grid, block = (n // per_block,), (256,)
    points = []
    with Progress(len(values), f"{pattern} sweep, {eb}-byte elements") as bar:
        for v in values:
            stride, offset = (v, 0) if pattern == "stride" else (1, v)
            args = (src, dst, np.int64(n), np.int64(stride), np.int64(offset))

            def run(args=args):
                k(grid, block, args)
            dst.fill(np.nan)
            run()
            want = src.reshape(-1, words)[offset: offset + n * stride: stride].ravel()
            ok = bool(cp.array_equal(dst, want))
            if not ok:
                raise RuntimeError(f"strided copy wrong at stride {stride}, offset {offset}")
            timing = time_cuda(run, warmup=2, repeats=repeats, budget_s=budget_s)
            points.append({"stride": stride, "offset": offset, "timing": timing.to_raw()})
            bar.update(1, f"{pattern} {v}")
    return {"device": device_name(cp), "pattern": pattern, "element_bytes": eb,
            "n_elements": n, "points": points}


def strided_sweep(strides: Sequence[int] = DEFAULT_STRIDES, *, element_bytes: int = 4,
                  **kw) -> AccessSweep:
    """Useful bandwidth vs stride, beside the memory model's sector prediction."""
    return access_sweep_from_raw(measure_access_raw("stride", strides,
                                                    element_bytes=element_bytes, **kw))


def offset_sweep(offsets: Sequence[int] = DEFAULT_OFFSETS, *, element_bytes: int = 4,
                 **kw) -> AccessSweep:
    """Useful bandwidth vs misalignment (offset in elements), beside the model."""
    return access_sweep_from_raw(measure_access_raw("offset", offsets,
                                                    element_bytes=element_bytes, **kw))

# -- shared-memory bank conflicts ------------------------------------------------------------

def smem_addresses(stride: int, element_bytes: int) -> list[int]:
    """The 32 byte addresses the ``smem_*`` kernel's warp reads at ``stride`` (elements)."""
    stride = _validate.integer("stride", stride, low=0, high=1 << 16)
    element_bytes = _validate.choice("element_bytes", element_bytes, tuple(cuda_sources.ELEMENT_TYPES))
    mask = cuda_sources.SMEM_ELEMENTS - 1
    return [((lane * stride) & mask) * element_bytes for lane in range(32)]


@dataclass(frozen=True, repr=False)
class BankSweep(Table):
    """Shared-memory load cost by stride: measured SM cycles per warp-wide load beside the
    memory model's wavefronts (one wavefront per cycle per SM: 32 banks x 4 bytes)."""

    device: str
    element_bytes: int
    strides: tuple[int, ...]
    cycles_per_load: tuple[float, ...]
    wavefronts: tuple[int, ...]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"stride": np.array(self.strides), "cycles_per_load": np.array(self.cycles_per_load),
                "wavefronts": np.array(self.wavefronts)}

    @property
    def ratio(self) -> np.ndarray:
        """Measured cycles / predicted wavefronts (1.0 = the model exactly)."""
        return np.array(self.cycles_per_load) / np.array(self.wavefronts)

    def _rows(self):
        return [(s, w, f"{c:.2f}", f"{r:.2f}")
                for s, w, c, r in zip(self.strides, self.wavefronts, self.cycles_per_load,
                                      self.ratio, strict=True)]

    _HEADER = ("stride", "predicted wavefronts", "measured cycles/load", "ratio")

    def table(self):
        return (f"{self.device}: shared-memory loads, {binary_bytes(self.element_bytes)} per lane",
                self._HEADER, self._rows())


def bank_sweep_from_raw(raw: dict) -> BankSweep:
    """Cycles per warp-load = median block cycles / (warps per block x loads per warp)."""
    from ..memory import shared_load

    eb = int(raw["element_bytes"])
    loads = int(raw["warps_per_block"]) * int(raw["iters"]) * int(raw["loads_per_iter"])
    strides, cycles, waves = [], [], []
    for p in raw["points"]:
        strides.append(int(p["stride"]))
        cycles.append(float(np.median(p["block_cycles"])) / loads)
        waves.append(int(shared_load(smem_addresses(p["stride"], eb),
                                     bytes_per_thread=eb).wavefronts))
    return BankSweep(raw["device"], eb, tuple(strides), tuple(cycles), tuple(waves))


DEFAULT_BANK_STRIDES = (0, 1, 2, 3, 4, 8, 16, 32, 33)


def measure_bank_raw(strides: Sequence[int] = DEFAULT_BANK_STRIDES, *, element_bytes: int = 4,
                     iters: int = 256, repeats: int = 10, budget_s: float = 1.0) -> dict:
    """Run the ``smem_*`` kernel (one 1024-thread block per SM) at each stride.

    Each block's thread 0 reads ``clock64()`` before and after the loop (after a barrier),
    so a block's cycle count covers all 32 of its warps; one block per SM means those are
    the SM's cycles.  CUDA-event times are kept as well.
    """
    eb = _validate.choice("element_bytes", element_bytes, tuple(cuda_sources.ELEMENT_TYPES))
    iters = _validate.integer("iters", iters, low=1, high=1 << 16)
    strides = [_validate.integer("strides[i]", s, low=0, high=4096) for s in strides]
    cp = cupy_module()
    sms = int(cp.cuda.runtime.deviceGetAttribute(DEVICE_ATTRIBUTES["multiprocessor_count"],
                                                 cp.cuda.Device().id))
    k = compiled(cuda_sources.SMEM_SOURCE, f"smem_{eb}")
    out = cp.zeros(sms, dtype=cp.float32)
    cycles = cp.zeros(sms, dtype=cp.int64)
    threads = 1024
    points = []
    with Progress(len(strides), f"bank conflicts, {eb}-byte loads") as bar:
        for s in strides:
            def run(s=s):
                k((sms,), (threads,), (out, cycles, np.int32(s), np.int32(iters)))
            timing = time_cuda(run, warmup=2, repeats=repeats, budget_s=budget_s)
            run()
            block_cycles = [int(c) for c in cp.asnumpy(cycles)]
            points.append({"stride": s, "timing": timing.to_raw(), "block_cycles": block_cycles})
            bar.update(1, f"stride {s}")
    return {"device": device_name(cp), "element_bytes": eb, "warps_per_block": threads // 32,
            "blocks": sms, "iters": iters, "loads_per_iter": cuda_sources.SMEM_UNROLL,
            "points": points}


def bank_sweep(strides: Sequence[int] = DEFAULT_BANK_STRIDES, *, element_bytes: int = 4,
               **kw) -> BankSweep:
    """Shared-memory load cost by stride (bank conflicts, broadcast, padding = stride 33)."""
    return bank_sweep_from_raw(measure_bank_raw(strides, element_bytes=element_bytes, **kw))
