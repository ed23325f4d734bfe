"""Chapter 03 (memory hierarchy) exercise questions.

References come from the memory ladder (:mod:`gpu_lessons.ladder`: register file and
shared-memory sizes and bandwidths from the CUDA C++ Programming Guide's compute-capability
tables and the catalog) and the cache simulator (:mod:`gpu_lessons.cache`: write-back and
write-through traffic, Hennessy & Patterson, *Computer Architecture* 6th ed., App. B.1).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .._math import cdiv
from ..cache import Cache
from ..hardware import gpu as lookup
from ..ladder import BANK_BYTES, memory_ladder, shared_bandwidth
from ._common import gpus
from .types import Choice, Function, Mistake, Number, Question

_MIB = 2**20


# -- 03.registers_total: the register file of a whole GPU -------------------------------------------

_REGISTER_GPUS = ("h100", "a100", "v100", "h100 pcie", "rtx 4090", "l40s", "t4", "b200", "rtx 3090",
                  "l4", "quadro rtx 5000")


def _registers_total_mib(gpu) -> float:
    """Whole-GPU register file: 65,536 32-bit registers per SM x 4 B x SMs, in MiB.

    H100 SXM5: 65,536 x 4 B = 256 KiB per SM, x 132 SMs = 33 MiB.
    """
    return memory_ladder(gpu).level("registers").total_bytes / _MIB


def _with_l1(ref, gpu) -> float | None:
    """Registers and the unified L1/shared SRAM added together."""
    l1 = memory_ladder(gpu).level("L1 / shared").total_bytes
    return None if l1 is None else ref + l1 / _MIB


# -- 03.shared_vs_dram: shared-memory bandwidth against DRAM ---------------------------------------

_SHARED_GPUS = ("h100", "a100", "v100", "h100 pcie", "rtx 4090", "l40s", "t4", "rtx 3090", "l4",
                "quadro rtx 5000")


def _shared_vs_dram(gpu, clock_mhz: float | None = None, bank_bytes: int = BANK_BYTES) -> float:
    """Aggregate shared-memory bandwidth over DRAM bandwidth: 32 banks x 4 B per clock per SM
    x SMs x boost clock (Programming Guide, "Shared Memory"), over the datasheet bandwidth.
    H100 SXM5: 128 B x 132 x 1980 MHz = 33.45 TB/s, 9.99 x its 3.35 TB/s of HBM3."""
    g = lookup(gpu)
    shared = shared_bandwidth(g.sms, (clock_mhz or g.boost_mhz) * 1e6) * bank_bytes / BANK_BYTES
    return shared / g.bandwidth


def _shared_tensor_clock(ref, gpu) -> float | None:
    g = lookup(gpu)
    return None if g.tensor_boost_mhz is None else _shared_vs_dram(gpu, g.tensor_boost_mhz)


# -- which memory for which data -------------------------------------------------------------------

_LEVELS = ("registers", "L1 / shared", "constant cache", "L2", "DRAM")


def _block_scratch() -> str:
    """The nearest ladder level whose scope is one block: shared memory (CUDA C++ Programming
    Guide, "Shared Memory": visible to all threads of a block, on chip)."""
    return next(lv.name for lv in memory_ladder("h100").levels if "one block" in lv.scope)


# -- where local memory lives ----------------------------------------------------------------------


def _local_memory_home() -> str:
    """The ladder level that is local memory's home: the farthest level holding "local" data.

    L1 and L2 cache local data on its way; its home is device memory (CUDA C++ Programming
    Guide, "Device Memory Accesses": local memory resides in device memory).
    """
    holders = [lv.name for lv in memory_ladder("h100").levels if "local" in lv.holds]
    return holders[-1]


# -- write-back vs write-through traffic -----------------------------------------------------------

@lru_cache(maxsize=8192)  # a cache simulation per input; every check re-asks the same inputs
def _write_traffic_reference(n_elements, passes, element_bytes, line_bytes, policy):
    """Bytes a cache sends to the next level for ``passes`` passes of stores over an array of
    ``n_elements`` elements at address 0, then a flush, simulated with :class:`Cache`.

    The cache (direct-mapped, write-allocate) is at least twice the array, so nothing is
    evicted before the flush: write-through sends every store's bytes, write-back each dirty
    line once.
    """
    footprint = n_elements * element_bytes
    size = 1 << max(footprint, line_bytes).bit_length()
    cache = Cache(size, line_bytes, 1, write_policy=policy)
    addresses = np.tile(np.arange(n_elements, dtype=np.int64) * element_bytes, passes)
    run = cache.run(addresses, is_write=np.ones(addresses.size, dtype=bool),
                    access_bytes=element_bytes)
    return run.bytes_to_next + cache.flush().bytes_to_next


def _write_traffic_inputs(rng) -> dict:
    return {"n_elements": int(rng.integers(1, 4097)), "passes": int(rng.integers(1, 17)),
            "element_bytes": int(rng.choice([1, 2, 4, 8])),
            "line_bytes": int(rng.choice([32, 64, 128])),
            "policy": str(rng.choice(["write-back", "write-through"]))}


def _write_traffic_edges() -> list[dict]:
    """One element; an array that fills whole lines; one that ends mid-line; both policies."""
    cases = []
    for policy in ("write-back", "write-through"):
        cases += [{"n_elements": 1, "passes": 1, "element_bytes": 4, "line_bytes": 128,
                   "policy": policy},
                  {"n_elements": 1024, "passes": 10, "element_bytes": 4, "line_bytes": 128,
                   "policy": policy},
                  {"n_elements": 33, "passes": 3, "element_bytes": 8, "line_bytes": 64,
                   "policy": policy}]
    return cases


def _lines(n_elements, element_bytes, line_bytes) -> int:
    return cdiv(n_elements * element_bytes, line_bytes)


def _wb_stored_bytes(e, n_elements, passes, element_bytes, line_bytes, policy):
    """Write-back counted as the array's bytes, not whole lines."""
    return n_elements * element_bytes if policy == "write-back" else e


