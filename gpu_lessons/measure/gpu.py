"""Measure an NVIDIA GPU with CuPy, and set each measurement beside the course's models.

CuPy is imported only inside the functions that need it, so this module imports anywhere.
A notebook GPU cell goes through :func:`on_gpu`, which returns the measurement, or prints one
line and returns ``None`` when there is no usable GPU::

    from gpu_lessons.measure import on_gpu, strided_sweep
    sweep = on_gpu(strided_sweep)   # no GPU -> one line, None

Each measurement comes in two halves:

* ``measure_*_raw(...)`` runs on the GPU and returns plain, JSON-ready numbers (sizes,
  seconds of every timed run, counters) — what ``tools/device/measure_h200.py`` records;
* ``*_from_raw(raw)`` is pure arithmetic: it turns those numbers into GB/s, TFLOP/s or cycles
  and sets the model's prediction beside them (the memory model's sectors and wavefronts,
  the occupancy calculator).  The tests run it on recorded H200 results.

The public functions (``gpu_bandwidth``, ``strided_sweep``, ...) are the two halves chained.
Sizes default to many times the L2 cache, every loop is bounded by a repeat count and a time
budget, and every kernel's output is checked before its timing is trusted.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import _validate
from . import kernels
from .cpu import Staircase
from .timing import (
    Bandwidth,
    FlopRate,
    Progress,
    Timing,
    format_bytes,
    format_seconds,
    html_table,
    time_cuda,
    time_host,
)

SKIP_TAIL = " — skipped; the rest of this notebook runs without it."
SKIP_LINE = "No CUDA GPU ({why})" + SKIP_TAIL
FAIL_LINE = "GPU measurement failed ({why})" + SKIP_TAIL
#: A cell that needs several GPUs (``gpu_lessons.measure.multigpu``) on a machine with fewer.
GPUS_LINE = "Needs {need} GPUs, found {found}" + SKIP_TAIL

_MiB, _GiB = 2**20, 2**30

# -- is there a GPU? -------------------------------------------------------------------------

_SHORT_REASONS = (
    ("CuPy is not installed", "CuPy not installed"),
    ("CuPy failed to import", "CuPy failed to import"),
    ("CuPy found no CUDA device", "CuPy found no CUDA device"),
    ("CuPy could not reach a CUDA device", "no CUDA driver or device"),
    ("GPU_LESSONS_NO_GPU is set", "GPU_LESSONS_NO_GPU is set"),
)


def gpu_status() -> tuple[bool, str]:
    """``(True, "")`` when CuPy can use a CUDA device, else ``(False, short reason)``."""
    from ..env import detect_gpu

    info, reason = detect_gpu()
    if info is not None:
        return True, ""
    for prefix, short in _SHORT_REASONS:
        if reason.startswith(prefix):
            return False, short
    return False, reason.split(":")[0][:80] or "unknown reason"


def gpu_available() -> bool:
    """True when CuPy is installed and sees a CUDA device (never raises)."""
    return gpu_status()[0]


def skip_line() -> str | None:
    """The one line a GPU cell prints when it cannot run, or ``None`` when it can."""
    ok, why = gpu_status()
    return None if ok else SKIP_LINE.format(why=why)


def _cuda_errors() -> tuple[type[BaseException], ...]:
    """CuPy's CUDA, compiler and cuBLAS error types (empty when CuPy is missing)."""
    found = []
    try:
        import cupy
    except Exception:
        return ()
    for path in ("cuda.runtime.CUDARuntimeError", "cuda.driver.CUDADriverError",
                 "cuda.memory.OutOfMemoryError", "cuda.compiler.CompileException",
                 "cuda.cublas.CUBLASError"):
        obj = cupy
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            found.append(obj)
    return tuple(found)


