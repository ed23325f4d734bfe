"""Chapter 03 (memory hierarchy) exercise questions.

References come from the memory ladder (:mod:`gpu_lessons.ladder`: register file and
shared-memory sizes and bandwidths from the CUDA C++ Programming Guide's compute-capability
tables and the catalog) and the cache simulator (:mod:`gpu_lessons.cache`: write-back and
write-through traffic, Hennessy & Patterson, *Computer Architecture* 6th ed., App. B.1),
imported inside each function.
"""

from __future__ import annotations

from functools import lru_cache

from .types import Choice, Function, Mistake, Number, Question

_MIB = 2**20


# -- the register file ------------------------------------------------------------------------------

def _registers_total_mib(name: str = "h100") -> float:
    """Whole-GPU register file: 65,536 32-bit registers per SM x 4 B x SMs, in MiB.

    H100 SXM5: 65,536 x 4 B = 256 KiB per SM, x 132 SMs = 33 MiB.
    """
    from ..ladder import memory_ladder

    return memory_ladder(name).level("registers").total_bytes / _MIB


def _registers_per_sm_mib(_ref: float) -> float:
    from ..ladder import memory_ladder

    return memory_ladder("h100").level("registers").per_sm_bytes / _MIB


def _l2_mib(_ref: float) -> float:
    from ..hardware import gpu

    return gpu("h100").l2_bytes / _MIB


# -- shared-memory bandwidth ------------------------------------------------------------------------

def _shared_tbs(clock_mhz: float | None = None) -> float:
    """Aggregate shared-memory bandwidth of an H100 SXM5 in TB/s:
    32 banks x 4 B per clock per SM x 132 SMs x 1980 MHz (Programming Guide, "Shared Memory";
    H100 whitepaper v1.04 for the SM count and boost clock)."""
    from ..hardware import gpu
    from ..ladder import shared_bandwidth

    g = gpu("h100")
    return shared_bandwidth(g.sms, (clock_mhz or g.boost_mhz) * 1e6) / 1e12


def _shared_tensor_clock(_ref: float) -> float:
    from ..hardware import gpu

    return _shared_tbs(gpu("h100").tensor_boost_mhz)


def _shared_one_byte(_ref: float) -> float:
    """One byte per bank per clock instead of one 4-byte word."""
    from ..hardware import gpu
    from ..ladder import BANK_BYTES, shared_bandwidth

    g = gpu("h100")
    return shared_bandwidth(g.sms, g.boost_mhz * 1e6) / BANK_BYTES / 1e12


def _hbm_tbs(_ref: float) -> float:
    from ..hardware import gpu

    return gpu("h100").bandwidth / 1e12


# -- which memory for which data -------------------------------------------------------------------

_LEVELS = ("registers", "L1 / shared", "constant cache", "L2", "DRAM")


def _block_scratch() -> str:
    """The nearest ladder level whose scope is one block: shared memory (CUDA C++ Programming
    Guide, "Shared Memory": visible to all threads of a block, on chip)."""
    from ..ladder import memory_ladder

    return next(lv.name for lv in memory_ladder("h100").levels if "one block" in lv.scope)


# -- where local memory lives (erratum E8) -----------------------------------------------------------


def _local_memory_home() -> str:
    """The ladder level that is local memory's home: the farthest level holding "local" data.

    L1 and L2 cache local data on its way; its home is device memory (CUDA C++ Programming
    Guide, "Device Memory Accesses": local memory resides in device memory).
    """
    from ..ladder import memory_ladder

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
    import numpy as np

    from ..cache import Cache

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
    return -(-n_elements * element_bytes // line_bytes)


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
        prompt="How large is the register file of a whole H100 SXM5, in MiB (2^20 bytes)? "
               "Every SM has 65,536 32-bit registers.",
        hint="Registers per SM x 4 bytes x number of SMs, then divide by 2^20.",
        answer=Number(
            reference=_registers_total_mib,
            units="MiB",
            rtol=0.01,
            mistakes=(
                Mistake("per_sm", "that is one SM's register file; the question asks for the "
                        "whole GPU.", value=_registers_per_sm_mib),
                Mistake("no_bytes", "that counts registers (in units of 2^20), not bytes: each "
                        "register holds 32 bits = 4 bytes.", value=lambda ref: ref / 4),
                Mistake("bits", "that is bits; the question asks for bytes (MiB).",
                        value=lambda ref: ref * 8),
                Mistake("mb", "that is in MB (10^6 bytes); the question asks for MiB (2^20 "
                        "bytes).", value=lambda ref: ref * _MIB / 1e6),
                Mistake("pcie", "114 SMs is the H100 PCIe; the SXM5 has more.",
                        value=lambda ref: _registers_total_mib("h100 pcie")),
                Mistake("l2", "that is the L2 cache; the question asks for the registers.",
                        value=_l2_mib),
            ),
        ),
    ),
    Question(
        id="03.shared_bandwidth",
        name="shared_bandwidth_tbs",
        points=2,
        prompt="Shared memory has 32 banks per SM, each delivering one 4-byte word per clock. "
               "What is the aggregate shared-memory bandwidth of an H100 SXM5 (132 SMs, "
               "1980 MHz boost clock), in TB/s?",
        hint="Bytes per clock per SM x SMs x clock in Hz; 1 TB/s = 10^12 bytes/s.",
        answer=Number(
            reference=_shared_tbs,
            units="TB/s",
            rtol=0.01,
            mistakes=(
                Mistake("tensor_clock", "1830 MHz is the clock NVIDIA quotes for tensor-core "
                        "peaks; the SM boost clock is 1980 MHz.", value=_shared_tensor_clock),
                Mistake("one_byte", "each bank delivers a 4-byte word per clock, not a byte.",
                        value=_shared_one_byte),
                Mistake("bits", "that is in bits per second; the question asks for bytes.",
                        value=lambda ref: ref * 8),
                Mistake("per_sm", "that is one SM; the question asks for the whole GPU.",
                        value=lambda ref: ref / 132),
                Mistake("hbm", "that is the HBM3 bandwidth from the datasheet; the question "
                        "asks for shared memory.", value=_hbm_tbs),
            ),
        ),
    ),
    Question(
        id="03.block_scratch",
        name="block_scratch",
        points=1,
        prompt="Each thread of a 256-thread block computes a partial sum; then the threads of "
               "that block (and only they) combine all 256 partial sums. On which level of the "
               "memory ladder should the partial sums be kept?",
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
        prompt="A kernel declares `float buf[64];` in each thread and indexes it with a value "
               "known only at run time, so the compiler puts it in local memory. On which level "
               "of the memory ladder do those bytes live (their home, not a cached copy)?",
        answer=Choice(
            reference=_local_memory_home,
            options=_LEVELS,
            mistakes=(
                Mistake("registers", "registers cannot be indexed at run time; that is why the "
                        "compiler moved buf out of them.", value="registers"),
                Mistake("per_sm_region", "L1 may cache local data, but local memory is not a "
                        "region of an SM (a common misreading): it is per-thread storage whose "
                        "home is further down the ladder.", value="L1 / shared"),
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
        prompt="Write write_traffic(n_elements, passes, element_bytes, line_bytes, policy): a "
               "loop stores to every element of an array of n_elements (starting at address 0), "
               "`passes` times over; then the cache is flushed. The cache is much larger than "
               "the array, allocates a line on a store miss, and policy is 'write-back' or "
               "'write-through'. Return the bytes it sends to the next level.",
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
