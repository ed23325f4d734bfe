"""Theoretical occupancy: how many blocks of a kernel fit on one SM, and what stops more.

This follows the algorithm of ``cuda_occupancy.h`` (CUDA toolkit 12.x), which is also what
``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` answers.  Every limit is a count of blocks
per SM, found by floor division; the smallest one wins:

1. warps:  ``W = ceil(threads_per_block / 32)``; limit ``floor(max_warps_per_sm / W)``.
2. blocks: a fixed maximum per compute capability (16, 24 or 32).
3. registers: a warp's registers are ``r = roundup(registers_per_thread * 32, 256)``.  The
   register file is split into 4 sub-partitions of 16,384 registers and a warp lives in one,
   so an SM holds ``4 * floor(16384 / r)`` warps and the limit is that divided by ``W``.
   (This is why 40 registers/thread gives 48 warps, not 65536 / (40 * 32) = 51.)  A block
   that needs more than 255 registers/thread, or more than 65,536 registers once its warps
   are spread over the 4 sub-partitions (``r * roundup(W, 4)``), cannot launch.
4. shared memory: a block takes ``roundup(static + dynamic + reserved, unit)`` bytes, where
   ``reserved`` is the driver's 1 KB per block on CC >= 8.0 and ``unit`` is 128 B (256 B on
   CC 7.x).  The SM's shared-memory capacity is one of a few legal sizes (the carveout; the
   rest of the SRAM is L1): the preference ``floor(percent * max / 100)`` rounded *up* to a
   legal size, or, if that cannot hold one block, the smallest legal size that can.  With no
   preference (``carveout=None``) the calculator uses the largest size.  The limit is
   ``floor(capacity / per-block bytes)``.

On the default carveout: ``cuda_occupancy.h`` treats "no preference" as the maximum
shared-memory size.  Because ``floor(capacity / per_block)`` never falls as the capacity
grows, that is also the size that gives the most blocks, so the two ways of stating the
driver's default agree on the block count; this module reports the maximum as the capacity
used.  Hopper's per-block hardware-barrier limit (two barriers per resident block, at most
64 blocks) never binds below the 32-block limit for a plain launch and is left out.

Checked against the CUDA runtime: ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` on an H200
(driver 13.0) for 104,652 configurations (21 register counts, 17 block sizes, static plus
dynamic shared memory up to 230,000 B, carveouts unset and 0-100 %) agrees on every one
(``tests/data/h200_occupancy.json``).

>>> r = occupancy(cc="9.0", threads_per_block=256, registers_per_thread=40,
...               shared_mem_per_block=4096)
>>> r.blocks_per_sm, r.warps_per_sm, r.occupancy, r.limiter
(6, 48, 0.75, 'registers')

Sources: ``cuda_occupancy.h`` (CUDA 12.6); CUDA C++ Programming Guide, "Technical
Specifications per Compute Capability"; CUDA C++ Best Practices Guide section 11.1.1; the
per-capability numbers live in ``data/compute_capabilities.toml``, each row with its source.
"""

from __future__ import annotations

import html
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import numpy as np

from . import _validate
from . import hardware as _hardware
from ._format import Readout, Row, binary_bytes, exact_bytes, html_table, percent
from ._math import cdiv, round_up
from .hardware import WARP_SIZE

#: The order ``limiter`` picks from when several limits tie: the order of the
#: ``cudaOccLimitingFactor`` flags in ``cuda_occupancy.h`` (warps, registers, shared memory,
#: blocks).
LIMITS = ("warps", "registers", "shared memory", "blocks")

#: A limit that does not apply (a kernel with no registers or no shared memory) is reported
#: as this many blocks, as ``cuda_occupancy.h`` reports INT_MAX.
UNLIMITED = 2**31 - 1

#: ``cudaSharedmemCarveoutDefault``: the same as ``carveout=None``.
CARVEOUT_DEFAULT = -1


