"""Chapter 02 (threads, warps and SMs) exercise questions.

References come from the GPU catalog (:mod:`gpu_lessons.hardware`), the compute-capability
table (:mod:`gpu_lessons.occupancy`) and the SIMT simulator (:mod:`gpu_lessons.simt`,
:mod:`gpu_lessons.simt_kernels`), each imported inside the function that needs it.

SIMT efficiency = sum of active lanes over issued warp instructions / (32 x instructions),
Nsight Compute's "Avg. Active Threads Per Warp" / 32 (CUDA C++ Programming Guide, "SIMT
Architecture": divergent paths of a warp run one after the other, a path no lane takes is
skipped).
"""

from __future__ import annotations

from functools import lru_cache

from .types import Choice, Function, Mistake, Number, Question

# -- CUDA cores of the H100 PCIe (erratum E11) -----------------------------------------------------

def _cores(name: str) -> int:
    """SMs x FP32 lanes per SM, from the catalog (H100 whitepaper v1.04, Table 3)."""
    from ..hardware import gpu

    return gpu(name).fp32_cores


def _cores_pcie() -> int:
    return _cores("h100 pcie")


def _pcie_sms_times(per_sm: int) -> int:
    from ..hardware import gpu

    return gpu("h100 pcie").sms * per_sm


# -- resident threads -------------------------------------------------------------------------------

def _resident_threads(name: str = "h100") -> int:
    """Threads an H100 SXM5 keeps resident: max warps per SM (CC 9.0: 64) x 32 x 132 SMs."""
    from ..hardware import gpu
    from ..occupancy import compute_capability

    g = gpu(name)
    return compute_capability(g.cc).max_warps_per_sm * 32 * g.sms


def _threads_per_block_times_sms(_ref: float) -> int:
    """The 1,024-thread block limit mistaken for the per-SM limit."""
    from ..hardware import gpu
    from ..occupancy import compute_capability

    return compute_capability("9.0").max_threads_per_block * gpu("h100").sms


# -- SIMT efficiency of the parity branch -------------------------------------------------------

def _parity_efficiency() -> float:
    """``branch_by_parity`` with 4 multiply-adds per path, from the SIMT simulator.

    By hand, per warp: 7 instructions with 32 lanes (index, bounds test, return, load, % 2,
    == 0, branch), then each path (2 x 4 ALU + 1 store = 9) with 16 lanes:
    (7·32 + 2·9·16) / ((7 + 2·9)·32) = 512 / 800 = 0.64.
    """
    from ..simt_kernels import simulate

    return simulate("branch_by_parity", iters=4).sim.simt_efficiency


def _parity_branch_only(_ref: float) -> float:
    """Efficiency inside the branch alone (the 7 uniform instructions left out)."""
    from ..simt_kernels import simulate

    return simulate("branch_by_parity", iters=4).sim.stats(region="parity").simt_efficiency


def _parity_one_path(_ref: float) -> float:
    """As if only one 16-lane path were issued: the paths' serialisation forgotten.

    Uses the simulator's counts: total lanes and instructions minus one path's share.
    """
    from ..simt_kernels import simulate

    sim = simulate("branch_by_parity", iters=4).sim
    whole, branch = sim.totals, sim.stats(region="parity")
    lanes = whole.active_lanes - branch.active_lanes / 2
    return lanes / (32 * (whole.instructions - branch.instructions / 2))


def _by_warp_efficiency(_ref: float) -> float:
    from ..simt_kernels import simulate

    return simulate("branch_by_warp", iters=4).sim.simt_efficiency


# -- SIMT efficiency as a function --------------------------------------------------------------

def _two_paths(t, common, if_len, else_len, lanes_if):
    """One warp: ``common`` instructions with every lane (the branch test among them), then an
    if path of ``if_len`` ALU instructions for lanes < ``lanes_if`` and an else path of
    ``else_len`` for the rest."""
    take = t.thread_idx.x < lanes_if      # 1 instruction
    acc = t.local(0.0)                    # 1 instruction
    for _ in range(common - 3):           # the branch test below is the last common one
        acc[...] = acc + 1.0
    with t.if_(take, "paths"):
        for _ in range(if_len):
            acc[...] = acc + 1.0
    with t.else_():
        for _ in range(else_len):
            acc[...] = acc * 2.0


@lru_cache(maxsize=8192)  # a simulator run per input; every check re-asks the same inputs
def _simt_efficiency_reference(common, if_len, else_len, lanes_if):
    """Run the warp in the SIMT simulator and return its SIMT efficiency."""
    from ..simt import run

    return run(_two_paths, 1, 32, common, if_len, else_len, lanes_if).simt_efficiency


