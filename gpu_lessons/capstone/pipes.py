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
  S2R, shuffles; ``constant``: LDC; ``uniform``: ULDC and the other U* instructions; ``xu``:
  MUFU), with ``n_p`` warp instructions and ``r_p`` results per clock per SM, needs
  ``32·n_p / (r_p·S)`` cycles on every SM;
* the tensor cores need ``tensor FLOPs / (FLOP per clock per SM · S)`` cycles (per GPU, from
  ``gpus.toml``: ``tensor_flops_per_clk_per_sm``);
* issue: four schedulers per SM, each issuing one warp instruction per clock, need
  ``Σ n_p / (4·S)`` cycles;
* each fraction is those cycles over ``t·f``; the **SM throughput** is the largest.

What the model leaves out (so read its fractions as estimates, good to a few per cent when
one unit dominates, as for the capstone's filter against Nsight Compute):

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
from .._format import html_table
from .._format import percent as _pct

#: Threads per warp (every NVIDIA GPU so far).
WARP = 32

#: The pipes an :class:`InstructionMix` may name, with what runs there.
PIPES = {
    "fp32": "FP32 pipe (FADD, FMUL, FFMA)",
    "int": "integer pipe (IADD3, IMAD, LOP3, ISETP, SHF)",
    "lsu": "load/store unit (LDG, STG, LDS, STS, S2R)",
    "constant": "constant loads (LDC)",
    "uniform": "uniform datapath (ULDC and other U* instructions)",
    "xu": "special-function unit (MUFU: exp2, rcp, sin)",
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

    def warp_instructions(self, pipe: str) -> float:
        return sum(n for p, n in self.counts if p == pipe)

    @property
    def total(self) -> float:
        """Warp instructions issued, every pipe together."""
        return sum(n for _, n in self.counts)


@dataclass(frozen=True)
class SMThroughput:
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

    def __repr__(self) -> str:
        return (f"SMThroughput({self.gpu}: {_pct(self.throughput)}, busiest "
                f"{LABELS[self.busiest]}; {self.summary()})")

    def _repr_html_(self) -> str:
        rows = [(LABELS[u], _pct(f)) for u, f in sorted(self.fractions, key=lambda kv: -kv[1])]
        return html_table(f"SM throughput on {self.gpu}: busiest unit {_pct(self.throughput)}",
                          ("unit", "busy (cycles needed / cycles taken)"), rows)


def sm_throughput(mix: InstructionMix, gpu, seconds: float) -> SMThroughput:
    """The fraction of the kernel's ``seconds`` each pipe and the issue slots were busy on
    ``gpu`` (a catalog name or :class:`~gpu_lessons.hardware.GPU`); see the module docstring
    for the formula and what it leaves out."""
    if not isinstance(mix, InstructionMix):
        raise TypeError(f"mix must be an InstructionMix, got {mix!r}")
    g = _hw.gpu(gpu)
    seconds = _validate.positive("seconds", seconds)
    rates = pipe_rates(g.cc)
    clock = g.boost_mhz * 1e6
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


__all__ = ["LABELS", "PIPES", "InstructionMix", "PipeRates", "SMThroughput", "pipe_rates",
           "sm_throughput"]