# -- the compute-capability table --------------------------------------------------------------

@dataclass(frozen=True)
class ComputeCapability:
    """The per-SM limits of one compute capability (see ``data/compute_capabilities.toml``)."""

    cc: str
    architecture: str
    max_threads_per_block: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    registers_per_block: int
    max_registers_per_thread: int
    register_unit: int
    sub_partitions: int
    shared_per_block: int
    shared_per_block_optin: int
    shared_unit: int
    reserved_shared_per_block: int
    sm_shared_sizes: tuple[int, ...]  # bytes, ascending: the legal carveouts
    source: str = field(repr=False, compare=False)

    @property
    def max_sm_shared(self) -> int:
        """The largest shared-memory capacity of one SM (``sharedMemPerMultiprocessor``), bytes."""
        return self.sm_shared_sizes[-1]

    @property
    def registers_per_sub_partition(self) -> int:
        return self.registers_per_sm // self.sub_partitions


@cache
def compute_capabilities() -> dict[str, ComputeCapability]:
    """Every compute capability the calculator knows, keyed by ``"major.minor"``."""
    text = resources.files(__package__).joinpath("data/compute_capabilities.toml")
    raw = tomllib.loads(text.read_text("utf-8"))
    table = {}
    for row in raw["cc"]:
        row = dict(row)
        sizes = tuple(kb * 1024 for kb in row.pop("sm_shared_sizes_kb"))
        table[row["cc"]] = ComputeCapability(**row, sm_shared_sizes=sizes)
    return table


_CC_TEXT = re.compile(r"^(?:sm_?|compute_)?(\d+)\.(\d)$|^(?:sm_?|compute_)(\d+)(\d)[af]?$")


def compute_capability(cc) -> ComputeCapability:
    """Look up a compute capability: ``"9.0"``, ``"sm_90"``, ``9.0`` or ``(9, 0)``."""
    known = compute_capabilities()
    key = _cc_key(cc)
    if key not in known:
        raise ValueError(f"cc={cc!r} is not a compute capability this calculator knows; "
                         f"valid: {', '.join(known)}")
    return known[key]


def _cc_key(cc) -> str | None:
    if isinstance(cc, bool):
        raise TypeError(f"cc must be a string such as '9.0', got {cc!r} (bool)")
    if isinstance(cc, tuple) and len(cc) == 2 and all(isinstance(v, int) for v in cc):
        return f"{cc[0]}.{cc[1]}"
    if isinstance(cc, (int, float)):
        return f"{float(cc):.1f}"
    if isinstance(cc, str):
        m = _CC_TEXT.match(cc.strip().lower())
        if m is None:
            return None
        major, minor = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        return f"{int(major)}.{minor}"
    raise TypeError(f"cc must be a string such as '9.0' (or a GPU from the catalog), "
                    f"got {cc!r} ({type(cc).__name__})")


def resolve(cc=None, gpu=None) -> tuple[ComputeCapability, str | None]:
    """The compute-capability table row and the GPU's catalog name (``None`` when given a
    ``cc``), from exactly one of ``cc`` (``"9.0"``, ``"sm_90"``, ``(9, 0)``) and ``gpu`` (a
    catalog name or ``GPU``; a ``GPU`` passed as ``cc`` counts as ``gpu``).  The calculator's
    functions take their ``cc=``/``gpu=`` arguments through this.

    >>> resolve(gpu="H100")[1]
    'H100 SXM5'
    """
    if isinstance(cc, _hardware.GPU):
        if gpu is not None:
            raise ValueError("give either cc= or gpu=, not both")
        cc, gpu = None, cc
    if gpu is not None:
        if cc is not None:
            raise ValueError(f"give either cc= or gpu=, not both (got cc={cc!r}, gpu={gpu!r})")
        try:
            g = _hardware.gpu(gpu)
        except (ValueError, TypeError) as err:
            raise type(err)(str(err).replace("name=", "gpu=", 1).replace("name ", "gpu ", 1)) \
                from None
        return compute_capability(g.cc), g.name
    if cc is None:
        raise TypeError("give the compute capability (cc='9.0') or a catalog GPU (gpu='H100')")
    return compute_capability(cc), None