def _simt_efficiency_inputs(rng) -> dict:
    lanes = int(rng.choice([0, 32, int(rng.integers(1, 32))], p=[0.1, 0.1, 0.8]))
    return {"common": int(rng.integers(3, 41)), "if_len": int(rng.integers(0, 41)),
            "else_len": int(rng.integers(0, 41)), "lanes_if": lanes}


def _simt_efficiency_edges() -> list[dict]:
    """Uniform warps both ways, the parity split, a single lane, empty paths."""
    return [{"common": 7, "if_len": 9, "else_len": 9, "lanes_if": 16},
            {"common": 5, "if_len": 10, "else_len": 20, "lanes_if": 32},
            {"common": 5, "if_len": 10, "else_len": 20, "lanes_if": 0},
            {"common": 3, "if_len": 12, "else_len": 0, "lanes_if": 1},
            {"common": 4, "if_len": 0, "else_len": 0, "lanes_if": 16}]


def _ignore_skip(e, common, if_len, else_len, lanes_if):
    """A path no lane takes still counted as issued (with no active lanes)."""
    active = 32 * common + lanes_if * if_len + (32 - lanes_if) * else_len
    return active / (32 * (common + if_len + else_len))


def _branch_only(e, common, if_len, else_len, lanes_if):
    """Efficiency of the two paths alone, the common instructions left out."""
    issued = (if_len if lanes_if else 0) + (else_len if lanes_if < 32 else 0)
    active = lanes_if * if_len + (32 - lanes_if) * else_len
    return active / (32 * issued)


def _no_serialise(e, common, if_len, else_len, lanes_if):
    """Paths counted as if they ran at the same time: max(if_len, else_len) issue slots."""
    active = 32 * common + lanes_if * if_len + (32 - lanes_if) * else_len
    return active / (32 * (common + max(if_len, else_len)))


# -- branch granularity -----------------------------------------------------------------------------

#: 02.branch_choice's options: the branch conditions, on the thread index in a 256-thread block.
_CONDITIONS = {
    "A": lambda tid: tid % 2 == 0,
    "B": lambda tid: tid % 32 < 16,
    "C": lambda tid: tid // 32 % 2 == 0,
    "D": lambda tid: (tid + 16) // 32 % 2 == 0,
}


def _branch_efficiency(option: str) -> float:
    """SIMT efficiency inside a branch on condition ``option`` (equal 4-instruction paths),
    one 256-thread block in the SIMT simulator."""
    import numpy as np

    from ..simt import run

    cond = _CONDITIONS[option]

    def kernel(t, out):
        i = t.thread_idx.x
        v = t.local(0.0)
        with t.if_(cond(i), "choice"):
            for _ in range(4):
                v[...] = v * 1.5 + 1.0
        with t.else_():
            for _ in range(4):
                v[...] = v * 0.5 - 1.0
        out[i] = v

    return run(kernel, 1, 256, np.zeros(256, np.float32)).stats(region="choice").simt_efficiency


def _branch_choice() -> str:
    """The condition with the highest SIMT efficiency inside the branch (the first on a tie)."""
    scores = {k: _branch_efficiency(k) for k in _CONDITIONS}
    return max(scores, key=scores.get)


