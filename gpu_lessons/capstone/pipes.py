"""How busy a kernel keeps the SM: its instruction mix against the throughput of each pipe.

Nsight Compute's "SM throughput" (Speed Of Light section) is not FLOP/s over the FLOP peak: it
is the busiest of the SM's pipes and its instruction issue.  A kernel of FADDs, of integer
index arithmetic or of constant loads can saturate the SM at a small fraction of the FLOP
peak.  This module models that number from the kernel's **instruction mix** — the warp
instructions it executes on each pipe — and the throughput of each pipe per SM per clock,
read from ``data/compute_capabilities.toml`` (``[[pipes]]``: the CUDA C++ Programming Guide's
"Arithmetic Instructions" throughput table, results per clock cycle per multiprocessor).

For a kernel that runs ``t`` seconds on ``S`` SMs at clock ``f`` (``t·f`` cycles):

* pipe ``p`` (``fp32``: FADD, FMUL, FFMA; ``int``: integer and logic; ``lsu``: loads, stores,
  S2R, shuffles; ``constant``: LDC, which Nsight Compute counts on its ADU pipe; ``uniform``:
  ULDC and the other U* instructions; ``xu``: MUFU), with ``n_p`` warp instructions and ``r_p``
  results per clock per SM, needs ``32·n_p / (r_p·S)`` cycles on every SM
  (:data:`PIPE_OF_OPCODE` says which pipe each SASS opcode goes to);
* the tensor cores need ``tensor FLOPs / (FLOP per clock per SM · S)`` cycles (per GPU, from
  ``gpus.toml``: ``tensor_flops_per_clk_per_sm``);
* issue: four schedulers per SM, each issuing one warp instruction per clock, need
  ``Σ n_p / (4·S)`` cycles;
* each fraction is those cycles over ``t·f``; the **SM throughput** is the largest.

Checked on an H200 (``tests/data/h200_capstone_fir.json``): given the kernel's own duration
and SM clock as Nsight Compute measured them, the issue fraction of the capstone's four filter
kernels, from their SASS, is Nsight Compute's SM throughput to within 0.03 points (fir40_v1
19.64 %, v2 66.71 %, v3 80.52 % against 80.54 %, v4 85.96 % against 85.99 %).  Against a time
measured with CUDA events around one launch, which also counts the gap between the start event
and the kernel's start (17–29 µs in that run), the fractions come out lower: v4's 243.8 µs
gives 78.6 %.  For the float4 copy the model's busiest unit (issue, 9.0 %) is below Nsight
Compute's 9.9 %, a counter the model does not have.

What the model leaves out (so read its fractions as estimates, good to a few per cent when
one unit dominates):

* dual issue and pipe sharing: every warp instruction takes one issue slot, and each pipe is
  independent — in the hardware IMAD runs on the FMA pipe, FP16 and FP32 share it, and Nsight
  Compute splits FP32 into "fmaheavy" and "fmalite";
* stalls: dependency chains, memory waits and barriers lower how busy the pipes are; the model
  only counts the work, so it says how busy they *were* given the measured time, not why the
  time is what it is;
* Nsight Compute's exact metric definitions: ``sm__throughput`` is the maximum of many
  sub-metrics (register-file and shared-pipe counters among them), over *active* cycles of the
  busiest SMs; the model averages over all SMs and elapsed cycles at the GPU's boost clock, and
  ignores tail effects, divergence (an instruction with inactive lanes still takes its slot)
  and clock changes.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from .. import _validate
from .. import hardware as _hw
from .._format import Readout, Row
from .._format import percent as _pct

#: Threads per warp (every NVIDIA GPU so far).
WARP = 32

#: The pipes an :class:`InstructionMix` may name, with what runs there.
PIPES = {
    "fp32": "FP32 pipe (FADD, FMUL, FFMA)",
    "int": "integer pipe (IADD3, IMAD, LOP3, ISETP, SHF)",
    "lsu": "load/store unit (LDG, STG, LDS, STS, S2R)",
    "constant": "constant loads (LDC; Nsight Compute's ADU pipe)",
    "uniform": "uniform datapath (ULDC and other U* instructions)",
    "xu": "special-function unit (MUFU: exp2, rcp, sin)",
}
#: The pipe each SASS opcode (the mnemonic before its first ".") goes to, as this model counts
#: it; "other" takes an issue slot and no pipe the model limits.  HFMA2.MMA, which nvcc uses to
#: move an immediate into a register, runs on the FP32 (FMA) pipe; S2UR (a special register
#: into a uniform register) and every "U…" opcode are uniform.
PIPE_OF_OPCODE = {
    **dict.fromkeys(("FADD", "FMUL", "FFMA", "HFMA2", "HADD2", "HMUL2"), "fp32"),
    **dict.fromkeys(("IADD3", "IMAD", "ISETP", "SHF", "LEA", "LOP3", "MOV", "VIADD", "CS2R",
                     "IMNMX", "PRMT", "SEL", "FSETP", "FMNMX", "IABS", "POPC", "FLO"), "int"),
    **dict.fromkeys(("LDG", "STG", "LDS", "STS", "LD", "ST", "S2R", "SHFL", "ATOM", "ATOMS",
                     "ATOMG", "RED", "LDSM", "LDL", "STL"), "lsu"),
    "LDC": "constant",
    "S2UR": "uniform",
    **dict.fromkeys(("MUFU", "I2F", "F2I", "F2F", "FRND"), "xu"),
    **dict.fromkeys(("EXIT", "BRA", "BAR", "BSSY", "BSYNC", "WARPSYNC", "NOP", "RET", "CALL",
                     "YIELD", "BMOV"), "other"),
}

#: Short names for tables.
SHORT = {"fp32": "FP32", "int": "integer", "lsu": "load/store", "constant": "LDC",
         "uniform": "uniform", "xu": "SFU", "tensor": "tensor cores", "issue": "issue"}
LABELS = {**PIPES, "tensor": "tensor cores", "issue": "instruction issue"}


@dataclass(frozen=True)
class PipeRates:
    """Results per clock per SM of each pipe for one compute capability, and warp
    instructions issued per clock per SM (``data/compute_capabilities.toml``, ``[[pipes]]``)."""

    cc: str
    fp32: int
    int: int
    xu: int
    lsu: int
    constant: int
    uniform: int
    issue: int
    source: str = field(repr=False, compare=False)

    def rate(self, pipe: str) -> int:
        return getattr(self, pipe)


@cache
def _rates() -> dict[str, PipeRates]:
    text = resources.files("gpu_lessons").joinpath("data/compute_capabilities.toml")
    return {row["cc"]: PipeRates(**row) for row in tomllib.loads(text.read_text("utf-8"))["pipes"]}


def pipe_rates(cc: str) -> PipeRates:
    """The pipe throughputs of compute capability ``cc`` (``"9.0"``)."""
    return _rates()[_validate.choice("cc", cc, _rates())]


@dataclass(frozen=True)
class InstructionMix:
    """The warp instructions a whole kernel executes on each pipe, and its tensor-core FLOPs.

    ``counts``: ``{pipe: warp instructions}`` for pipes in :data:`PIPES`, plus ``"other"`` for
    instructions that take an issue slot but no pipe the model limits (branches, EXIT,
    barriers).  ``source`` says where the counts come from (a SASS listing, a model).
    Build it from a per-thread count with :meth:`per_thread`.
    """

    counts: tuple[tuple[str, float], ...]
    tensor_flops: float = 0.0
    source: str = ""

    def __post_init__(self):
        items = self.counts.items() if isinstance(self.counts, dict) else self.counts
        clean = []
        for pipe, n in items:
            _validate.choice("pipe", pipe, [*PIPES, "other"])
            clean.append((pipe, _validate.real(f"counts[{pipe!r}]", n, low=0.0)))
        object.__setattr__(self, "counts", tuple(clean))
        object.__setattr__(self, "tensor_flops",
                           _validate.real("tensor_flops", self.tensor_flops, low=0.0))

    @classmethod
    def per_thread(cls, threads: int, counts: dict, *, tensor_flops: float = 0.0,
                   source: str = "") -> InstructionMix:
        """``counts`` instructions per thread (as a SASS listing shows them, every lane
        active), for ``threads`` threads: warp instructions = counts × threads / 32."""
        threads = _validate.integer("threads", threads, low=1)
        return cls(tuple((p, n * threads / WARP) for p, n in counts.items()),
                   tensor_flops=tensor_flops, source=source)

    @classmethod
    def from_sass(cls, threads: int, opcodes: dict, *, source: str = "") -> InstructionMix:
        """The mix of ``threads`` threads that each execute ``opcodes`` (``{"FFMA": 160, …}``:
        SASS instructions per thread by opcode, as a listing of straight-line code counts them),
        each opcode put on its pipe by :data:`PIPE_OF_OPCODE` (every "U…" opcode: uniform)."""
        if not isinstance(opcodes, dict):
            raise TypeError(f"opcodes must be a dict of SASS opcode -> count, got {opcodes!r}")
        counts: dict[str, float] = {}
        for op, n in opcodes.items():
            pipe = "uniform" if str(op).startswith("U") else PIPE_OF_OPCODE.get(op)
            if pipe is None:
                raise ValueError(f"opcodes: {op!r} is not a SASS opcode this model places on a "
                                 f"pipe; known: U* and {', '.join(sorted(PIPE_OF_OPCODE))}")
            counts[pipe] = counts.get(pipe, 0) + _validate.real(f"opcodes[{op!r}]", n, low=0.0)
        return cls.per_thread(threads, counts, source=source)

    def warp_instructions(self, pipe: str) -> float:
        return sum(n for p, n in self.counts if p == pipe)

    @property
    def total(self) -> float:
        """Warp instructions issued, every pipe together."""
        return sum(n for _, n in self.counts)


@dataclass(frozen=True, repr=False)
class SMThroughput(Readout):
    """How busy each pipe and the issue slots were: cycles needed / cycles the kernel took.

    ``fractions``: ``(unit, fraction)`` for every pipe the mix uses, the tensor cores if it
    has tensor FLOPs, and ``"issue"``; :attr:`throughput` is the largest (Nsight Compute's
    "SM throughput", modelled).
    """

    gpu: str
    seconds: float
    clock_hz: float
    fractions: tuple[tuple[str, float], ...]
    source: str = ""

    @property
    def busiest(self) -> str:
        return max(self.fractions, key=lambda kv: kv[1])[0]

    @property
    def throughput(self) -> float:
        return dict(self.fractions)[self.busiest]

    def fraction(self, unit: str) -> float:
        return dict(self.fractions).get(unit, 0.0)

    def summary(self) -> str:
        """``"issue 85 %, FP32 71 %, uniform 9.9 %"``: every unit above 1 %, busiest first."""
        shown = sorted((kv for kv in self.fractions if kv[1] >= 0.01), key=lambda kv: -kv[1])
        return ", ".join(f"{SHORT[u]} {_pct(f)}" for u, f in shown)

    def readout_title(self) -> str:
        return f"SM throughput on {self.gpu} (cycles needed / cycles taken)"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("busiest", LABELS[self.busiest]),
                *(Row(LABELS[u], f, "%") for u, f in sorted(self.fractions, key=lambda kv: -kv[1])))


def sm_throughput(mix: InstructionMix, gpu, seconds: float, *,
                  clock_hz: float | None = None) -> SMThroughput:
    """The fraction of the kernel's ``seconds`` each pipe and the issue slots were busy on
    ``gpu`` (a catalog name or :class:`~gpu_lessons.hardware.GPU`), at ``clock_hz`` (the SM
    clock during the run, as Nsight Compute reports it; default: the GPU's boost clock); see
    the module docstring for the formula and what it leaves out."""
    if not isinstance(mix, InstructionMix):
        raise TypeError(f"mix must be an InstructionMix, got {mix!r}")
    g = _hw.gpu(gpu)
    seconds = _validate.positive("seconds", seconds)
    rates = pipe_rates(g.cc)
    clock = (g.boost_mhz * 1e6 if clock_hz is None
             else _validate.real("clock_hz", clock_hz, low=1e6, high=1e11))
    cycles = seconds * clock
    out = []
    for pipe in PIPES:
        n = mix.warp_instructions(pipe)
        if n == 0:
            continue
        if rates.rate(pipe) == 0:
            raise ValueError(f"the mix uses the {pipe} pipe, which compute capability "
                             f"{g.cc} ({g.name}) does not have")
        out.append((pipe, WARP * n / (rates.rate(pipe) * g.sms) / cycles))
    if mix.tensor_flops:
        per_clk = g.tensor_flops_per_clk_per_sm.get("fp16")
        if per_clk is None:
            raise ValueError(f"{g.name} has no tensor-core rate in the catalog "
                             "(tensor_flops_per_clk_per_sm), so tensor_flops cannot be placed")
        out.append(("tensor", mix.tensor_flops / (per_clk * g.sms) / cycles))
    out.append(("issue", mix.total / (rates.issue * g.sms) / cycles))
    return SMThroughput(g.name, seconds, clock, tuple(out), mix.source)


__all__ = ["LABELS", "PIPES", "PIPE_OF_OPCODE", "InstructionMix", "PipeRates", "SMThroughput", "pipe_rates",
           "sm_throughput"]
