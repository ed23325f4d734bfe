"""Measure an NVIDIA GPU with CuPy: the gate every GPU cell goes through, and what the
measurements share.

CuPy is imported only inside the functions that need it, so every module here imports
anywhere.  A notebook GPU cell goes through :func:`on_gpu`, which returns the measurement, or
prints one line and returns ``None`` when there is no usable GPU::

    from gpu_lessons.measure import on_gpu, strided_sweep
    sweep = on_gpu(strided_sweep)   # no GPU -> one line, None

The measurements themselves live beside this module, one family each:
:mod:`.gpu_memory` (bandwidth, cache staircase, strided copies, bank conflicts),
:mod:`.gpu_compute` (matrix products, any kernel, the SIMT lesson's kernels),
:mod:`.gpu_system` (launch cost, host copies) and :mod:`.gpu_occupancy` (the CUDA runtime's
occupancy beside the calculator).  Each comes in two halves:

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

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from .._format import Readout, Row, Table, bandwidth, binary_bytes, memory_size, si

SKIP_TAIL = " — skipped; the rest of this notebook runs without it."
SKIP_LINE = "No CUDA GPU ({why})" + SKIP_TAIL
FAIL_LINE = "GPU measurement failed ({why})" + SKIP_TAIL
#: A cell that needs several GPUs (``gpu_lessons.measure.multigpu``) on a machine with fewer.
GPUS_LINE = "Needs {need} GPUs, found {found}" + SKIP_TAIL

MiB, GiB = 2**20, 2**30

# -- is there a GPU? -------------------------------------------------------------------------

def gpu_status() -> tuple[bool, str]:
    """``(True, "")`` when CuPy can use a CUDA device, else ``(False, short reason)``."""
    from ..env import detect_gpu

    info, why = detect_gpu()
    return (True, "") if info is not None else (False, why.short)


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


def cupy_module():
    ok, why = gpu_status()
    if not ok:
        raise RuntimeError(f"No CUDA GPU ({why}): this measurement needs CuPy and an NVIDIA "
                           "GPU; wrap it in gpu_lessons.measure.on_gpu(...) in a notebook")
    import cupy

    # arrays of an earlier measurement are gone by now: give their memory back to the device
    cupy.get_default_memory_pool().free_all_blocks()
    return cupy


def compiled(source: str, name: str, options: Sequence[str] = ()):
    """A compiled CuPy ``RawKernel`` (cached per source, name and options)."""
    return _compiled(cupy_module(), source, name, tuple(options))


@cache
def _compiled(cp, source: str, name: str, options: tuple[str, ...]):
    kernel = cp.RawKernel(source, name, options=options)
    kernel.compile()
    return kernel


@dataclass(frozen=True, repr=False)
class KernelResources(Readout):
    """What the compiler gave one kernel: registers per thread, local memory per thread and
    static shared memory per block.

    ``local_bytes`` is per-thread *local memory* (CUDA C++ Programming Guide, "Device Memory
    Accesses → Local Memory"; docs/misconceptions.md, M11): register spills and arrays the compiler could
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

    def readout_title(self) -> str:
        return f"{self.name}: compiled resources"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("compiler options", " ".join(self.options) or "none"),
                Row("registers per thread", self.registers_per_thread),
                Row("local memory per thread (spills, local arrays)", self.local_bytes, "B"),
                Row("static shared memory per block", self.static_shared_bytes, "B"))


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


def device_name(cp) -> str:
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def catalog_gpu(name: str | None):
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


@dataclass(frozen=True, repr=False)
class DeviceReport(Table):
    """What the CUDA runtime says about the GPU, next to the catalog's datasheet figures.

    ``rows`` are ``(quantity, device value, catalog value)`` as text with units.
    ``bandwidth_from_bus`` is ``beta = bus width x data rate`` computed from the
    device's own memory clock and bus width (HBM moves data on both clock edges), in B/s.
    """

    name: str
    cc: str
    catalog_name: str | None
    attributes: dict
    rows: tuple[tuple[str, str, str], ...]
    bandwidth_from_bus: float | None

    def table(self):
        return (f"{self.name} (CC {self.cc}): CUDA runtime vs catalog "
                f"({self.catalog_name or 'no match'})", ("quantity", "device", "catalog"),
                list(self.rows))


