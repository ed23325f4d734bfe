"""The efficiency properties a budget can limit, each measured on a simulator run.

Every metric reads the :class:`gpu_lessons.kernels.simt.SimResult` of one case and returns the value
and, where one line of the kernel is to blame, that line (the learner's own line number).
Counts are the simulator's: a *request* is one warp-wide load or store instruction, a
*sector* 32 bytes (``memory.global_load``), a *wavefront* one pass of the 32 banks
(``memory.shared_load``); "lane loads" count one per active lane.

An atomic reads and writes its word (``atomicAdd(&a[i], 0)`` is a load that returns the old
value), so every metric of loads or stores counts atomics on that memory as both: a kernel
cannot read or write around a budget through ``t.atomic_add``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from .. import occupancy as _occupancy
from .._format import percent, ratio
from ..kernels.simt import WARP_SIZE
from ..memory import SECTOR_BYTES
from ._section import Section

_COALESCING_SECTION = (4, "2. Coalescing: how many sectors does one request cost?")


@dataclass(frozen=True)
class Metric:
    """How to measure, compare and print one property."""

    what: str                     # "global loads of {array}" — the label's template
    unit: str                     # "sectors per request"
    measure: Callable             # (result, case, array, params) -> (value, line or None)
    higher_is_better: bool
    section_ref: tuple[int, str]
    decimals: int | None = 1   # None: 3 significant figures

    @property
    def section(self):

        return Section(*self.section_ref)

    def label(self, array: str | None) -> str:
        return self.what.format(array=array)

    def relation(self, limit) -> str:
        """How a value must stand to ``limit``: "= 100 %" where nothing higher exists."""
        if self.higher_is_better and self.unit == "%" and not callable(limit) and limit >= 1.0:
            return "="
        return "≥" if self.higher_is_better else "≤"

    @property
    def bound_word(self) -> str:
        return "at least " if self.higher_is_better else ""

    def within(self, value: float, limit: float) -> bool:
        # a hair of slack for the float division of exact counts (1/3 * 3 and the like)
        eps = 1e-9 * max(1.0, abs(limit))
        return value >= limit - eps if self.higher_is_better else value <= limit + eps

    def show(self, value: float, unit: bool = True) -> str:
        """``value`` as the learner reads it: ``4.0 sectors per request``, ``92.7 %``, ``2``."""
        if self.unit == "%":
            return percent(value)
        text = f"{value:,.{self.decimals}f}" if self.decimals is not None else ratio(value)
        return f"{text} {self.unit}" if unit and self.unit else text


# -- helpers --------------------------------------------------------------------------------------

#: The event kinds that read (``LOADS``) or write (``STORES``) each memory: an atomic does both.
LOADS = {"global": ("ld.global", "atom.global"), "shared": ("ld.shared", "atom.shared")}
STORES = {"global": ("st.global", "atom.global"), "shared": ("st.shared", "atom.shared")}


def _events(result, kinds: tuple[str, ...], array: str | None = None):
    return [e for e in result.events
            if e.kind in kinds and (array is None or e.array == array)]


def _worst_line(events, key) -> int | None:
    """The line of the event that scores worst on ``key`` (the first of equals)."""
    if not events:
        return None
    return max(events, key=key).line


def _blocks(result) -> int:
    g = result.grid
    return g.x * g.y * g.z


# -- the metrics ----------------------------------------------------------------------------------

def _sectors(kinds):
    """Sectors of the worst request, not the average: cheap one-sector requests added to a
    kernel (one lane storing a value again) would otherwise dilute a 32-sector request's
    cost below the budget, and every derivation ("32 consecutive floats are 4 sectors") is a
    statement about each request."""
    def measure(result, case, array, params):
        evs = [e for e in _events(result, kinds, array) if e.requests]
        if not evs:
            return 0.0, None
        worst = max(evs, key=lambda e: e.sectors / e.requests)
        return worst.sectors / worst.requests, worst.line
    return measure


def _sector_use(kinds):
    """The share of the moved sectors' bytes the worst request asked for: 100 % when the
    lanes' bytes fill whole sectors, whatever the access width (4 sectors for 32 floats, 16
    for 32 float4s), 12.5 % when each 4-byte lane needs a sector of its own."""
    def measure(result, case, array, params):
        evs = [e for e in _events(result, kinds, array) if e.sectors]
        if not evs:
            return 1.0, None
        worst = min(evs, key=lambda e: e.requested_bytes / e.sectors)
        return worst.requested_bytes / (worst.sectors * SECTOR_BYTES), worst.line
    return measure


def _bank_conflicts(result, case, array, params):
    evs = [e for e in result.events if e.bank_conflicts]
    return float(sum(e.bank_conflicts for e in evs)), _worst_line(evs, lambda e: e.bank_conflicts)


def _simt_efficiency(result, case, array, params):
    idle = Counter()
    for e in result.events:
        if e.issued and e.active < WARP_SIZE:
            idle[e.line] += WARP_SIZE - e.active
    line = idle.most_common(1)[0][0] if idle else None
    return result.simt_efficiency, line


def _loads_per_element(result, case, array, params):
    evs = _events(result, LOADS["global"], array)
    loads = Counter()
    for e in evs:
        loads[e.line] += e.active
    line = loads.most_common(1)[0][0] if loads else None
    return sum(loads.values()) / case.args[array].size, line


def _barriers(result, case, array, params):
    bars = Counter(e.line for e in result.events if e.kind == "bar.sync")
    line = bars.most_common(1)[0][0] if bars else None
    return result.barriers / _blocks(result), line


def _shared_stores_per_element(result, case, array, params):
    evs = _events(result, STORES["shared"])
    stores = Counter()
    for e in evs:
        stores[e.line] += e.active
    line = stores.most_common(1)[0][0] if stores else None
    return sum(stores.values()) / case.args[array].size, line


def _fmas(case) -> int:
    """Multiply-adds of the case's matrix products: m n k (n³ for square puzzles); attention's
    Q Kᵀ and P V, seq² × 128 each a head."""
    s = case.size
    if "seq" in s:
        return 2 * s["heads"] * s["seq"] ** 2 * 128
    return s["m"] * s["n"] * s["k"] if "m" in s else s["n"] ** 3


def _shared_loads_per_fma(result, case, array, params):
    evs = _events(result, LOADS["shared"])
    loads = Counter()
    for e in evs:
        loads[e.line] += e.active
    line = loads.most_common(1)[0][0] if loads else None
    return sum(loads.values()) / _fmas(case), line


def _shared_wavefronts_per_fma(result, case, array, params):
    """Shared-load wavefronts per warp multiply-add instruction (32 multiply-adds): what the
    shared-memory pipe delivers for each FFMA the FP32 pipe issues."""
    evs = [e for e in _events(result, ("ld.shared",)) if e.wavefronts]
    waves = Counter()
    for e in evs:
        waves[e.line] += e.wavefronts
    line = waves.most_common(1)[0][0] if waves else None
    return sum(waves.values()) / (_fmas(case) / WARP_SIZE), line


def _mma_events(result):
    evs = [e for e in result.events if e.kind == "mma"]
    lines = Counter(e.line for e in evs)
    return evs, (lines.most_common(1)[0][0] if lines else None)


def _tensor_core_share(result, case, array, params):
    """The share of the product's multiply-adds that mma instructions do (16 × 8 × 16
    each), at most 100 %."""
    evs, line = _mma_events(result)
    if line is None:   # no mma: point at the line doing the most arithmetic instead
        alu = Counter(e.line for e in result.events if e.kind == "alu")
        line = alu.most_common(1)[0][0] if alu else None
    return min(1.0, len(evs) * 16 * 8 * 16 / _fmas(case)), line


def _mma_instructions(result, case, array, params):
    """mma.m16n8k16 instructions per 16 × 8 × 16 of the product."""
    evs, line = _mma_events(result)
    return len(evs) * 16 * 8 * 16 / _fmas(case), line


def _shared_requests_per_block(result, case, array, params):
    evs = _events(result, (*LOADS["shared"], "st.shared"))
    lines = Counter(e.line for e in evs)
    line = lines.most_common(1)[0][0] if lines else None
    return len(evs) / _blocks(result), line


def _loads_before_first_store(result, case, array, params):
    """Global loads a warp has issued before its first global store, fewest over the warps
    that store: how many independent loads each thread keeps in flight (memory-level
    parallelism), since a store needs the data its loads bring.  An atomic counts as the
    store (it writes, and its old value comes back only when it is done).  With ``array``, only
    loads of that array count: loads of the output (which nothing needs) would otherwise
    stand in for the input loads the budget is about."""
    before: dict = {}
    stored: set = set()
    for e in result.events:
        key = (e.block, e.warp)
        if key in stored:
            continue
        if e.kind == "ld.global" and (array is None or e.array == array):
            before[key] = before.get(key, 0) + 1
        elif e.kind in STORES["global"]:
            stored.add(key)
    counts = [before.get(k, 0) for k in stored]
    first_store = next((e.line for e in result.events if e.kind in STORES["global"]), None)
    return (float(min(counts)) if counts else 0.0), first_store


def _atomics_per_element(result, case, array, params):
    """Global atomic lane operations per element of ``array`` (the input they count)."""
    evs = _events(result, ("atom.global",))
    lines = Counter()
    for e in evs:
        lines[e.line] += e.active
    line = lines.most_common(1)[0][0] if lines else None
    return sum(lines.values()) / case.args[array].size, line


def _global_atomics_per_block(result, case, array, params):
    evs = _events(result, ("atom.global",))
    lines = Counter()
    for e in evs:
        lines[e.line] += e.active
    line = lines.most_common(1)[0][0] if lines else None
    return sum(lines.values()) / _blocks(result), line


def _atomic_serialisation(result, case, array, params):
    """Lanes that hit the most contended address, averaged over the global atomic
    instructions: 1 when every lane of an atomic updates its own element."""
    evs = _events(result, ("atom.global",))
    if not evs:
        return 0.0, None
    return (sum(e.serialisation for e in evs) / len(evs),
            _worst_line(evs, lambda e: e.serialisation))


def _atomic_contention(result, case, array, params):
    """The most lanes of one warp that update one address atomically (global or shared), over
    the whole run: 1 when a warp's lanes combine their values before one lane updates memory.
    Counted per warp, not per instruction, so neither every lane of one atomic on one address
    nor the lanes taking turns in a loop of one-lane atomics gets under it; one lane updating
    an address again (a warp's total of each chunk it sums) is still one lane.  The worst
    warp counts, not an average, so uncontended atomics added to a kernel cannot hide it."""
    evs = _events(result, ("atom.global", "atom.shared"))
    if not evs:
        return 0.0, None
    if any(e.indices is None for e in evs):  # a run without recorded indices
        worst = max(evs, key=lambda e: e.serialisation)
        return float(worst.serialisation), worst.line
    lanes: dict = {}
    line_of = {}
    for e in evs:
        for lane, i in enumerate(e.indices):
            if i is not None:
                key = (e.block, e.warp, e.array, i)
                lanes.setdefault(key, set()).add(lane)
                line_of[key] = e.line
    key = max(lanes, key=lambda k: len(lanes[k]))
    return float(len(lanes[key])), line_of[key]


def _output_loads(result, case, array, params):
    """Lane loads of the output arrays (``params["arrays"]``) by the event kinds
    ``params["kinds"]``.  No puzzle's spec reads its outputs, so a kernel that does is using
    them as scratch memory: staging values in ``out`` instead of shared memory and reading
    them back would dodge every budget on the loads of the inputs.  Atomics on the lines
    ``params["unread_atomics"]`` are left out: their old value is never used, so they only
    write (per-warp totals added to ``out[0]``)."""
    unread = params.get("unread_atomics", frozenset())
    evs = [e for e in result.events
           if e.kind in params["kinds"] and e.array in params["arrays"]
           and not (e.kind.startswith("atom.") and e.line in unread)]
    lanes = Counter()
    for e in evs:
        lanes[e.line] += e.active
    line = lanes.most_common(1)[0][0] if lanes else None
    return float(sum(lanes.values())), line


def _input_stores(result, case, array, params):
    """Lane stores (atomics included) to the arrays that are not outputs: the spec never writes
    an input, so a kernel that does is using it as scratch memory — a strided transpose into
    ``a`` and a coalesced read back would stand in for the shared tile."""
    evs = [e for e in result.events
           if e.kind in STORES["global"] and e.array not in params["outputs"]]
    lanes = Counter()
    for e in evs:
        lanes[e.line] += e.active
    line = lanes.most_common(1)[0][0] if lanes else None
    return float(sum(lanes.values())), line


def _busiest_warp(result, case, array, params):
    """Warp instructions issued by the warp that issued the most: the length of the longest
    chain of work in the launch.  Threads that share the work keep it short; one thread that
    loops over a block's elements while the others wait makes it as long as the loop.  Extra
    instructions can only lengthen it, so it cannot be padded down.  The line is the one that
    busiest warp issued most often (the body of its loop)."""
    per_warp = Counter((e.block, e.warp) for e in result.events if e.issued)
    if not per_warp:
        return 0.0, None
    busiest, count = per_warp.most_common(1)[0]
    lines = Counter(e.line for e in result.events
                    if e.issued and (e.block, e.warp) == busiest)
    return float(count), lines.most_common(1)[0][0]


def _shuffle_inactive_reads(result, case, array, params):
    reads = result.shuffle_reads
    return float(result.totals.shuffle_inactive_reads), (reads[0].line if reads else None)


#: Printed once when NVRTC is missing and the occupancy check falls back to a stated count.
_NO_NVRTC_SAID = []


def kernel_registers(kernel, args, fallback: int, arch: str = "sm_90") -> int:
    """Registers per thread NVRTC gives ``kernel`` for ``args`` on ``arch``, with the options
    ``run_on_gpu`` compiles with (:func:`gpu_lessons.kernels.compile`'s; ptxas's report, no SASS
    needed); ``fallback`` when NVRTC is not installed, saying so in one line."""
    from ..kernels import compiled, nvrtc, to_cuda
    from ..kernels.lang import KernelLanguageError

    why = None
    try:
        if nvrtc.newest_library() is None:
            why = "NVRTC is not installed"
        else:
            source = to_cuda(kernel, *args)
            options = (*source.options, *compiled.CUPY_OPTIONS, "--ptxas-options=-v")
            res = nvrtc.compile_cubin(str(source), arch, options)
            if res.ok:
                return compiled.ptxas_resources(res.log, source.kernel_name)["registers_per_thread"]
            why = "NVRTC could not compile the kernel"
    except KernelLanguageError:
        why = "the kernel has no CUDA C translation"
    except (OSError, RuntimeError, MemoryError, ValueError) as exc:   # a broken NVRTC install
        why = f"NVRTC failed ({type(exc).__name__})"
    if not _NO_NVRTC_SAID:
        _NO_NVRTC_SAID.append(True)
        print(f"{why}, so the occupancy check uses the worked kernel's {fallback} registers, "
              f"not your kernel's (pip install nvidia-cuda-nvrtc)")
    return fallback


def _occupancy_metric(result, case, array, params):
    """Theoretical occupancy of the learner's launch: the block size it chose, the registers
    NVRTC gives the learner's kernel (``params["registers"] == "compiled"``; the simulator cannot
    count registers) or a stated count, and the static shared memory the kernel's blocks
    declared, as the simulator measured it.  The limit is the most this kernel can have: the
    best occupancy over block sizes (multiples of 32) with those registers and the blocks'
    shared memory growing with the block by ``params["shared_per_thread"]`` bytes a thread (the
    puzzle's tile).  When shared memory is what limits, the line to blame is the declaration of
    the largest shared array."""
    block = result.block.x * result.block.y * result.block.z
    registers = params["registers"]
    if registers == "compiled":
        registers = kernel_registers(params["kernel"], tuple(case.args.values()),
                                     params["fallback_registers"])
    shared = result.shared_bytes_per_block
    occ = _occupancy.occupancy(params["cc"], threads_per_block=block,
                               registers_per_thread=registers, shared_mem_per_block=shared)
    line = None
    if "shared memory" in occ.limiters and result.shared_arrays:
        line = max(result.shared_arrays, key=lambda a: a.nbytes).line
    if "shared_per_thread" not in params:
        return occ.occupancy, line
    fixed = shared - params["shared_per_thread"] * block
    best = max(_occupancy.occupancy(params["cc"], threads_per_block=b,
                                    registers_per_thread=registers,
                                    shared_mem_per_block=max(0, fixed
                                                             + params["shared_per_thread"] * b))
               .occupancy for b in range(32, 1025, 32))
    return occ.occupancy, line, best


METRICS: dict[str, Metric] = {
    "load_sectors": Metric("global loads of {array}", "sectors per request", _sectors(LOADS["global"]),
                           False, _COALESCING_SECTION),
    "store_sectors": Metric("global stores to {array}", "sectors per request",
                            _sectors(STORES["global"]), False, _COALESCING_SECTION),
    "load_sector_use": Metric("global loads of {array}: bytes used of the sectors moved", "%",
                              _sector_use(LOADS["global"]),
                              True, _COALESCING_SECTION),
    "store_sector_use": Metric("global stores to {array}: bytes used of the sectors moved",
                               "%", _sector_use(STORES["global"]),
                               True, _COALESCING_SECTION),
    "bank_conflicts": Metric("shared-memory bank conflicts (wavefronts beyond the ideal)", "",
                             _bank_conflicts, False, (4, "5. Shared memory banks"), None),
    "simt_efficiency": Metric("SIMT efficiency", "%", _simt_efficiency, True,
                              (2, "3. Warp divergence: branch by lane or branch by warp")),
    "loads_per_element": Metric("global loads of {array}", "per element",
                                _loads_per_element, False,
                                (7, "3.2 Data reuse: block, warp and thread tiling"), None),
    "barriers": Metric("barriers", "per block", _barriers, False,
                       (7, "5.4 Reductions and scans: trees in shared memory"), None),
    "shared_stores_per_element": Metric("shared-memory stores", "per element",
                                        _shared_stores_per_element, False,
                                        (7, "5.4 Reductions and scans: trees in shared "
                                            "memory"), None),
    "shared_loads_per_fma": Metric("shared-memory loads", "per multiply-add",
                                   _shared_loads_per_fma, False,
                                   (7, "3.2 Data reuse: block, warp and thread tiling"), None),
    "shared_wavefronts_per_fma": Metric("shared-memory load wavefronts",
                                        "per warp multiply-add", _shared_wavefronts_per_fma,
                                        False, (7, "6.4 Warp tiles: what one warp reads at "
                                                   "once"), None),
    "shared_requests_per_block": Metric("shared-memory requests", "per block",
                                        _shared_requests_per_block, False,
                                        (7, "5.3 Stable execution paths: divergence and "
                                            "needless synchronisation"), None),
    "tensor_core_share": Metric("multiply-adds on the tensor cores", "%", _tensor_core_share,
                                True, (7, "6.6 Tensor cores: one warp, one matrix "
                                          "instruction")),
    "mma_instructions": Metric("mma instructions", "per 16 × 8 × 16 product",
                               _mma_instructions, False,
                               (7, "6.6 Tensor cores: one warp, one matrix instruction"), None),
    "loads_before_first_store": Metric("global loads issued before the first store", "per warp",
                                       _loads_before_first_store, True,
                                       (6, "7. A model of latency hiding: warps × "
                                           "independent work"), None),
    "atomics_per_element": Metric("global atomics per element of {array}", "",
                                  _atomics_per_element, False,
                                  (3, "Where do all the SMs meet? L2"), None),
    "global_atomics_per_block": Metric("global atomics", "per block", _global_atomics_per_block,
                                       False, (3, "How do L1 cache and shared memory share "
                                                  "one SRAM?"), None),
    "atomic_serialisation": Metric("global atomic serialisation", "lanes per address",
                                   _atomic_serialisation, False,
                                   (3, "Where do all the SMs meet? L2"), None),
    "atomic_contention": Metric("atomic contention (lanes of one warp on one address)",
                                "lanes", _atomic_contention, False,
                                (3, "Where do all the SMs meet? L2"), None),
    "output_loads": Metric("global loads of the outputs", "lane loads", _output_loads, False,
                           (3, "4. What is kept on the chip (SRAM)?"), 0),
    "input_stores": Metric("global stores to the inputs", "lane stores", _input_stores, False,
                           (3, "How do L1 cache and shared memory share one SRAM?"), 0),
    "busiest_warp": Metric("instructions issued by the busiest warp", "instructions",
                           _busiest_warp, False,
                           (2, "1. The execution hierarchy: thread → warp → block → SM"), 0),
    "shuffle_inactive_reads": Metric("shuffle reads of inactive lanes", "",
                                     _shuffle_inactive_reads, False,
                                     (7, "5.4 Reductions and scans: trees in shared memory"),
                                     None),
    "occupancy": Metric("occupancy on an H100 (CC 9.0)", "%", _occupancy_metric, True,
                        (6, "2. Occupancy and the limits on resident warps")),
}