QUESTIONS = (
    Question(
        id="02.cuda_cores_pcie",
        name="cuda_cores_pcie",
        points=1,
        prompt="How many FP32 CUDA cores (FP32 lanes) does an H100 PCIe card have?",
        hint="CUDA cores = SMs x FP32 lanes per SM; the PCIe card enables fewer SMs than the "
             "SXM5 module (H100 whitepaper, Table 3).",
        answer=Number(
            reference=_cores_pcie,
            units="CUDA cores",
            rtol=0.001,
            mistakes=(
                Mistake("sxm5", "that is the H100 **SXM5** (132 SMs). The PCIe card uses the "
                        "same chip with fewer SMs enabled.", value=lambda ref: _cores("h100")),
                Mistake("ampere_lanes", "Hopper SMs have 128 FP32 lanes, not the 64 of an A100 "
                        "or V100 SM.", value=lambda ref: _pcie_sms_times(64)),
                Mistake("sms_only", "that is the number of SMs; each SM has many FP32 lanes.",
                        value=lambda ref: _pcie_sms_times(1)),
            ),
        ),
    ),
    Question(
        id="02.resident_threads",
        name="resident_threads",
        points=1,
        prompt="At most how many threads can be resident (held on the SMs at the same time) on "
               "a whole H100 SXM5?",
        hint="Compute capability 9.0 sets how many warps one SM holds; a warp is 32 threads.",
        answer=Number(
            reference=_resident_threads,
            units="threads",
            rtol=0.001,
            mistakes=(
                Mistake("block_limit", "1,024 is the most threads in one *block*; an SM holds "
                        "several blocks at once.", value=_threads_per_block_times_sms),
                Mistake("cores", "that is the number of CUDA cores. An SM keeps many more "
                        "threads resident than it has lanes, so it can switch to another warp "
                        "when one waits.", value=lambda ref: _cores("h100")),
                Mistake("warps", "that counts warps; a warp is 32 threads.",
                        value=lambda ref: ref / 32),
                Mistake("per_sm", "that is one SM; the question asks for the whole GPU.",
                        value=lambda ref: ref / 132),
                Mistake("pcie", "114 SMs is the H100 PCIe; the SXM5 has more.",
                        value=lambda ref: _resident_threads("h100 pcie")),
            ),
        ),
    ),
    Question(
        id="02.parity_efficiency",
        name="parity_efficiency",
        points=2,
        prompt="branch_by_parity with iters=4: per warp, 7 instructions run with all 32 lanes "
               "(index, bounds test, return, load, % 2, == 0, branch test); each path is 2 x 4 "
               "ALU instructions + 1 store, run by the 16 lanes that take it. What is its SIMT "
               "efficiency, as a fraction between 0 and 1?",
        hint="SIMT efficiency = total active lanes over all issued instructions / "
             "(32 x instructions issued); both paths are issued, one after the other.",
        answer=Number(
            reference=_parity_efficiency,
            units="(fraction, 0 to 1)",
            rtol=0.005,
            mistakes=(
                Mistake("percent", "give a fraction between 0 and 1, not a percentage.",
                        value=lambda ref: ref * 100),
                Mistake("branch_only", "that is the efficiency inside the branch alone; the 7 "
                        "instructions before it run with every lane and count too.",
                        value=_parity_branch_only),
                Mistake("one_path", "a divergent warp issues *both* paths, one after the "
                        "other: count each path's instructions.", value=_parity_one_path),
                Mistake("no_divergence", "that would be a branch every warp takes whole (as "
                        "branch_by_warp does); here each warp splits by lane parity.",
                        value=_by_warp_efficiency),
            ),
        ),
    ),
    Question(
        id="02.simt_efficiency",
        name="simt_efficiency",
        points=2,
        prompt="Write simt_efficiency(common, if_len, else_len, lanes_if): a warp issues "
               "`common` instructions with all 32 lanes, then an if path of `if_len` "
               "instructions run by `lanes_if` lanes, then an else path of `else_len` "
               "instructions run by the other 32 - lanes_if lanes. A path that no lane takes is "
               "skipped. Return the SIMT efficiency (a fraction, 0 to 1).",
        answer=Function(
            reference=_simt_efficiency_reference,
            inputs=_simt_efficiency_inputs,
            edge_cases=_simt_efficiency_edges,
            signature="simt_efficiency(common, if_len, else_len, lanes_if)",
            units="fraction of lanes busy",
            rtol=1e-9,
            mistakes=(
                Mistake("skipped_path", "a path that no lane takes is jumped over: it issues "
                        "no instructions, so it must not count.", value=_ignore_skip),
                Mistake("branch_only", "the `common` instructions run with all 32 lanes and "
                        "count too.", value=_branch_only),
                Mistake("parallel_paths", "the two paths of a divergent warp run one after "
                        "the other, not side by side: both add issue slots.",
                        value=_no_serialise),
                Mistake("percent", "return a fraction between 0 and 1, not a percentage.",
                        value=lambda e, **kw: e * 100),
                Mistake("always_one", "a divergent warp leaves lanes idle: the masked-off lanes "
                        "of each path do no work.", value=lambda e, **kw: 1.0),
            ),
        ),
    ),
    Question(
        id="02.branch_choice",
        name="branch_choice",
        points=1,
        prompt="In 256-thread blocks, half the threads must take path X and half path Y; which "
               "half is up to you. Which condition on tid = threadIdx.x gives the highest SIMT "
               "efficiency? A: tid % 2 == 0;  B: tid % 32 < 16;  C: (tid / 32) % 2 == 0;  "
               "D: ((tid + 16) / 32) % 2 == 0  (integer division).",
        answer=Choice(
            reference=_branch_choice,
            options=("A", "B", "C", "D"),
            mistakes=(
                Mistake("parity", "tid % 2 splits every warp into its even and odd lanes: "
                        "each warp runs both paths at half width.", value="A"),
                Mistake("half_warp", "tid % 32 < 16 still splits every warp (lanes 0-15 and "
                        "16-31). Contiguous lanes do not help; what matters is whether all 32 "
                        "lanes of a warp agree.", value="B"),
                Mistake("offset", "adding 16 moves every switch between X and Y to lane 16 of "
                        "a warp: the groups are warp-sized but straddle two warps, so every "
                        "warp still splits.", value="D"),
            ),
        ),
    ),
)