def _wb_every_pass(e, n_elements, passes, element_bytes, line_bytes, policy):
    """Write-back counted once per pass instead of once at the end."""
    return passes * e if policy == "write-back" else e


def _wb_floor(e, n_elements, passes, element_bytes, line_bytes, policy):
    """Lines counted with floor division: a last, partly written line forgotten."""
    if policy != "write-back":
        return e
    return n_elements * element_bytes // line_bytes * line_bytes


def _wt_lines(e, n_elements, passes, element_bytes, line_bytes, policy):
    """Write-through counted as a whole line per store."""
    return passes * n_elements * line_bytes if policy == "write-through" else e


def _swapped(e, n_elements, passes, element_bytes, line_bytes, policy):
    other = "write-through" if policy == "write-back" else "write-back"
    return _write_traffic_reference(n_elements, passes, element_bytes, line_bytes, other)


QUESTIONS = (
    Question(
        id="03.registers_total",
        name="registers_total_mib",
        points=1,
        title="The register file of a whole GPU",
        prompt="Registers are the fastest storage of an SM. Every SM of compute capability 7.0 "
               "or later has 65,536 32-bit registers: 256 KiB, as much SRAM as a compute "
               "capability 9.0 SM has for its unified L1 data cache and shared memory "
               "together. How large is the register file of a whole **{gpu}**, in **MiB** "
               "(2²⁰ bytes)? Store it in `registers_total_mib`, and compare it with the GPU's L2 "
               "cache (`gpu(\"{key}\").l2_bytes`).",
        hint="Registers per SM × 4 bytes × number of SMs, then divide by 2²⁰.",
        vary=(gpus(*_REGISTER_GPUS),),
        derive=lambda gpu: {"key": gpu},
        answer=Number(
            reference=_registers_total_mib,
            units="MiB",
            rtol=0.01,
            mistakes=(
                Mistake("per_sm", "that is one SM's register file; the question asks for the "
                        "whole GPU.", value=lambda ref, gpu: ref / lookup(gpu).sms),
                Mistake("no_bytes", "that counts registers (in units of 2²⁰), not bytes: each "
                        "register holds 32 bits = 4 bytes.", value=lambda ref, gpu: ref / 4),
                Mistake("bits", "that is bits; the question asks for bytes (MiB).",
                        value=lambda ref, gpu: ref * 8),
                Mistake("mb", "that is in MB (10⁶ bytes); the question asks for MiB (2²⁰ "
                        "bytes).", value=lambda ref, gpu: ref * _MIB / 1e6),
                Mistake("l2", "that is the L2 cache; the question asks for the registers.",
                        value=lambda ref, gpu: lookup(gpu).l2_bytes / _MIB),
                Mistake("with_l1", "that adds the L1/shared-memory SRAM; the question asks for "
                        "the registers alone.", value=_with_l1),
            ),
        ),
    ),
    Question(
        id="03.shared_vs_dram",
        name="shared_vs_dram",
        points=2,
        title="Shared-memory bandwidth against DRAM",
        prompt="Shared memory has 32 banks per SM, and each bank delivers one 4-byte word per "
               "clock. At its boost clock, how many times the DRAM bandwidth is the aggregate "
               "shared-memory bandwidth of {a_gpu} **{gpu}** (all SMs together)? Take the SM count, "
               "the boost clock and the DRAM bandwidth from `gpu(\"{key}\")` and store the "
               "ratio in `shared_vs_dram`. (This is the room a kernel has when it reuses data "
               "from shared memory instead of reading it again from DRAM.)",
        hint="Bytes per clock per SM × SMs × clock in Hz, over the DRAM bandwidth in bytes/s.",
        vary=(gpus(*_SHARED_GPUS),),
        derive=lambda gpu: {"key": gpu, "tensor_clock": f"{lookup(gpu).tensor_boost_mhz or 0:,.0f}"},
        answer=Number(
            reference=_shared_vs_dram,
            units="x the DRAM bandwidth",
            rtol=0.01,
            mistakes=(
                Mistake("tensor_clock", "{tensor_clock} MHz is the clock NVIDIA quotes for "
                        "tensor-core peaks; the SM boost clock is higher.",
                        value=_shared_tensor_clock),
                Mistake("one_byte", "each bank delivers a 4-byte word per clock, not a byte.",
                        value=lambda ref, gpu: _shared_vs_dram(gpu, bank_bytes=1)),
                Mistake("bits", "that counts shared memory in bits per second and DRAM in "
                        "bytes.", value=lambda ref, gpu: ref * 8),
                Mistake("per_sm", "that is one SM's shared memory; the question asks for all "
                        "SMs together.", value=lambda ref, gpu: ref / lookup(gpu).sms),
                Mistake("inverted", "that is DRAM over shared memory; the ratio asked for is "
                        "shared memory over DRAM.", value=lambda ref, gpu: 1 / ref),
            ),
        ),
    ),
    Question(
        id="03.block_scratch",
        name="block_scratch",
        points=1,
        title="Which memory for which data",
        prompt="Each thread of a 256-thread block computes a partial sum; then the threads of "
               "*that block* (and only they) combine all 256 partial sums into one. On which "
               "level of the memory ladder should the partial sums be kept? Answer with one of "
               "the ladder's level names: `\"registers\"`, `\"L1 / shared\"`, "
               "`\"constant cache\"`, `\"L2\"` or `\"DRAM\"`, in `block_scratch`. (Look at the "
               "\"visible to\" column of `memory_ladder(\"h100\")`.)",
        answer=Choice(
            reference=_block_scratch,
            options=_LEVELS,
            mistakes=(
                Mistake("registers", "a register belongs to one thread: the other threads of "
                        "the block cannot read it (warp shuffles reach only the 32 lanes of one "
                        "warp).", value="registers"),
                Mistake("constant", "kernels cannot write __constant__ memory; it holds "
                        "read-only data set by the host.", value="constant cache"),
                Mistake("l2", "L2 is shared by the whole GPU and a few hundred cycles away; "
                        "this data only needs to be visible inside one block.", value="L2"),
                Mistake("dram", "global memory works, but every access travels to DRAM (or "
                        "L2) and back; the data only needs to be visible inside one block, "
                        "and there is a level much closer that gives exactly that.",
                        value="DRAM"),
            ),
        ),
    ),
    Question(
        id="03.local_memory",
        name="local_memory_home",
        points=1,
        title="Where local memory lives",
        prompt="A kernel declares `float buf[64];` in each thread and indexes it with a value "
               "known only at run time, so the compiler cannot keep it in registers and places "
               "it in **local memory** (`-Xptxas -v` reports it as a stack frame or spill "
               "stores).\n\n"
               "On which level of the memory ladder do those bytes *live* — their home, not a "
               "cached copy? Answer with one of the ladder's level names: `\"registers\"`, "
               "`\"L1 / shared\"`, `\"constant cache\"`, `\"L2\"` or `\"DRAM\"`, in "
               "`local_memory_home`.",
        answer=Choice(
            reference=_local_memory_home,
            options=_LEVELS,
            mistakes=(
                Mistake("registers", "registers cannot be indexed at run time; that is why the "
                        "compiler moved buf out of them.", value="registers"),
                Mistake("per_sm_region", "L1 may cache local data, but local memory is not a "
                        "region of an SM (a common misreading): it is per-thread storage whose "
                        "home is further down the ladder (M11).", value="L1 / shared"),
                Mistake("l2", "L2 caches local data on its way, but a cache only holds copies: "
                        "where is the home of the bytes it caches?", value="L2"),
                Mistake("constant", "the constant cache holds read-only __constant__ data; "
                        "buf is private and writable.", value="constant cache"),
            ),
        ),
    ),
    Question(
        id="03.write_traffic",
        name="write_traffic",
        points=2,
        title="Write-through vs write-back traffic",
        prompt="A loop stores to every element of an array of `n_elements` elements (each "
               "`element_bytes` bytes, the array starting at address 0), `passes` times over, "
               "and then the cache is flushed. The cache is much larger than the array, has "
               "`line_bytes`-byte lines and allocates a line on a store miss. Write "
               "`write_traffic(n_elements, passes, element_bytes, line_bytes, policy)` returning "
               "the **bytes the cache sends to the next level**, for `policy` "
               "`\"write-through\"` (every store is forwarded at once) or `\"write-back\"` (a "
               "dirty line is written back when it is evicted or flushed).\n\n"
               "You can try cases with the simulator: `Cache(size, line, 1, write_policy=...)`, "
               "`.run(addresses, is_write=..., access_bytes=...)`, then `.flush()`; look at "
               "`bytes_to_next`.",
        answer=Function(
            reference=_write_traffic_reference,
            inputs=_write_traffic_inputs,
            edge_cases=_write_traffic_edges,
            signature="write_traffic(n_elements, passes, element_bytes, line_bytes, policy)",
            units="bytes",
            rtol=1e-9,
            mistakes=(
                Mistake("wb_bytes", "a write-back cache writes back whole dirty lines, not just "
                        "the bytes that were stored.", value=_wb_stored_bytes),
                Mistake("wb_every_pass", "a write-back cache keeps the dirty lines until they "
                        "are evicted or flushed: each line goes out once, however many passes "
                        "wrote it.", value=_wb_every_pass),
                Mistake("wb_floor", "an array that ends in the middle of a line still dirties "
                        "that line: round the number of lines up.", value=_wb_floor),
                Mistake("wt_lines", "a write-through cache forwards each store's own bytes, not "
                        "a whole line per store.", value=_wt_lines),
                Mistake("swapped", "the two policies are swapped: write-through forwards every "
                        "store at once, write-back only dirty lines at the end.",
                        value=_swapped),
            ),
        ),
    ),
)