def _carveout(carveout) -> int | None:
    if carveout is None:
        return None
    carveout = _validate.integer("carveout", carveout, low=CARVEOUT_DEFAULT, high=100)
    return None if carveout == CARVEOUT_DEFAULT else carveout


# -- the arithmetic, on NumPy arrays so that the curves are one call ---------------------------

def _compute(spec: ComputeCapability, threads, regs, smem, carveout: int | None, opt_in: bool):
    """All four limits for arrays of inputs (broadcast together).  Returns a dict of arrays."""
    threads, regs, smem = (np.asarray(v, dtype=np.int64) for v in (threads, regs, smem))
    warps_per_block = cdiv(threads, WARP_SIZE)

    warps_limit = spec.max_warps_per_sm // warps_per_block
    blocks_limit = np.full_like(warps_limit, spec.max_blocks_per_sm)

    reg_warp = round_up(regs * WARP_SIZE, spec.register_unit)
    # A warp's registers come from one sub-partition, so leftovers in each part are wasted.
    warps_by_regs = spec.sub_partitions * (spec.registers_per_sub_partition
                                           // np.maximum(reg_warp, 1))
    regs_limit = np.where(reg_warp > 0, warps_by_regs // warps_per_block, UNLIMITED)
    # The launch check assumes the block's warps are spread evenly over the sub-partitions.
    # (cuda_occupancy.h lets 256 registers/thread through; ptxas never gives more than 255.)
    regs_assumed = reg_warp * round_up(warps_per_block, spec.sub_partitions)
    regs_fail = (regs > spec.max_registers_per_thread) | (regs_assumed > spec.registers_per_block)
    regs_limit = np.where(regs_fail, 0, regs_limit)

    per_block = round_up(smem + spec.reserved_shared_per_block, spec.shared_unit)
    block_cap = (spec.shared_per_block_optin if opt_in else spec.shared_per_block)
    block_cap += spec.reserved_shared_per_block
    smem_fail = per_block > block_cap
    sizes = np.asarray(spec.sm_shared_sizes, dtype=np.int64)
    if carveout is None:
        preferred = spec.max_sm_shared
    else:
        wanted = carveout * spec.max_sm_shared // 100
        preferred = int(sizes[np.searchsorted(sizes, wanted)])
    smallest_fit = sizes[np.searchsorted(sizes, np.minimum(per_block, spec.max_sm_shared))]
    sm_shared = np.where(preferred >= per_block, preferred, smallest_fit)
    smem_limit = np.where(per_block > 0, sm_shared // np.maximum(per_block, 1), UNLIMITED)
    smem_limit = np.where(smem_fail, 0, smem_limit)

    stacked = np.stack(np.broadcast_arrays(warps_limit, regs_limit, smem_limit, blocks_limit))
    blocks = stacked.min(axis=0)
    return {
        "warps_per_block": warps_per_block, "limits": stacked, "blocks": blocks,
        "reg_warp": reg_warp, "regs_assumed": regs_assumed, "regs_fail": regs_fail,
        "per_block": per_block, "block_cap": block_cap, "smem_fail": smem_fail,
        "sm_shared": sm_shared, "preferred": preferred,
    }


# -- one configuration -------------------------------------------------------------------------

@dataclass(frozen=True)
class Occupancy:
    """Theoretical occupancy of one kernel configuration on one SM, and why.

    ``limits`` holds the block count each resource allows (``UNLIMITED`` where a resource is
    not used); ``blocks_per_sm`` is the smallest; ``limiters`` names every limit equal to it,
    in the order of :data:`LIMITS`, and ``limiter`` is the first of them.
    """

    cc: str
    threads_per_block: int
    registers_per_thread: int
    shared_mem_per_block: int
    carveout: int | None
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float
    limiter: str
    limiters: tuple[str, ...]
    limits: dict[str, int] = field(hash=False)
    warps_per_block: int
    registers_per_warp: int          # after rounding up to the allocation unit
    registers_per_block: int         # registers_per_warp x warps_per_block
    shared_mem_allocated: int        # per block, after adding the reservation and rounding
    sm_shared_mem: int               # the SM's shared-memory capacity under this carveout
    gpu: str | None = None
    opt_in: bool = True
    note: str = ""

    @property
    def active_threads_per_sm(self) -> int:
        return self.blocks_per_sm * self.threads_per_block

    def explain(self) -> list[tuple[str, str, int]]:
        """One ``(limit, how it is computed, blocks/SM)`` row per limit."""
        spec = compute_capability(self.cc)
        w = self.warps_per_block
        rows = [("warps", f"{spec.max_warps_per_sm} warps/SM ÷ {w} warps/block "
                          f"({self.threads_per_block} threads ÷ 32, rounded up)")]
        if self.registers_per_warp == 0:
            how = "the kernel uses no registers"
        else:
            per_sm = spec.sub_partitions * (spec.registers_per_sub_partition
                                            // self.registers_per_warp)
            how = (f"{self.registers_per_thread} regs × 32 = "
                   f"{self.registers_per_thread * 32:,}, rounded up to "
                   f"{self.registers_per_warp:,} regs/warp (unit {spec.register_unit}); "
                   f"{spec.sub_partitions} sub-partitions × ⌊{spec.registers_per_sub_partition:,}"
                   f" / {self.registers_per_warp:,}⌋ = {per_sm} warps/SM ÷ {w} warps/block")
        rows.append(("registers", how))
        reserved = spec.reserved_shared_per_block
        if self.shared_mem_allocated == 0:
            how = "the kernel uses no shared memory"
        else:
            alloc = exact_bytes(self.shared_mem_allocated)
            how = (exact_bytes(self.shared_mem_per_block)
                   + (f" + {exact_bytes(reserved)} reserved" if reserved else "")
                   + f", rounded up to {alloc}/block "
                     f"(unit {exact_bytes(spec.shared_unit)}); SM capacity "
                     f"{binary_bytes(self.sm_shared_mem)} ({self._carveout_text()}) ÷ {alloc}")
        rows.append(("shared memory", how))
        rows.append(("blocks", f"at most {spec.max_blocks_per_sm} resident blocks/SM on "
                               f"CC {self.cc}"))
        return [(name, how, self.limits[name]) for name, how in rows]

    def _carveout_text(self) -> str:
        if self.carveout is None:
            return "default: the largest size"
        return f"carveout {percent(self.carveout / 100)}"

    def _headline(self) -> str:
        where = f"{self.gpu} (CC {self.cc})" if self.gpu else f"CC {self.cc}"
        if self.blocks_per_sm == 0:
            return f"{where}: cannot launch (0 blocks/SM), limited by {' = '.join(self.limiters)}"
        return (f"{where}: {self.blocks_per_sm} blocks/SM × {self.warps_per_block} warps = "
                f"{self.warps_per_sm} of {self.max_warps_per_sm} warps → "
                f"{percent(self.occupancy)} occupancy, limited by {' = '.join(self.limiters)}")

    def __repr__(self) -> str:
        inputs = (f"{self.threads_per_block} threads/block, {self.registers_per_thread} "
                  f"registers/thread, {exact_bytes(self.shared_mem_per_block)} shared/block, "
                  f"{self._carveout_text()}")
        lines = [f"Occupancy({inputs})", "  " + self._headline()]
        for name, _, blocks in self.explain():
            mark = "  ← binds" if name in self.limiters else ""
            lines.append(f"  {name:>13}: {_blocks_text(blocks)}{mark}")
        if self.note:
            lines.append("  note: " + self.note)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        def bold(text, binds):
            return f"<b>{html.escape(text)}</b>" if binds else html.escape(text)

        rows = [(bold(name, name in self.limiters), html.escape(how),
                 bold(_blocks_text(blocks), name in self.limiters),
                 "◀ binds" if name in self.limiters else "")
                for name, how, blocks in self.explain()]
        note = (f"<p><b>Note:</b> {html.escape(self.note)}</p>" if self.note else "")
        return html_table(html.escape(self._headline()),
                          ("limit", "how it is computed", "blocks/SM", ""), rows,
                          escape=False) + note


def _blocks_text(blocks: int) -> str:
    if blocks >= UNLIMITED:
        return "no limit"
    return f"{blocks} block/SM" if blocks == 1 else f"{blocks} blocks/SM"


def occupancy(cc=None, *, gpu=None, threads_per_block, registers_per_thread,
              shared_mem_per_block=0, carveout=None, opt_in=True) -> Occupancy:
    """Blocks and warps of a kernel resident on one SM, as the CUDA runtime computes them.

    Parameters
    ----------
    cc : compute capability, ``"9.0"`` (also ``"sm_90"``, ``9.0``, ``(9, 0)``) or a catalog
        ``GPU``.  Give this or ``gpu``.
    gpu : a GPU name from the catalog (``"H100"``, ``"RTX 4090"``) or a ``GPU`` object.
    threads_per_block : 1..1024.
    registers_per_thread : what ``ptxas -v`` or ``cudaFuncAttributes.numRegs`` reports.
        Above 255 the kernel cannot launch (0 blocks).
    shared_mem_per_block : static + dynamic shared memory the kernel asks for, in bytes; the
        calculator adds the driver's per-block reservation (1 KB on CC >= 8.0) itself.
    carveout : ``None`` for the driver default, or the percentage given to
        ``cudaFuncAttributePreferredSharedMemoryCarveout`` (0..100; -1 also means default).
    opt_in : whether the kernel has raised ``cudaFuncAttributeMaxDynamicSharedMemorySize``
        to cover its dynamic shared memory (default ``True``).  Without that a block may use
        at most 48 KB, and the runtime reports 0 blocks for anything larger.

    A configuration that can never launch (too many registers, more shared memory than a block
    may have) gives 0 blocks with the failing limit as ``limiter`` and the reason in ``note``.
    Inputs that are not a configuration at all (negative, non-integer, more than 1024 threads,
    an unknown compute capability) raise ``ValueError`` or ``TypeError``.
    """
    spec, gpu_name = resolve(cc, gpu)
    threads = _validate.integer("threads_per_block", threads_per_block, low=1,
                                high=spec.max_threads_per_block)
    regs = _validate.integer("registers_per_thread", registers_per_thread, low=0)
    smem = _validate.integer("shared_mem_per_block", shared_mem_per_block, low=0)
    pct = _carveout(carveout)
    if not isinstance(opt_in, bool):
        raise TypeError(f"opt_in must be True or False, got {opt_in!r}")

    c = _compute(spec, threads, regs, smem, pct, opt_in)
    limits = dict(zip(LIMITS, (int(v) for v in c["limits"]), strict=True))
    blocks = int(c["blocks"])
    warps_per_block = int(c["warps_per_block"])
    warps = blocks * warps_per_block
    limiters = tuple(name for name in LIMITS if limits[name] == blocks)
    return Occupancy(
        cc=spec.cc, threads_per_block=threads, registers_per_thread=regs,
        shared_mem_per_block=smem, carveout=pct, blocks_per_sm=blocks, warps_per_sm=warps,
        max_warps_per_sm=spec.max_warps_per_sm, occupancy=warps / spec.max_warps_per_sm,
        limiter=limiters[0], limiters=limiters, limits=limits,
        warps_per_block=warps_per_block, registers_per_warp=int(c["reg_warp"]),
        registers_per_block=int(c["reg_warp"]) * warps_per_block,
        shared_mem_allocated=int(c["per_block"]), sm_shared_mem=int(c["sm_shared"]),
        gpu=gpu_name, opt_in=opt_in, note=_note(spec, regs, c, opt_in, pct),
    )


def _note(spec: ComputeCapability, regs: int, c: dict, opt_in: bool, pct) -> str:
    """Why a configuration cannot launch, or what the carveout did; empty when unremarkable."""
    notes = []
    if regs > spec.max_registers_per_thread:
        notes.append(f"cannot launch: {regs} registers/thread is above the "
                     f"{spec.max_registers_per_thread} a thread can have")
    elif bool(c["regs_fail"]):
        w = int(c["warps_per_block"])
        per_part = cdiv(w, spec.sub_partitions)
        notes.append(f"cannot launch: a block of {w} warps needs {per_part} warps × "
                     f"{int(c['reg_warp']):,} registers in each of the {spec.sub_partitions} "
                     f"register-file sub-partitions, more than their "
                     f"{spec.registers_per_sub_partition:,}; use fewer threads or registers")
    if bool(c["smem_fail"]):
        per_block, cap = int(c["per_block"]), int(c["block_cap"])
        if not opt_in and per_block <= spec.shared_per_block_optin + spec.reserved_shared_per_block:
            notes.append(f"cannot launch: {exact_bytes(per_block)}/block (with the reservation) is "
                         f"above the {binary_bytes(spec.shared_per_block)} a block gets without opting in; "
                         "raise cudaFuncAttributeMaxDynamicSharedMemorySize")
        else:
            notes.append(f"cannot launch: {exact_bytes(per_block)}/block (with the reservation) is "
                         f"above the per-block maximum of {exact_bytes(cap)} on CC {spec.cc}")
    if not notes and pct is not None and int(c["preferred"]) < int(c["per_block"]):
        notes.append(f"the carveout preference ({percent(pct / 100)} → "
                     f"{binary_bytes(int(c['preferred']))}) cannot hold one block, "
                     f"so the SM is given {binary_bytes(int(c['sm_shared']))} instead")
    return "; ".join(notes)


# -- many configurations at once ---------------------------------------------------------------

def blocks_per_sm(cc=None, *, gpu=None, threads_per_block, registers_per_thread,
                  shared_mem_per_block=0, carveout=None, opt_in=True) -> np.ndarray:
    """Resident blocks per SM for arrays of configurations (NumPy broadcasting).

    The same rules as :func:`occupancy`, for heat maps and for checking many measured points at
    once; ``carveout`` is one value for all of them.  Returns an integer array.
    """
    spec, pct = _common(cc, gpu, carveout, opt_in)
    threads = _validate.int_array("threads_per_block", threads_per_block, low=1,
                                  high=spec.max_threads_per_block)
    regs = _validate.int_array("registers_per_thread", registers_per_thread, low=0)
    smem = _validate.int_array("shared_mem_per_block", shared_mem_per_block, low=0)
    return _compute(spec, threads, regs, smem, pct, opt_in)["blocks"]


# -- curves like NVIDIA's occupancy calculator -------------------------------------------------

@dataclass(frozen=True, eq=False, repr=False)
class Curve(Readout):
    """Occupancy as one input varies and the others stay fixed (read-only NumPy arrays)."""

    parameter: str          # "threads_per_block", "registers_per_thread" or "shared_mem_per_block"
    x: np.ndarray
    blocks_per_sm: np.ndarray
    warps_per_sm: np.ndarray
    occupancy: np.ndarray   # 0..1
    limiter: np.ndarray     # the binding limit at each point (first in LIMITS order on ties)
    cc: str
    fixed: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.x)

    def readout_title(self) -> str:
        return f"Occupancy against {self.parameter} on CC {self.cc}"

    def readout_rows(self) -> tuple[Row, ...]:
        best = int(np.argmax(self.occupancy))
        return (*(Row(k, v) for k, v in self.fixed.items()),
                Row(self.parameter, f"{self.x[0]:,} to {self.x[-1]:,}, {len(self.x)} points"),
                Row("highest occupancy", float(self.occupancy[best]), "%"),
                Row(f"at {self.parameter}", int(self.x[best])))


def _curve(parameter, x, spec, threads, regs, smem, pct, opt_in, fixed) -> Curve:
    c = _compute(spec, threads, regs, smem, pct, opt_in)
    blocks = c["blocks"]
    warps = blocks * c["warps_per_block"]
    limiter = np.asarray(LIMITS)[np.argmin(c["limits"], axis=0)]
    arrays = [np.asarray(x, dtype=np.int64), blocks, warps, warps / spec.max_warps_per_sm,
              limiter]
    for a in arrays:
        a.setflags(write=False)
    return Curve(parameter, *arrays, cc=spec.cc, fixed=fixed)


def _common(cc, gpu, carveout, opt_in):
    spec, _ = resolve(cc, gpu)
    if not isinstance(opt_in, bool):
        raise TypeError(f"opt_in must be True or False, got {opt_in!r}")
    return spec, _carveout(carveout)


def occupancy_vs_block_size(cc=None, *, gpu=None, registers_per_thread, shared_mem_per_block=0,
                            carveout=None, opt_in=True) -> Curve:
    """Occupancy for block sizes 32, 64, ..., 1024 threads, registers and shared memory fixed."""
    spec, pct = _common(cc, gpu, carveout, opt_in)
    regs = _validate.integer("registers_per_thread", registers_per_thread, low=0)
    smem = _validate.integer("shared_mem_per_block", shared_mem_per_block, low=0)
    x = np.arange(WARP_SIZE, spec.max_threads_per_block + 1, WARP_SIZE)
    return _curve("threads_per_block", x, spec, x, regs, smem, pct, opt_in,
                  {"registers_per_thread": regs, "shared_mem_per_block": smem,
                   "carveout": pct})


def occupancy_vs_registers(cc=None, *, gpu=None, threads_per_block, shared_mem_per_block=0,
                           carveout=None, opt_in=True) -> Curve:
    """Occupancy for 1..255 registers/thread, block size and shared memory fixed."""
    spec, pct = _common(cc, gpu, carveout, opt_in)
    threads = _validate.integer("threads_per_block", threads_per_block, low=1,
                                high=spec.max_threads_per_block)
    smem = _validate.integer("shared_mem_per_block", shared_mem_per_block, low=0)
    x = np.arange(1, spec.max_registers_per_thread + 1)
    return _curve("registers_per_thread", x, spec, threads, x, smem, pct, opt_in,
                  {"threads_per_block": threads, "shared_mem_per_block": smem,
                   "carveout": pct})


def occupancy_vs_shared_mem(cc=None, *, gpu=None, threads_per_block, registers_per_thread,
                            carveout=None, opt_in=True, step=None) -> Curve:
    """Occupancy for 0..the opt-in maximum bytes of shared memory per block.

    ``step`` defaults to the allocation unit (128 B, or 256 B on CC 7.x): the per-block size is
    rounded up to that unit anyway, so a finer step shows nothing new.
    """
    spec, pct = _common(cc, gpu, carveout, opt_in)
    threads = _validate.integer("threads_per_block", threads_per_block, low=1,
                                high=spec.max_threads_per_block)
    regs = _validate.integer("registers_per_thread", registers_per_thread, low=0)
    step = spec.shared_unit if step is None else _validate.integer("step", step, low=1)
    top = spec.shared_per_block_optin if opt_in else spec.shared_per_block
    x = np.arange(0, top + 1, step)
    return _curve("shared_mem_per_block", x, spec, threads, regs, x, pct, opt_in,
                  {"threads_per_block": threads, "registers_per_thread": regs,
                   "carveout": pct})
