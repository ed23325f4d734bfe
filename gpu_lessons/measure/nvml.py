"""The GPU's SM clock, power draw and clock-limit reasons while a measurement runs.

A tensor-core product can draw more power than the board may use, so the GPU lowers its
clock until the draw fits; the datasheet's peak assumes the full clock.  To tell a slow
kernel from a slow clock, a measurement reads the clock between its timed runs.

The readings come from NVML (``libnvidia-ml.so.1``, installed with every NVIDIA driver and
read by ``nvidia-smi``), called through ctypes: no extra package, a few microseconds a call.
Every function here answers ``None`` when NVML is missing or refuses, and the measurement
goes on without clock readings.

Source: NVML API Reference Guide, "Device Queries" (``nvmlDeviceGetClockInfo``,
``nvmlDeviceGetPowerUsage``, ``nvmlDeviceGetTemperature``,
``nvmlDeviceGetCurrentClocksEventReasons``) and its
"Clocks Event Reasons" bit masks.
"""

from __future__ import annotations

import ctypes
import statistics

_NVML_CLOCK_SM = 1
_NVML_TEMPERATURE_GPU = 0

#: nvmlClocksEventReason* bit masks (nvml.h), in the words nvidia-smi prints.
REASONS = {
    0x1: "idle",
    0x2: "application clock setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}


def reason_names(mask: int) -> list[str]:
    """The clock-limit reasons set in an NVML reasons bit mask, e.g. ``["software power cap"]``."""
    return [name for bit, name in REASONS.items() if mask & bit]


class Nvml:
    """Readings of one GPU, found by its PCI bus id (so CUDA's and NVML's numbering can differ)."""

    def __init__(self, lib, handle):
        self._lib, self._handle = lib, handle
        reasons = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons = reasons or lib.nvmlDeviceGetCurrentClocksThrottleReasons  # drivers < 535

    @classmethod
    def for_bus_id(cls, pci_bus_id: str) -> Nvml | None:
        """Open NVML for the GPU at ``pci_bus_id`` (``cupy.cuda.Device().pci_bus_id``)."""
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return None
            handle = ctypes.c_void_p()
            if lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(handle)) != 0:
                return None
            nvml = cls(lib, handle)
            return nvml if nvml.sample() is not None else None
        except (OSError, AttributeError):
            return None

    def sample(self) -> dict | None:
        """``{"sm_mhz", "power_w", "temperature_c", "reasons"}`` now, or None if NVML refuses."""
        mhz, milliwatts, celsius = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
        reasons = ctypes.c_ulonglong()
        lib, h = self._lib, self._handle
        if (lib.nvmlDeviceGetClockInfo(h, _NVML_CLOCK_SM, ctypes.byref(mhz))
                or lib.nvmlDeviceGetPowerUsage(h, ctypes.byref(milliwatts))
                or lib.nvmlDeviceGetTemperature(h, _NVML_TEMPERATURE_GPU, ctypes.byref(celsius))
                or self._reasons(h, ctypes.byref(reasons))):
            return None
        return {"sm_mhz": int(mhz.value), "power_w": milliwatts.value / 1000,
                "temperature_c": int(celsius.value), "reasons": int(reasons.value)}


def summarize(samples: list[dict]) -> dict | None:
    """Median, lowest and highest SM clock, highest power and every limit reason seen."""
    samples = [s for s in samples if s]
    if not samples:
        return None
    mhz = [s["sm_mhz"] for s in samples]
    mask = 0
    for s in samples:
        mask |= s["reasons"]
    return {"sm_mhz_median": statistics.median(mhz), "sm_mhz_min": min(mhz),
            "sm_mhz_max": max(mhz), "power_w_max": max(s["power_w"] for s in samples),
            "temperature_c_max": max(s.get("temperature_c", 0) for s in samples),
            "reasons": reason_names(mask & ~0x1), "readings": len(samples)}
