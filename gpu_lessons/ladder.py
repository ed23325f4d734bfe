"""The GPU memory ladder: each storage level from registers to DRAM, its scope, size and speed.

Physical levels, nearest the cores first, and the CUDA memory spaces that live in each:

=================  ===============================================  ===========================
level              holds                                            visible to
=================  ===============================================  ===========================
registers          a thread's scalar variables                      one thread
L1 / shared SRAM   ``__shared__`` arrays; L1 cache of global,        shared memory: one block;
                   local and texture data                           L1: one SM
constant cache     cached ``__constant__`` data                     one SM (broadcast to a warp)
L2                 every byte that moves between SMs and DRAM,      the whole GPU
                   PCIe or NVLink
DRAM (HBM/GDDR)    global, local, constant and texture memory       the whole GPU
=================  ===============================================  ===========================

How each number is found (``memory_ladder`` computes them, nothing is typed per GPU):

* register file per SM = ``registers_per_sm`` x 4 B (the compute-capability table: 65,536
  32-bit registers = 256 KiB since Volta).  The bandwidth it must deliver at the FP32 peak is
  FP32 lanes x 3 source operands x 4 B x clock: an FMA ``d = a*b + c`` reads three registers.
* unified L1/shared SRAM per SM: :data:`UNIFIED_L1_KIB` (CUDA C++ Programming Guide); the
  largest shared-memory carveout is the compute-capability table's ``max_sm_shared``; the rest of
  the SRAM is L1.  Shared-memory bandwidth = 32 banks x 4 B per clock per SM x SMs x clock
  (Programming Guide, "Shared Memory": successive 32-bit words map to 32 banks, each bank
  delivers 32 bits per clock).
* constant memory: 64 KiB per device, cached in an 8 KiB working set per SM
  (:data:`CONSTANT_BYTES`, :data:`CONSTANT_CACHE_BYTES`).
* L2: the catalog's ``l2_bytes``; bandwidth = ``l2_bytes_per_clk`` x boost clock where the
  catalog has it.
* DRAM: the catalog's size, type and datasheet bandwidth.

Latencies are not in any datasheet.  The ladder quotes the microbenchmarks of Jia et al.,
"Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking" (arXiv 1804.06826), on a
V100 (:data:`V100_LATENCY_CYCLES`), for every GPU as the order of magnitude, and the course's
loaded-DRAM figure :data:`gpu_lessons.latency.DEFAULT_LATENCY_NS` for DRAM.

>>> lad = memory_ladder("V100")
>>> lad.level("registers").total_bytes // 1024          # 80 SMs x 256 KiB
20480
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _validate
from ._format import binary_bytes, duration, html_table, memory_size, si, text_table
from .hardware import GPU
from .hardware import gpu as _lookup
from .latency import DEFAULT_LATENCY_NS
from .occupancy import compute_capability

#: Unified L1 data cache + shared memory per SM, KiB, by compute capability (CUDA C++
#: Programming Guide, "Compute Capability 7.x / 8.x / 9.0", shared-memory sections: 128 KB on
#: 7.0, 96 KB on 7.5, 192 KB on 8.0 and 8.7, 128 KB on 8.6 and 8.9, 256 KB on 9.0).
UNIFIED_L1_KIB = {"7.0": 128, "7.5": 96, "8.0": 192, "8.6": 128, "8.7": 192, "8.9": 128,
                  "9.0": 256}
UNIFIED_L1_SOURCE = ("CUDA C++ Programming Guide, 'Compute Capability 7.x/8.x/9.0', "
                     "shared memory: unified L1 data cache + shared memory per SM")
#: Shared memory: 32 banks, each 4 bytes wide, each serving one 32-bit word per clock
#: (CUDA C++ Programming Guide, "Shared Memory" in the compute-capability sections).
SHARED_BANKS = 32
BANK_BYTES = 4
#: Constant memory per device and the per-SM constant-cache working set (CUDA C++ Programming
#: Guide, "Technical Specifications per Compute Capability": 64 KB and 8 KB on every CC here).
CONSTANT_BYTES = 64 * 1024
CONSTANT_CACHE_BYTES = 8 * 1024
#: Load-to-use latencies measured on a Tesla V100 with pointer-chasing microbenchmarks:
#: shared memory 19, L1 hit 28, L2 hit 193 cycles (Jia, Maggioni, Staiger, Scarpazza,
#: arXiv 1804.06826, 2018).  Later GPUs are in the same range; use them as orders of magnitude.
V100_LATENCY_CYCLES = {"shared": 19, "l1": 28, "l2": 193}
V100_LATENCY_SOURCE = "Jia et al. 2018, arXiv 1804.06826 (measured on a V100)"
#: Source operands of an FMA (d = a*b + c): what the register file reads per lane per clock.
FMA_OPERANDS = 3
REGISTER_BYTES = 4


def shared_bandwidth(sms: int, clock_hz: float) -> float:
    """Peak shared-memory bandwidth in B/s: 32 banks x 4 B per clock per SM x SMs x clock."""
    sms = _validate.integer("sms", sms, low=1)
    clock = _validate.positive("clock_hz", clock_hz)
    return SHARED_BANKS * BANK_BYTES * sms * clock


def register_operand_bandwidth(fp32_lanes: int, clock_hz: float) -> float:
    """Register bytes read per second when every FP32 lane issues one FMA per clock:
    lanes x 3 operands x 4 B x clock."""
    lanes = _validate.integer("fp32_lanes", fp32_lanes, low=1)
    clock = _validate.positive("clock_hz", clock_hz)
    return lanes * FMA_OPERANDS * REGISTER_BYTES * clock


def unified_l1_bytes(cc) -> int | None:
    """L1 + shared SRAM per SM in bytes for compute capability ``cc`` (None if not tabulated)."""
    kib = UNIFIED_L1_KIB.get(compute_capability(cc).cc)
    return None if kib is None else kib * 1024


@dataclass(frozen=True)
class Level:
    """One rung of the ladder.  Sizes in bytes, bandwidth in B/s for the whole GPU (None
    where no source gives it); ``latency`` is text because it is an order of magnitude."""

    name: str
    holds: str
    scope: str
    per_sm_bytes: int | None
    total_bytes: int | None
    bandwidth: float | None
    bandwidth_note: str
    latency: str
    source: str


@dataclass(frozen=True)
class Ladder:
    """The memory ladder of one GPU (see the module docstring for every formula)."""

    gpu: str
    levels: tuple[Level, ...]

    def level(self, name: str) -> Level:
        """The level called ``name`` (``"registers"``, ``"L1 / shared"``, ``"constant cache"``,
        ``"L2"``, ``"DRAM"``)."""
        for lv in self.levels:
            if lv.name == name:
                return lv
        _validate.choice("name", name, [lv.name for lv in self.levels])
        raise AssertionError("unreachable")

    _HEAD = ("level", "holds", "visible to", "per SM", "whole GPU", "bandwidth", "latency")

    def _rows(self):
        def size(n):
            return "–" if n is None else memory_size(n)

        for lv in self.levels:
            # SI prefixes, not a fixed GB/s: the ladder's rows span 4.8 to 400 TB/s
            bw = "–" if lv.bandwidth is None else si(lv.bandwidth, "B/s")
            if lv.bandwidth_note:
                bw += f" ({lv.bandwidth_note})"
            yield (lv.name, lv.holds, lv.scope, size(lv.per_sm_bytes), size(lv.total_bytes), bw,
                   lv.latency)

    def __repr__(self) -> str:
        keep = (0, 3, 4, 5, 6)
        return f"Ladder({self.gpu})\n" + text_table(
            None, [[r[i] for i in keep] for r in [self._HEAD, *self._rows()]])

    def _repr_html_(self) -> str:
        return html_table(f"Memory ladder: {self.gpu}", self._HEAD, self._rows())


def memory_ladder(gpu="H100") -> Ladder:
    """Registers, L1/shared, constant cache, L2 and DRAM of catalog GPU ``gpu`` (a name or a
    :class:`~gpu_lessons.hardware.GPU`), each with its scope, size and bandwidth."""
    g: GPU = _lookup(gpu)
    cc = compute_capability(g.cc)
    clock = g.boost_mhz * 1e6 if g.boost_mhz else None
    lat = V100_LATENCY_CYCLES
    reg_sm = cc.registers_per_sm * REGISTER_BYTES
    sram = unified_l1_bytes(g.cc)
    dram_cycles = f" (≈ {DEFAULT_LATENCY_NS * g.boost_mhz / 1e3:,.0f} cycles)" if clock else ""
    levels = (
        Level("registers", "a thread's variables", "one thread", reg_sm, reg_sm * g.sms,
              None if clock is None else register_operand_bandwidth(g.fp32_cores, clock),
              "needed at the FP32 peak" if clock else "",
              "none: operands are read as the instruction issues",
              f"{cc.source}; 3 operands per FMA"),
        Level("L1 / shared", f"__shared__ arrays (up to {binary_bytes(cc.max_sm_shared)} per SM); "
              "the rest is L1 for global, local and texture data",
              "shared: one block; L1: one SM", sram, None if sram is None else sram * g.sms,
              None if clock is None else shared_bandwidth(g.sms, clock),
              "shared memory, 128 B per clock per SM" if clock else "",
              f"≈ {lat['shared']} cycles shared, ≈ {lat['l1']} cycles L1 hit (V100)",
              f"{UNIFIED_L1_SOURCE}; {V100_LATENCY_SOURCE}"),
        Level("constant cache", "__constant__ data (64 KiB per device)",
              "one SM; broadcast to a warp", CONSTANT_CACHE_BYTES,
              CONSTANT_CACHE_BYTES * g.sms, None, "one word per warp per clock, broadcast",
              "fast when all lanes read one word; n distinct words take n passes",
              "CUDA C++ Programming Guide, 'Technical Specifications per Compute Capability' "
              "and 'Constant Memory'"),
        Level("L2", "all traffic to DRAM, PCIe and NVLink", "the whole GPU", None, g.l2_bytes,
              g.l2_bandwidth, "", f"≈ {lat['l2']} cycles (V100)",
              f"{g.sources.get('l2_bytes', '')}; {V100_LATENCY_SOURCE}"),
        Level("DRAM", f"{g.memory_type}: global, local, constant and texture memory",
              "the whole GPU", None, round(g.memory_gb * 1e9), g.bandwidth, "datasheet",
              f"≈ {duration(DEFAULT_LATENCY_NS * 1e-9)} under load{dram_cycles}",
              f"{g.sources.get('bandwidth_gbs', '')}; latency: course figure "
              "(gpu_lessons.latency.DEFAULT_LATENCY_NS)"),
    )
    return Ladder(g.name, levels)