def on_gpu(measurement, *args, **kwargs):
    """Run ``measurement(*args, **kwargs)`` if a GPU is usable; else print one line, return None.

    This is what a notebook's optional GPU cell calls, so that without a GPU the notebook
    still runs to the end.  A CUDA error during the measurement (out of memory, a driver
    problem) is also reported in one line instead of a traceback; bad arguments still raise.
    """
    if not callable(measurement):
        raise TypeError(f"measurement must be callable, got {measurement!r}")
    line = skip_line()
    if line is not None:
        print(line)
        return None
    errors = _cuda_errors()
    try:
        return measurement(*args, **kwargs)
    except errors as exc:
        print(FAIL_LINE.format(why=f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"))
        return None


def _cupy():
    ok, why = gpu_status()
    if not ok:
        raise RuntimeError(f"No CUDA GPU ({why}): this measurement needs CuPy and an NVIDIA "
                           "GPU; wrap it in gpu_lessons.measure.on_gpu(...) in a notebook")
    import cupy

    # arrays of an earlier measurement are gone by now: give their memory back to the device
    cupy.get_default_memory_pool().free_all_blocks()
    return cupy


_KERNELS: dict = {}


def compiled(source: str, name: str, options: Sequence[str] = ()):
    """A compiled CuPy ``RawKernel`` (cached per source, name and options)."""
    cp = _cupy()
    key = (source, name, tuple(options))
    if key not in _KERNELS:
        kernel = cp.RawKernel(source, name, options=tuple(options))
        kernel.compile()
        _KERNELS[key] = kernel
    return _KERNELS[key]


@dataclass(frozen=True)
class KernelResources:
    """What the compiler gave one kernel: registers per thread, local memory per thread and
    static shared memory per block.

    ``local_bytes`` is per-thread *local memory* (CUDA C++ Programming Guide, "Device Memory
    Accesses → Local Memory"; seed erratum E8): register spills and arrays the compiler could
    not keep in registers, placed in device memory and cached in L1/L2.  The three numbers are
    the compiled function's attributes (``cuFuncGetAttribute``: ``NUM_REGS``,
    ``LOCAL_SIZE_BYTES``, ``SHARED_SIZE_BYTES``), the same ones ``nvcc -Xptxas -v`` prints as
    registers, stack frame and smem.  Dynamic shared memory is chosen at launch, so it is not
    here.
    """

    name: str
    options: tuple[str, ...]
    registers_per_thread: int
    local_bytes: int
    static_shared_bytes: int

    def __repr__(self) -> str:
        opts = f" {' '.join(self.options)}" if self.options else ""
        return (f"KernelResources({self.name}{opts}: {self.registers_per_thread} registers/thread, "
                f"{self.local_bytes:,} B local memory/thread (spills, local arrays), "
                f"{self.static_shared_bytes:,} B static shared memory/block)")

    def _repr_html_(self) -> str:
        rows = [("compiler options", " ".join(self.options) or "none"),
                ("registers", f"{self.registers_per_thread} per thread"),
                ("local memory (spills, local arrays)", f"{self.local_bytes:,} B per thread"),
                ("static shared memory", f"{self.static_shared_bytes:,} B per block")]
        return html_table(f"{self.name}: compiled resources", ("", ""), rows)


def _kernel_args(source, name, options) -> tuple[str, str, tuple[str, ...]]:
    if not isinstance(source, str) or not source.strip():
        raise TypeError(f"source must be CUDA C source code (a non-empty str), got {source!r:.80}")
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be the kernel's name (a non-empty str), got {name!r}")
    if isinstance(options, str) or not isinstance(options, Sequence) or \
            not all(isinstance(o, str) for o in options):
        raise TypeError(f"options must be a list or tuple of compiler flags (str), e.g. "
                        f"('--maxrregcount=32',), got {options!r}")
    return source, name, tuple(options)


def resources_from_raw(raw: dict) -> KernelResources:
    """The :class:`KernelResources` of a record made by :func:`measure_resources_raw`."""
    return KernelResources(raw["name"], tuple(raw["options"]), int(raw["registers_per_thread"]),
                           int(raw["local_bytes"]), int(raw["static_shared_bytes"]))


def measure_resources_raw(source: str, name: str, options: Sequence[str] = ()) -> dict:
    """Compile kernel ``name`` of CUDA ``source`` with NVRTC ``options`` (through CuPy) and
    read its function attributes: registers, local and static shared bytes."""
    source, name, options = _kernel_args(source, name, options)
    k = compiled(source, name, options)
    return {"name": name, "options": list(options), "registers_per_thread": int(k.num_regs),
            "local_bytes": int(k.local_size_bytes),
            "static_shared_bytes": int(k.shared_size_bytes)}


def kernel_resources(source: str, name: str, options: Sequence[str] = ()) -> KernelResources:
    """Registers per thread, local (spill) bytes per thread and static shared bytes per block
    of a kernel compiled with ``options`` -- e.g. ``("--maxrregcount=32",)`` to watch a
    register cap turn into spills.  Needs CuPy and a GPU: call it through :func:`on_gpu`."""
    return resources_from_raw(measure_resources_raw(source, name, options))


def _device_name(cp) -> str:
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def _catalog_gpu(name: str | None):
    if not name:
        return None
    from ..hardware import gpu

    try:
        return gpu(name)
    except (ValueError, TypeError):
        return None


# -- device attributes next to the catalog ---------------------------------------------------

#: cudaDeviceAttr numbers (CUDA Runtime API, enum cudaDeviceAttr) for what the lessons use
DEVICE_ATTRIBUTES = {
    "max_threads_per_block": 1, "max_shared_memory_per_block": 8, "warp_size": 10,
    "max_registers_per_block": 12, "clock_rate_khz": 13, "multiprocessor_count": 16,
    "memory_clock_rate_khz": 36, "global_memory_bus_width_bits": 37, "l2_cache_size": 38,
    "max_threads_per_multiprocessor": 39, "compute_capability_major": 75,
    "compute_capability_minor": 76, "max_shared_memory_per_multiprocessor": 81,
    "max_registers_per_multiprocessor": 82, "max_shared_memory_per_block_optin": 97,
    "max_blocks_per_multiprocessor": 106, "max_persisting_l2_cache_size": 108,
    "reserved_shared_memory_per_block": 111,
}


@dataclass(frozen=True)
class DeviceReport:
    """What the CUDA runtime says about the GPU, next to the catalog's datasheet figures.

    ``rows`` are ``(quantity, device value, catalog value)`` as text with units.
    ``bandwidth_from_bus`` is the seed's ``beta = bus width x data rate`` computed from the
    device's own memory clock and bus width (HBM moves data on both clock edges), in B/s.
    """

    name: str
    cc: str
    catalog_name: str | None
    attributes: dict
    rows: tuple[tuple[str, str, str], ...]
    bandwidth_from_bus: float | None

    def __repr__(self) -> str:
        width = max(len(r[0]) for r in self.rows)
        lines = [f"{self.name} (CC {self.cc}); catalog: {self.catalog_name or 'no match'}",
                 f"{'':<{width}}  {'device':>16}  {'catalog':>16}"]
        lines += [f"{q:<{width}}  {d:>16}  {c:>16}" for q, d, c in self.rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(f"{self.name}: CUDA runtime vs catalog ({self.catalog_name or 'none'})",
                          ("quantity", "device", "catalog"), self.rows)


def device_report_from_raw(raw: dict) -> DeviceReport:
    """Build the report from :func:`measure_device_raw`'s record (pure arithmetic)."""
    a = raw["attributes"]
    g = _catalog_gpu(raw.get("catalog_name"))

    def val(key, scale=1.0, fmt="{:,.0f}", unit=""):
        v = a.get(key)
        return "—" if v is None or v < 0 else fmt.format(v * scale) + unit

    def cat(value, fmt="{:,.0f}", unit=""):
        return "—" if g is None or value is None else fmt.format(value) + unit

    bus, mem_khz = a.get("global_memory_bus_width_bits"), a.get("memory_clock_rate_khz")
    beta = None
    if bus and mem_khz and bus > 0 and mem_khz > 0:
        from ..hardware import memory_bandwidth

        beta = memory_bandwidth(int(bus), 2 * mem_khz * 1e3)
    rows = (
        ("compute capability", raw["cc"], cat(g and g.cc, "{}")),
        ("SMs", val("multiprocessor_count"), cat(g and g.sms)),
        ("max SM clock", val("clock_rate_khz", 1e-3, unit=" MHz"),
         cat(g and g.boost_mhz, unit=" MHz")),
        ("memory", f"{raw['total_memory_bytes'] / _GiB:,.1f} GiB",
         cat(g and g.memory_gb, "{:g}", " GB")),
        ("memory bus", val("global_memory_bus_width_bits", unit=" bit"),
         cat(g and g.bus_width_bits, unit=" bit")),
        ("memory clock", val("memory_clock_rate_khz", 1e-3, unit=" MHz"),
         cat(g and g.memory_clock_mhz, unit=" MHz")),
        ("DRAM bandwidth", "—" if beta is None else f"{beta / 1e9:,.0f} GB/s (bus x rate)",
         cat(g and g.bandwidth_gbs, unit=" GB/s")),
        ("L2 cache", val("l2_cache_size", 1 / _MiB, "{:,.1f}", " MiB"),
         cat(g and g.l2_bytes / _MiB, "{:,.1f}", " MiB")),
        ("shared memory / SM", val("max_shared_memory_per_multiprocessor", 1 / 1024, "{:,.0f}",
                                   " KiB"), "—"),
        ("shared memory / block (opt-in)", val("max_shared_memory_per_block_optin", 1 / 1024,
                                               "{:,.0f}", " KiB"), "—"),
        ("reserved shared memory / block", val("reserved_shared_memory_per_block", unit=" B"),
         "—"),
        ("registers / SM", val("max_registers_per_multiprocessor"), "—"),
        ("max threads / SM", val("max_threads_per_multiprocessor"), "—"),
        ("max blocks / SM", val("max_blocks_per_multiprocessor"), "—"),
    )
    return DeviceReport(raw["name"], raw["cc"], g.name if g else None, dict(a), rows, beta)


def measure_device_raw() -> dict:
    """Read the device's attributes and versions through the CUDA runtime (needs CuPy)."""
    cp = _cupy()
    from ..env import match_catalog

    dev = cp.cuda.Device()
    rt = cp.cuda.runtime
    attrs = {}
    for key, number in DEVICE_ATTRIBUTES.items():
        try:
            attrs[key] = int(rt.deviceGetAttribute(number, dev.id))
        except Exception:  # an attribute a newer CUDA removed: report it as unknown
            attrs[key] = None
    props = rt.getDeviceProperties(dev.id)
    name = _device_name(cp)
    cc = f"{attrs['compute_capability_major']}.{attrs['compute_capability_minor']}"
    return {"name": name, "cc": cc, "total_memory_bytes": int(props["totalGlobalMem"]),
            "attributes": attrs, "driver_version": int(rt.driverGetVersion()),
            "runtime_version": int(rt.runtimeGetVersion()), "cupy_version": cp.__version__,
            "catalog_name": match_catalog(name, attrs["multiprocessor_count"] or 0)}


def device_report() -> DeviceReport:
    """The CUDA runtime's view of GPU 0 next to the catalog entry it matches."""
    return device_report_from_raw(measure_device_raw())


# -- streaming bandwidth ---------------------------------------------------------------------

def bandwidth_from_raw(raw: dict) -> Bandwidth:
    """A :class:`Bandwidth` from a recorded run (bytes moved per run and the run times)."""
    return Bandwidth(raw["device"], raw["kind"], int(raw["bytes_moved"]),
                     Timing.from_raw(raw["timing"]), int(raw.get("array_bytes", 0)),
                     raw.get("note", ""))


def _l2_bytes(cp) -> int:
    return int(cp.cuda.runtime.deviceGetAttribute(DEVICE_ATTRIBUTES["l2_cache_size"],
                                                  cp.cuda.Device().id))


def default_gpu_array_bytes(arrays: int = 2) -> int:
    """Bytes per array: 16x the L2 cache, within 256 MiB..2 GiB, and within free memory.

    Sixteen times L2 makes L2 hits negligible (the H200's 60 MiB L2 gives 960 MiB arrays).
    """
    cp = _cupy()
    arrays = _validate.integer("arrays", arrays, low=1, high=16)
    size = min(max(16 * _l2_bytes(cp), 256 * _MiB), 2 * _GiB)
    free = cp.cuda.runtime.memGetInfo()[0]
    size = min(size, free // (2 * arrays))
    return int(size // 4096 * 4096)


def _launch_1d(n: int, threads: int = 256) -> tuple[tuple[int], tuple[int]]:
    return (max(1, math.ceil(n / threads)),), (threads,)


def measure_bandwidth_raw(kind: str = "copy", *, array_bytes: int | None = None,
                          repeats: int = 20, budget_s: float = 2.0) -> dict:
    """Time the ``copy_f4`` or ``triad_f4`` kernel; bytes moved = 2 or 3 arrays per run."""
    _validate.choice("kind", kind, ("copy", "triad"))
    if array_bytes is not None:
        array_bytes = _validate.integer("array_bytes", array_bytes, low=16 * 1024,
                                        high=64 * _GiB)
    arrays = 2 if kind == "copy" else 3
    cp = _cupy()
    if array_bytes is None:
        array_bytes = default_gpu_array_bytes(arrays)
    n4 = array_bytes // 16  # float4 elements
    rng = cp.random.default_rng(1)
    a = rng.random(4 * n4, dtype=cp.float32)
    b = cp.empty_like(a)
    grid, block = _launch_1d(n4)
    if kind == "copy":
        k = compiled(kernels.STREAM_SOURCE, "copy_f4")

        def run():
            k(grid, block, (a, b, np.int64(n4)))
        run()
        ok = bool(cp.array_equal(a, b))
    else:
        c = rng.random(4 * n4, dtype=cp.float32)
        k = compiled(kernels.STREAM_SOURCE, "triad_f4")
        s = np.float32(3.0)

        def run():
            k(grid, block, (b, a, c, s, np.int64(n4)))
        run()
        ok = bool(cp.allclose(b, a + s * c))
    cp.cuda.get_current_stream().synchronize()
    if not ok:
        raise RuntimeError(f"{kind} kernel produced a wrong result; timing discarded")
    timing = time_cuda(run, warmup=2, repeats=repeats, budget_s=budget_s)
    return {"device": _device_name(cp), "kind": kind, "array_bytes": 16 * n4,
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
    cp = _cupy()
    l2 = _l2_bytes(cp)
    if array_bytes is None:
        top = min(max(16 * l2, 256 * _MiB), 2 * _GiB)
        array_bytes, s = [], _MiB
        while s <= top:
            array_bytes.append(s)
            s *= 2
    array_bytes = [_validate.integer("array_bytes[i]", b, low=16 * 1024, high=16 * _GiB)
                   for b in array_bytes]
    k = compiled(kernels.STREAM_SOURCE, "copy_f4")
    stream = cp.cuda.Stream(non_blocking=True)
    points = []
    with Progress(len(array_bytes), "copy bandwidth by size") as bar:
        for size in array_bytes:
            n4 = size // 16
            a = cp.random.default_rng(3).random(4 * n4, dtype=cp.float32)
            b = cp.empty_like(a)
            # the arrays were filled on the default stream; the graph runs on another
            cp.cuda.Device().synchronize()
            grid, block = _launch_1d(n4)
            copies = int(min(max(256 * _MiB // size, 1), 64))
            graph = _graph(cp, stream, lambda a=a, b=b, grid=grid, block=block, n4=n4:
                           k(grid, block, (a, b, np.int64(n4))), copies)
            graph.launch(stream)
            stream.synchronize()
            if not bool(cp.array_equal(a, b)):
                raise RuntimeError(f"copy of {format_bytes(size)} produced a wrong result")
            timing = time_cuda(lambda graph=graph: graph.launch(stream), warmup=2,
                               repeats=repeats, budget_s=budget_s, stream=stream)
            points.append({"array_bytes": 16 * n4, "bytes_moved": 2 * 16 * n4,
                           "copies": copies, "timing": timing.to_raw()})
            bar.update(1, format_bytes(size))
            del graph, a, b
    return {"device": _device_name(cp), "l2_bytes": l2, "points": points}


def gpu_size_sweep(array_bytes: Sequence[int] | None = None, **kw) -> Staircase:
    """Copy bandwidth against working-set size on the GPU (L2 vs HBM)."""
    return size_sweep_from_raw(measure_size_sweep_raw(array_bytes, **kw))


# -- strided and misaligned access vs the memory model -------------------------------------

#: Consecutive warps whose traffic is counted together (see :func:`predicted_traffic`).
NEIGHBOUR_WARPS = 32


def predicted_traffic(stride: int, element_bytes: int, offset: int = 0, *,
                      fetch_bytes: int = 32) -> dict:
    """Bytes one warp of the strided copy needs and moves from DRAM, by the memory model.

    The copy kernel does ``dst[i] = src[i*stride + offset]``: 32 lanes read one element each
    at ``(offset + lane*stride) * element_bytes`` and write one element each contiguously.
    *Useful* bytes are what the program asked for: 32 elements read + 32 written.  *Moved*
    bytes are whole 32-byte sectors, found by ``gpu_lessons.memory.global_load`` for each
    warp's read and write (stores move sectors the same way).  At stride 1 the two are
    equal, so ``useful / moved`` scales the stride-1 bandwidth to a prediction.

    DRAM traffic is what limits a copy this large, so the sectors are counted as DRAM sees
    them: over :data:`NEIGHBOUR_WARPS` consecutive warps, per warp.  Neighbouring warps run
    at about the same time and L2 keeps a sector until the neighbour asks for it, so a sector
    two warps share (a misaligned copy's boundary) moves once.  ``sectors_read`` is still
    the first warp's own count, the number Nsight Compute reports per request.

    ``fetch_bytes`` > 32: on a miss L2 fetches ``fetch_bytes`` aligned bytes from DRAM (the
    CUDA runtime's ``cudaLimitMaxL2FetchGranularity``: 64 B on the H200 in
    ``docs/measured/h200.md``), so the moved bytes are the distinct ``fetch_bytes`` blocks the
    sectors fall in.  It matters once lanes are 64 bytes or more apart and each uses only one
    sector of its block.
    """
    from ..memory import global_load, strided

    stride = _validate.integer("stride", stride, low=0, high=1 << 20)
    element_bytes = _validate.choice("element_bytes", element_bytes, tuple(kernels.ELEMENT_TYPES))
    offset = _validate.integer("offset", offset, low=0, high=1 << 20)
    fetch_bytes = _validate.choice("fetch_bytes", fetch_bytes, (32, 64, 128))
    eb = element_bytes
    reads = [global_load(strided(stride, element_bytes=eb, offset=(offset + 32 * w * stride) * eb),
                         bytes_per_thread=eb) for w in range(NEIGHBOUR_WARPS)]
    writes = [global_load(strided(1, element_bytes=eb, offset=32 * w * eb), bytes_per_thread=eb)
              for w in range(NEIGHBOUR_WARPS)]

    def moved(loads) -> float:
        blocks = set().union(*(load.block_ids(fetch_bytes) for load in loads))
        return fetch_bytes * len(blocks) / len(loads)

    useful = 2 * 32 * eb
    total = moved(reads) + moved(writes)
    return {"sectors_read": int(reads[0].sectors), "sectors_written": int(writes[0].sectors),
            "useful_bytes": useful, "moved_bytes": total, "useful_over_moved": useful / total}


@dataclass(frozen=True)
class AccessSweep:
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
        return [(x, s, f"{u:.3f}", f"{p:,.0f}", f"{m:,.0f}", f"{100 * e:+.0f} %")
                for x, s, u, p, m, e in zip(self.x, self.sectors_read, self.useful_over_moved,
                                            self.predicted_gbps, self.measured_gbps,
                                            self.relative_error, strict=True)]

    _HEADER = ("sectors read / warp", "useful/moved", "predicted GB/s", "measured GB/s",
               "error")

    def __repr__(self) -> str:
        head = (self.pattern, *self._HEADER)
        lines = [f"{self.device}: {self.element_bytes}-byte elements, useful bandwidth by "
                 f"{self.pattern} (reference {self.reference_gbps:,.0f} GB/s; prediction moves "
                 f"{self.fetch_bytes}-byte blocks)",
                 "  ".join(f"{h:>14}" for h in head)]
        lines += ["  ".join(f"{c!s:>14}" for c in row) for row in self._rows()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(f"{self.device}: {self.element_bytes}-byte elements by {self.pattern}",
                          (self.pattern, *self._HEADER), self._rows())


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
    _validate.choice("element_bytes", element_bytes, tuple(kernels.ELEMENT_TYPES))
    if l2_fetch_granularity is not None:
        _validate.choice("l2_fetch_granularity", l2_fetch_granularity, (32, 64, 128))
    cp = _cupy()
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
    eb = _validate.choice("element_bytes", element_bytes, tuple(kernels.ELEMENT_TYPES))
    if values is None:
        values = DEFAULT_STRIDES if pattern == "stride" else DEFAULT_OFFSETS
    values = [_validate.integer("values[i]", v, low=0 if pattern == "offset" else 1, high=1024)
              for v in values]
    if out_bytes is None:
        out_bytes = max(4 * _l2_bytes(cp), 128 * _MiB)
    per_block = 256 * kernels.STRIDED_UNROLL  # the kernel has no bounds checks
    n = _validate.integer("out_bytes", out_bytes, low=eb * per_block, high=16 * _GiB) // eb
    n -= n % per_block
    span = n * max(values) + 1 if pattern == "stride" else n + max(values)
    free = cp.cuda.runtime.memGetInfo()[0]
    if (span + n) * eb > free // 2:
        raise ValueError(f"out_bytes={out_bytes}: the input would span {format_bytes(span * eb)},"
                         f" more than half the free GPU memory ({format_bytes(free)})")
    words = eb // 4
    src = cp.arange(span * words, dtype=cp.float32)  # nonzero, distinct values
    dst = cp.empty(n * words, dtype=cp.float32)
    k = compiled(kernels.STRIDED_SOURCE, f"strided_copy_{eb}")
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
    return {"device": _device_name(cp), "pattern": pattern, "element_bytes": eb,
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
    element_bytes = _validate.choice("element_bytes", element_bytes, tuple(kernels.ELEMENT_TYPES))
    mask = kernels.SMEM_ELEMENTS - 1
    return [((lane * stride) & mask) * element_bytes for lane in range(32)]


@dataclass(frozen=True)
class BankSweep:
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

    def __repr__(self) -> str:
        lines = [f"{self.device}: shared-memory loads of {self.element_bytes} bytes per lane",
                 "  ".join(f"{h:>20}" for h in self._HEADER)]
        lines += ["  ".join(f"{c!s:>20}" for c in row) for row in self._rows()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(f"{self.device}: shared-memory loads, {self.element_bytes} B per lane",
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
    eb = _validate.choice("element_bytes", element_bytes, tuple(kernels.ELEMENT_TYPES))
    iters = _validate.integer("iters", iters, low=1, high=1 << 16)
    strides = [_validate.integer("strides[i]", s, low=0, high=4096) for s in strides]
    cp = _cupy()
    sms = int(cp.cuda.runtime.deviceGetAttribute(DEVICE_ATTRIBUTES["multiprocessor_count"],
                                                 cp.cuda.Device().id))
    k = compiled(kernels.SMEM_SOURCE, f"smem_{eb}")
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
    return {"device": _device_name(cp), "element_bytes": eb, "warps_per_block": threads // 32,
            "blocks": sms, "iters": iters, "loads_per_iter": kernels.SMEM_UNROLL,
            "points": points}


def bank_sweep(strides: Sequence[int] = DEFAULT_BANK_STRIDES, *, element_bytes: int = 4,
               **kw) -> BankSweep:
    """Shared-memory load cost by stride (bank conflicts, broadcast, padding = stride 33)."""
    return bank_sweep_from_raw(measure_bank_raw(strides, element_bytes=element_bytes, **kw))


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
    g = _catalog_gpu(raw.get("catalog_name"))
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
        conditions.append(f"timed after {raw['rest_s']:g} s idle{each}")
    elif raw.get("mode") == "sustained":
        conditions.append(f"timed after {raw['sustain_s']:g} s of back-to-back products{each}")
    if clock:
        lo, hi = clock["sm_mhz_min"], clock["sm_mhz_max"]
        span = f"{lo:,.0f} MHz" if lo == hi else f"{lo:,.0f}-{hi:,.0f} MHz"
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
    cp = _cupy()
    from ..env import match_catalog
    from .nvml import Nvml, summarize

    dtype_name, size = _GEMM_DTYPES[precision]
    need = rounds * 3 * n * n * size + 4 * n * n
    free = cp.cuda.runtime.memGetInfo()[0]
    if need > free // 2:
        raise ValueError(f"n={n}, rounds={rounds}: the matrices need {format_bytes(need)}, more "
                         f"than half the free GPU memory ({format_bytes(free)})")
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
    name = _device_name(cp)
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


# -- launch latency --------------------------------------------------------------------------

@dataclass(frozen=True)
class LaunchLatency:
    """Cost per launch of an empty kernel, in seconds, three ways.

    ``back_to_back``: n launches, one synchronize at the end (the CPU's launch cost);
    ``synced``: a synchronize after every launch (adds the GPU round trip);
    ``graph``: the same n launches captured once into a CUDA graph, replayed (per kernel).
    Launched from Python through CuPy, so the Python call is part of each figure.
    """

    device: str
    n_kernels: int
    back_to_back: Timing
    synced: Timing
    graph: Timing

    def as_dict(self) -> dict[str, float]:
        """Median seconds per kernel by method, for a bar chart."""
        return {"back-to-back": self.back_to_back.median, "sync after each": self.synced.median,
                "CUDA graph": self.graph.median}

    def __repr__(self) -> str:
        parts = ", ".join(f"{k} {v * 1e6:.2f} µs" for k, v in self.as_dict().items())
        return f"LaunchLatency({self.device}, per empty kernel: {parts})"

    def _repr_html_(self) -> str:
        rows = [(k, f"{v * 1e6:.2f} µs") for k, v in self.as_dict().items()]
        return html_table(f"{self.device}: launch cost per empty kernel "
                          f"({self.n_kernels} launches)", ("method", "per kernel"), rows)


def launch_from_raw(raw: dict) -> LaunchLatency:
    return LaunchLatency(raw["device"], int(raw["n_kernels"]),
                         Timing.from_raw(raw["back_to_back"]), Timing.from_raw(raw["synced"]),
                         Timing.from_raw(raw["graph"]))


def measure_launch_raw(n_kernels: int = 1000, *, repeats: int = 7,
                       budget_s: float = 2.0) -> dict:
    """Time ``n_kernels`` launches of ``empty_kernel`` back-to-back, synced, and as a graph."""
    n = _validate.integer("n_kernels", n_kernels, low=10, high=100_000)
    cp = _cupy()
    k = compiled(kernels.EMPTY_SOURCE, "empty_kernel")
    stream = cp.cuda.Stream(non_blocking=True)
    grid, block = (1,), (32,)

    def back_to_back():
        for _ in range(n):
            k(grid, block, ())
        stream.synchronize()

    def synced():
        for _ in range(n):
            k(grid, block, ())
            stream.synchronize()

    with stream:
        stream.begin_capture()
        for _ in range(n):
            k(grid, block, ())
        graph = stream.end_capture()

        def replay():
            graph.launch(stream)
            stream.synchronize()

        per = {}
        for key, fn in (("back_to_back", back_to_back), ("synced", synced), ("graph", replay)):
            t = time_host(fn, warmup=1, repeats=repeats, budget_s=budget_s)
            per[key] = Timing(tuple(s / n for s in t.samples), t.warmup, t.method).to_raw()
    return {"device": _device_name(cp), "n_kernels": n, **per}


def launch_latency(n_kernels: int = 1000, **kw) -> LaunchLatency:
    """Launch cost per empty kernel: back-to-back, synced after each, and in a CUDA graph."""
    return launch_from_raw(measure_launch_raw(n_kernels, **kw))


# -- host <-> device copies ------------------------------------------------------------------

@dataclass(frozen=True)
class Transfers:
    """Host<->device copy bandwidth from pageable and pinned host memory."""

    device: str
    rows: tuple[Bandwidth, ...]

    def get(self, direction: str, memory: str) -> Bandwidth:
        """The row for ``direction`` ("host->device"/"device->host") and ``memory``."""
        for r in self.rows:
            if r.kind == f"{direction} {memory}":
                return r
        raise ValueError(f"no row for direction={direction!r}, memory={memory!r}; have "
                         + ", ".join(repr(r.kind) for r in self.rows))

    def __repr__(self) -> str:
        parts = "; ".join(f"{r.kind} {r.gbps:,.1f} GB/s" for r in self.rows)
        return f"Transfers({self.device}: {parts})"

    def _repr_html_(self) -> str:
        return html_table(f"{self.device}: host<->device copies", ("copy", "bandwidth", "size"),
                          [(r.kind, f"{r.gbps:,.1f} GB/s", format_bytes(r.bytes_moved))
                           for r in self.rows])


def transfers_from_raw(raw: dict) -> Transfers:
    rows = tuple(Bandwidth(raw["device"], f"{r['direction']} {r['memory']}", int(raw["bytes"]),
                           Timing.from_raw(r["timing"]), int(raw["bytes"]))
                 for r in raw["rows"])
    return Transfers(raw["device"], rows)


def measure_transfers_raw(nbytes: int = 256 * _MiB, *, repeats: int = 10,
                          budget_s: float = 2.0) -> dict:
    """Time host->device and device->host copies of ``nbytes`` from pageable and pinned memory."""
    nbytes = _validate.integer("nbytes", nbytes, low=4096, high=8 * _GiB)
    cp = _cupy()
    import cupyx

    pageable = np.empty(nbytes, dtype=np.uint8)
    pageable.fill(7)
    pinned = cupyx.empty_pinned((nbytes,), dtype=np.uint8)
    pinned.fill(7)
    dev = cp.empty(nbytes, dtype=cp.uint8)
    stream = cp.cuda.get_current_stream()
    rows = []
    for memory, host in (("pageable", pageable), ("pinned", pinned)):
        def h2d(host=host):
            dev.set(host)
            stream.synchronize()

        def d2h(host=host):
            dev.get(out=host)
            stream.synchronize()
        for direction, fn in (("host->device", h2d), ("device->host", d2h)):
            t = time_host(fn, warmup=1, repeats=repeats, budget_s=budget_s)
            rows.append({"direction": direction, "memory": memory, "timing": t.to_raw()})
    ok = bool((cp.asnumpy(dev[:4096]) == 7).all())
    if not ok:
        raise RuntimeError("host<->device copy produced wrong bytes")
    return {"device": _device_name(cp), "bytes": nbytes, "rows": rows}


def host_transfers(nbytes: int = 256 * _MiB, **kw) -> Transfers:
    """Host<->device copy bandwidth, pageable vs pinned (``cupyx.empty_pinned``)."""
    return transfers_from_raw(measure_transfers_raw(nbytes, **kw))


# -- occupancy: the CUDA runtime vs the calculator -------------------------------------------

OCC_COLUMNS = ("kernel", "registers_per_thread", "static_smem", "threads_per_block",
               "dynamic_smem", "carveout", "max_dynamic_set", "blocks_per_sm")


@dataclass(frozen=True)
class OccupancyCheck:
    """The CUDA runtime's blocks per SM for compiled kernels beside the calculator's.

    ``rows`` are ``(kernel, registers/thread, static smem, threads/block, dynamic smem,
    carveout, runtime blocks/SM, calculator blocks/SM)``; carveout ``None`` = not set.
    """

    device: str
    cc: str
    rows: tuple[tuple, ...]

    @property
    def mismatches(self) -> list[tuple]:
        return [r for r in self.rows if r[6] != r[7]]

    @property
    def all_match(self) -> bool:
        return not self.mismatches

    def __repr__(self) -> str:
        bad = self.mismatches
        head = (f"OccupancyCheck({self.device}, CC {self.cc}: {len(self.rows)} configurations, "
                f"{len(self.rows) - len(bad)} agree with the calculator")
        if not bad:
            return head + ")"
        shown = "; ".join(f"{r[0]} regs={r[1]} smem={r[2]}+{r[4]} threads={r[3]} "
                          f"carveout={r[5]}: runtime {r[6]}, calculator {r[7]}" for r in bad[:5])
        return f"{head}; mismatches: {shown})"

    def _repr_html_(self) -> str:
        header = ("kernel", "regs/thread", "static smem", "threads", "dynamic smem", "carveout",
                  "runtime blocks/SM", "calculator blocks/SM")
        rows = self.mismatches or self.rows[:20]
        title = "mismatches" if self.mismatches else f"all {len(self.rows)} agree (first 20)"
        return html_table(f"{self.device}: occupancy, CUDA runtime vs calculator — {title}",
                          header, rows)


def occupancy_from_raw(raw: dict) -> OccupancyCheck:
    """Run the calculator on every recorded configuration and pair it with the runtime."""
    from ..occupancy import occupancy

    cols = raw["columns"]
    rows = []
    for values in raw["rows"]:
        r = dict(zip(cols, values, strict=True))
        if r["blocks_per_sm"] is None:
            continue
        calc = occupancy(cc=raw["cc"], threads_per_block=r["threads_per_block"],
                         registers_per_thread=r["registers_per_thread"],
                         shared_mem_per_block=r["static_smem"] + r["dynamic_smem"],
                         carveout=r["carveout"], opt_in=bool(r["max_dynamic_set"]))
        rows.append((r["kernel"], r["registers_per_thread"], r["static_smem"],
                     r["threads_per_block"], r["dynamic_smem"], r["carveout"],
                     r["blocks_per_sm"], calc.blocks_per_sm))
    return OccupancyCheck(raw["device"], raw["cc"], tuple(rows))


DEFAULT_OCC_THREADS = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
DEFAULT_OCC_DYNAMIC = (0, 1024, 8192, 20000, 49152, 100000)
DEFAULT_OCC_CARVEOUTS = (None, 0, 25, 50, 100)


def runtime_blocks_per_sm(kernel, threads_per_block: int, dynamic_smem: int = 0) -> int:
    """``cuOccupancyMaxActiveBlocksPerMultiprocessor`` for a compiled CuPy ``RawKernel``."""
    from cupy.cuda import driver  # a compiled kernel means CuPy and a GPU are there

    return int(driver.occupancyMaxActiveBlocksPerMultiprocessor(
        kernel.kernel.ptr, int(threads_per_block), int(dynamic_smem)))


def measure_occupancy_raw(kernel_specs=None, *, threads=DEFAULT_OCC_THREADS,
                          dynamic=DEFAULT_OCC_DYNAMIC, carveouts=DEFAULT_OCC_CARVEOUTS) -> dict:
    """Ask the CUDA driver for blocks/SM over kernels x block sizes x shared memory x carveout.

    Each kernel is asked twice: with its default attributes (only dynamic sizes that fit the
    48 KiB default), then with ``max_dynamic_shared_size_bytes`` raised to the opt-in limit
    (``max_dynamic_set``), as a kernel using more than 48 KiB must.  The carveout attribute is
    set before each query and reset to the driver default (-1) after.
    """
    cp = _cupy()
    dev_id = cp.cuda.Device().id
    optin = int(cp.cuda.runtime.deviceGetAttribute(
        DEVICE_ATTRIBUTES["max_shared_memory_per_block_optin"], dev_id))
    major = cp.cuda.runtime.deviceGetAttribute(DEVICE_ATTRIBUTES["compute_capability_major"],
                                               dev_id)
    minor = cp.cuda.runtime.deviceGetAttribute(DEVICE_ATTRIBUTES["compute_capability_minor"],
                                               dev_id)
    specs = kernels.OCCUPANCY_KERNELS if kernel_specs is None else kernel_specs
    rows, errors = [], []
    bar = Progress(len(specs), "occupancy queries")
    for label, source, name, options in specs:
        bar.update(0, label)
        k = compiled(source, name, options)
        regs, static = int(k.num_regs), int(k.shared_size_bytes)
        default_max = int(k.max_dynamic_shared_size_bytes)
        for max_set in (False, True):
            if max_set:
                k.max_dynamic_shared_size_bytes = optin - static
            limit = optin - static if max_set else default_max
            for carve in carveouts:
                try:
                    k.preferred_shared_memory_carveout = -1 if carve is None else int(carve)
                except Exception as exc:
                    errors.append(f"{label}: carveout {carve} refused: {exc}")
                    continue
                for t in threads:
                    if t > k.max_threads_per_block:
                        continue
                    for d in dynamic:
                        if d > limit:
                            continue
                        try:
                            blocks = runtime_blocks_per_sm(k, t, d)
                        except Exception as exc:
                            blocks = None
                            errors.append(f"{label} t={t} d={d} c={carve}: {exc}")
                        rows.append([label, regs, static, t, d, carve, max_set, blocks])
            with contextlib.suppress(Exception):
                k.preferred_shared_memory_carveout = -1
        k.max_dynamic_shared_size_bytes = default_max
        bar.update(1, label)
    bar.close()
    return {"device": _device_name(cp), "cc": f"{major}.{minor}", "columns": list(OCC_COLUMNS),
            "rows": rows, "errors": errors[:50]}


def runtime_occupancy(**kw) -> OccupancyCheck:
    """The CUDA runtime's occupancy for this module's kernels, beside the calculator's."""
    return occupancy_from_raw(measure_occupancy_raw(**kw))


# -- any kernel ------------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelTiming:
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

    def __repr__(self) -> str:
        return (f"KernelTiming({self.name}: {format_seconds(self.timing.median)} median of "
                f"{self.timing.repeats}; grid {self.grid}, block {self.block}, "
                f"{self.registers_per_thread} registers/thread, {self.static_smem} B static + "
                f"{self.shared_mem} B dynamic shared memory, {self.blocks_per_sm} blocks/SM)")

    def _repr_html_(self) -> str:
        rows = [("median time", format_seconds(self.timing.median)),
                ("runs", self.timing.repeats), ("grid x block", f"{self.grid} x {self.block}"),
                ("registers / thread", self.registers_per_thread),
                ("shared memory / block", f"{self.static_smem} B static + {self.shared_mem} B "
                                          "dynamic"),
                ("blocks / SM (CUDA runtime)", self.blocks_per_sm)]
        return html_table(self.name, ("quantity", "value"), rows)


def _dims(name, value) -> tuple[int, ...]:
    if isinstance(value, int | np.integer):
        value = (int(value),)
    if not isinstance(value, tuple | list) or not 1 <= len(value) <= 3:
        raise TypeError(f"{name} must be an int or a tuple of 1-3 ints, got {value!r}")
    return tuple(_validate.integer(f"{name}[i]", v, low=1, high=2**31 - 1) for v in value)


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
    grid, block = _dims("grid", grid), _dims("block", block)
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


@dataclass(frozen=True)
class SimtTimings:
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
        return [(k, f"{n:,}", format_seconds(t), f"{g:,.0f} GB/s", "yes" if ok else "NO")
                for k, n, t, g, ok in self.rows]

    def __repr__(self) -> str:
        lines = [f"{self.device}: SIMT teaching kernels"]
        lines += [f"  {k:<28} n={n:<12} {t:>10}  {g:>12}  correct: {ok}"
                  for k, n, t, g, ok in self._cells()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(f"{self.device}: SIMT teaching kernels",
                          ("kernel", "n", "median time", "useful bandwidth", "correct"),
                          self._cells())


def simt_from_raw(raw: dict) -> SimtTimings:
    rows = []
    for r in raw["kernels"]:
        t = Timing.from_raw(r["timing"]).median
        rows.append((r["name"], int(r["n"]), t, r["useful_bytes"] / t / 1e9, bool(r["correct"])))
    return SimtTimings(raw["device"], tuple(rows))


def measure_simt_raw(names: Sequence[str] | None = None, *, repeats: int = 20,
                     budget_s: float = 1.0) -> dict:
    """Time each kernel of ``gpu_lessons.simt_kernels.SIMT_CUDA_SOURCES`` at :data:`SIMT_SIZES`.

    Inputs, launch shape and NumPy's expected output come from ``simt_kernels.cuda_launch``;
    the measured launch's output is compared with it (``reduce_missing_sync`` may differ:
    that is its lesson).
    """
    cp = _cupy()
    from ..simt_kernels import SIMT_CUDA_SOURCES, cuda_launch

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
    return {"device": _device_name(cp), "kernels": out}


def simt_timings(names: Sequence[str] | None = None, **kw) -> SimtTimings:
    """Time the SIMT lesson's kernels (divergence, reductions, transposes) on this GPU."""
    return simt_from_raw(measure_simt_raw(names, **kw))


def timestamp() -> str:
    """UTC time as ISO 8601, for the record of a measurement session."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
