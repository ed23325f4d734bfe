"""The CUDA runtime's occupancy (``cuOccupancyMaxActiveBlocksPerMultiprocessor``) for compiled
kernels, set beside :func:`gpu_lessons.occupancy.occupancy` for the same configuration.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from .._format import html_table
from . import cuda_sources
from .gpu import DEVICE_ATTRIBUTES, compiled, cupy_module, device_name
from .timing import Progress

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
    cp = cupy_module()
    dev_id = cp.cuda.Device().id
    optin = int(cp.cuda.runtime.deviceGetAttribute(
        DEVICE_ATTRIBUTES["max_shared_memory_per_block_optin"], dev_id))
    major = cp.cuda.runtime.deviceGetAttribute(DEVICE_ATTRIBUTES["compute_capability_major"],
                                               dev_id)
    minor = cp.cuda.runtime.deviceGetAttribute(DEVICE_ATTRIBUTES["compute_capability_minor"],
                                               dev_id)
    specs = cuda_sources.OCCUPANCY_KERNELS if kernel_specs is None else kernel_specs
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
    return {"device": device_name(cp), "cc": f"{major}.{minor}", "columns": list(OCC_COLUMNS),
            "rows": rows, "errors": errors[:50]}


def runtime_occupancy(**kw) -> OccupancyCheck:
    """The CUDA runtime's occupancy for this module's kernels, beside the calculator's."""
    return occupancy_from_raw(measure_occupancy_raw(**kw))
