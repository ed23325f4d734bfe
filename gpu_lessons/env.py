"""What this machine is: Python, the course's packages, the CPU and, if present, a CUDA GPU.

Nothing here needs a GPU: CuPy is imported lazily and any failure (no CuPy, no driver, no
device) turns into "simulator mode" with the reason, never an exception.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import NamedTuple

PACKAGES = ("gpu-lessons", "numpy", "bokeh", "ipywidgets", "jupyterlab", "jupyter_bokeh",
            "numba", "cupy-cuda12x", "cupy-cuda13x", "cupy")


@dataclass(frozen=True)
class GPUInfo:
    """A CUDA device as the CUDA runtime describes it."""

    name: str
    cc: str
    sms: int
    memory_bytes: int
    l2_bytes: int
    catalog_name: str | None  # the matching entry in gpu_lessons.hardware, if any


@dataclass(frozen=True)
class Report:
    python: str
    platform: str
    cpu: str
    cores: int
    packages: dict[str, str]
    gpu: GPUInfo | None
    gpu_reason: str  # why there is no GPU, or "" when there is one
    extra: dict = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return "GPU mode" if self.gpu else "simulator mode"

    def lines(self) -> list[str]:
        from ._format import binary_bytes

        out = [f"Python        {self.python} on {self.platform}",
               f"CPU           {self.cpu}, {self.cores} logical cores"]
        out += [f"{name:<14}{ver}" for name, ver in self.packages.items()]
        if self.gpu:
            g = self.gpu
            match = f" (catalog: {g.catalog_name})" if g.catalog_name else " (not in the catalog)"
            out.append(f"GPU           {g.name}, CC {g.cc}, {g.sms} SMs, "
                       f"{binary_bytes(g.memory_bytes, ',.0f')}, "
                       f"L2 {binary_bytes(g.l2_bytes, ',.0f')}{match}")
        else:
            out.append(f"GPU           none: {self.gpu_reason}")
        out.append(f"Mode          {self.mode}")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        from ._format import html_table

        return html_table("This machine", None,
                          [(line[:14].strip(), line[14:]) for line in self.lines()])


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux, platform elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_versions() -> dict[str, str]:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            if not name.startswith("cupy"):
                found[name] = "not installed"
    return found


class NoGpu(NamedTuple):
    """Why no GPU can be used: ``short`` for the one line a skipped GPU cell prints,
    ``detail`` for the environment report (with what to do about it)."""

    short: str
    detail: str


def detect_gpu() -> tuple[GPUInfo | None, NoGpu | None]:
    """Return (GPUInfo, None) for device 0, or (None, why) when no GPU can be used."""
    if os.environ.get("GPU_LESSONS_NO_GPU"):
        return None, NoGpu("GPU_LESSONS_NO_GPU is set", "GPU_LESSONS_NO_GPU is set")
    try:
        import cupy
    except ImportError:
        return None, NoGpu("CuPy not installed", "CuPy is not installed (pip install -e '.[gpu]' "
                                                  "on a machine with an NVIDIA GPU)")
    except Exception as exc:  # a broken CuPy install should not break a lesson
        return None, NoGpu("CuPy failed to import", f"CuPy failed to import: {exc}")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None, NoGpu("CuPy found no CUDA device", "CuPy found no CUDA device")
        props = cupy.cuda.runtime.getDeviceProperties(0)
    except Exception as exc:
        return None, NoGpu("no CUDA driver or device", f"CuPy could not reach a CUDA device: {exc}")
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    info = GPUInfo(name=name, cc=f"{props['major']}.{props['minor']}",
                   sms=int(props["multiProcessorCount"]),
                   memory_bytes=int(props["totalGlobalMem"]), l2_bytes=int(props["l2CacheSize"]),
                   catalog_name=match_catalog(name, int(props["multiProcessorCount"])))
    return info, None


def match_catalog(device_name: str, sms: int) -> str | None:
    """Map a CUDA device name (e.g. 'NVIDIA H200') to a catalog entry with the same SM count."""
    from .hardware import catalog, gpu

    cleaned = device_name.replace("NVIDIA", "").replace("GeForce", "").strip()
    for candidate in (cleaned, cleaned.split()[0] if cleaned else ""):
        try:
            g = gpu(candidate)
        except (ValueError, TypeError):
            continue
        if g.sms == sms:
            return g.name
    for g in catalog().values():  # e.g. 'H100 80GB HBM3' -> H100 SXM5 by SM count
        if g.name.split()[0].lower() in cleaned.lower() and g.sms == sms:
            return g.name
    return None


def report() -> Report:
    """Collect the environment report (fast: no benchmarks)."""
    info, reason = detect_gpu()
    return Report(python=platform.python_version(),
                  platform=f"{platform.system()} {platform.machine()}",
                  cpu=cpu_name(), cores=os.cpu_count() or 1, packages=package_versions(),
                  gpu=info, gpu_reason=reason.detail if reason else "",
                  extra={"executable": sys.executable})