def device_report_from_raw(raw: dict) -> DeviceReport:
    """Build the report from :func:`measure_device_raw`'s record (pure arithmetic)."""
    a = raw["attributes"]
    g = catalog_gpu(raw.get("catalog_name"))

    def count(v) -> str:
        return f"{v:,.0f}"

    def mhz(v) -> str:
        return si(v * 1e6, "Hz", 4)

    def bits(v) -> str:
        return f"{v:,.0f} bits"

    def val(key, show=count, scale=1.0):
        v = a.get(key)
        return "—" if v is None or v < 0 else show(v * scale)

    def cat(value, show=count):
        return "—" if g is None or value is None else show(value)

    bus, mem_khz = a.get("global_memory_bus_width_bits"), a.get("memory_clock_rate_khz")
    beta = None
    if bus and mem_khz and bus > 0 and mem_khz > 0:
        from ..hardware import memory_bandwidth

        beta = memory_bandwidth(int(bus), 2 * mem_khz * 1e3)
    rows = (
        ("compute capability", raw["cc"], cat(g and g.cc, str)),
        ("SMs", val("multiprocessor_count"), cat(g and g.sms)),
        ("max SM clock", val("clock_rate_khz", mhz, 1e-3), cat(g and g.boost_mhz, mhz)),
        ("memory", binary_bytes(raw["total_memory_bytes"]),
         cat(g and g.memory_gb * 1e9, memory_size)),
        ("memory bus", val("global_memory_bus_width_bits", bits), cat(g and g.bus_width_bits, bits)),
        ("memory clock", val("memory_clock_rate_khz", mhz, 1e-3),
         cat(g and g.memory_clock_mhz, mhz)),
        ("DRAM bandwidth", "—" if beta is None else f"{bandwidth(beta)} (bus x rate)",
         cat(g and g.bandwidth_gbs * 1e9, bandwidth)),
        ("L2 cache", val("l2_cache_size", binary_bytes), cat(g and g.l2_bytes, binary_bytes)),
        ("shared memory / SM", val("max_shared_memory_per_multiprocessor", binary_bytes), "—"),
        ("shared memory / block (opt-in)", val("max_shared_memory_per_block_optin", binary_bytes),
         "—"),
        ("reserved shared memory / block", val("reserved_shared_memory_per_block", binary_bytes),
         "—"),
        ("registers / SM", val("max_registers_per_multiprocessor"), "—"),
        ("max threads / SM", val("max_threads_per_multiprocessor"), "—"),
        ("max blocks / SM", val("max_blocks_per_multiprocessor"), "—"),
    )
    return DeviceReport(raw["name"], raw["cc"], g.name if g else None, dict(a), rows, beta)


def measure_device_raw() -> dict:
    """Read the device's attributes and versions through the CUDA runtime (needs CuPy)."""
    cp = cupy_module()
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
    name = device_name(cp)
    cc = f"{attrs['compute_capability_major']}.{attrs['compute_capability_minor']}"
    return {"name": name, "cc": cc, "total_memory_bytes": int(props["totalGlobalMem"]),
            "attributes": attrs, "driver_version": int(rt.driverGetVersion()),
            "runtime_version": int(rt.runtimeGetVersion()), "cupy_version": cp.__version__,
            "catalog_name": match_catalog(name, attrs["multiprocessor_count"] or 0)}


def device_report() -> DeviceReport:
    """The CUDA runtime's view of GPU 0 next to the catalog entry it matches."""
    return device_report_from_raw(measure_device_raw())



# -- helpers the measurements share ---------------------------------------------------------

def l2_bytes(cp) -> int:
    return int(cp.cuda.runtime.deviceGetAttribute(DEVICE_ATTRIBUTES["l2_cache_size"],
                                                  cp.cuda.Device().id))


def launch_1d(n: int, threads: int = 256) -> tuple[tuple[int], tuple[int]]:
    return (max(1, math.ceil(n / threads)),), (threads,)



def timestamp() -> str:
    """UTC time as ISO 8601, for the record of a measurement session."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
