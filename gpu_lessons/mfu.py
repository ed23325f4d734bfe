"""MFU (Model FLOPs Utilization) and HFU from a measured throughput.

MFU is **Model** FLOPs Utilization, not "Maximum FLOPs Utilization" (docs/misconceptions.md,
M27):

    MFU = (model FLOPs per token x tokens per second) / (number of GPUs x dense peak FLOP/s)

where "model FLOPs" are the matmul FLOPs the model needs for one training step, forward and
backward, whatever the implementation does (PaLM, Chowdhery et al. 2022, arXiv 2204.02311,
App. B).  HFU (Hardware FLOPs Utilization) also counts FLOPs that an implementation adds,
chiefly re-running the forward pass to rematerialise activations.  PaLM 540B: MFU 46.2 %,
HFU 57.8 %.

The FLOP counts themselves are :mod:`gpu_lessons.transformer`'s; they are importable from here
too (``from gpu_lessons.mfu import transformer_flops``), since this is the lesson's module.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _validate, hardware
from ._format import Readout, Row
from .hardware import GPU
from .transformer import (
    COMPONENT_LABELS,
    COMPONENTS,
    FORMULAS,
    PRESETS,
    EstimateComparison,
    ParameterCount,
    Preset,
    TransformerFlops,
    attention_flops,
    attention_multiply_adds,
    compare_estimates,
    megatron_layer_forward_flops,
    megatron_training_flops,
    mlp_flops,
    mlp_flops_doubled,
    palm_flops_per_token,
    parameter_count,
    six_n_flops_per_token,
    training_flops,
    transformer_flops,
    twice_forward_flops,
)

#: Precisions an MFU can be quoted against: tensor-core peaks, plus the plain FP32 (CUDA-core)
#: peak.  Always dense: the catalog refuses sparse (2:4) peaks.
MFU_PRECISIONS = ("bf16", "fp16", "tf32", "fp32", "fp8")

# -- MFU and HFU ----------------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class Utilization(Readout):
    """Achieved FLOP/s against the dense peak of ``n_gpus`` GPUs: MFU and HFU."""

    gpu: str
    precision: str
    accumulate: str
    n_gpus: int
    peak_flops_per_gpu: float
    model_flops_per_s: float
    hardware_flops_per_s: float
    tokens_per_s: float | None = None

    @property
    def peak_flops(self) -> float:
        """Dense peak of all GPUs together, FLOP/s."""
        return self.n_gpus * self.peak_flops_per_gpu

    @property
    def mfu(self) -> float:
        """Model FLOPs Utilization, 0..1 (above 1 means the peak or the FLOP count is wrong)."""
        return self.model_flops_per_s / self.peak_flops

    @property
    def hfu(self) -> float:
        """Hardware FLOPs Utilization: also counts recomputed FLOPs."""
        return self.hardware_flops_per_s / self.peak_flops

    @property
    def achieved_flops_per_gpu(self) -> float:
        """Model FLOP/s per GPU."""
        return self.model_flops_per_s / self.n_gpus

    def readout_title(self) -> str:
        return "MFU"

    def readout_rows(self) -> tuple[Row, ...]:
        acc = "FP16" if self.accumulate == "fp16" else "FP32"
        rows = [Row("GPUs", f"{self.n_gpus} × {self.gpu}"),
                Row("precision", f"{self.precision} dense, {acc} accumulate"),
                Row("peak per GPU", self.peak_flops_per_gpu, "FLOP/s"),
                Row("peak of all GPUs", self.peak_flops, "FLOP/s")]
        if self.tokens_per_s is not None:
            rows.append(Row("throughput (tokens/s)", self.tokens_per_s))
        rows += [Row("model FLOP/s achieved", self.model_flops_per_s, "FLOP/s"),
                 Row("per GPU", self.achieved_flops_per_gpu, "FLOP/s"),
                 Row("MFU", self.mfu, "%"),
                 Row("hardware FLOP/s (with recomputation)", self.hardware_flops_per_s, "FLOP/s"),
                 Row("HFU", self.hfu, "%")]
        if self.mfu > 1:
            rows.append(Row("check", "above 100 % is impossible: check the peak (sparse, wrong "
                                     "precision or accumulate type, wrong GPU count) or the "
                                     "FLOP count"))
        return tuple(rows)


def _peak(gpu_, precision, accumulate) -> tuple[GPU, float]:
    g = hardware.gpu(gpu_)
    _validate.choice("precision", precision, MFU_PRECISIONS)
    _validate.choice("accumulate", accumulate, ("fp32", "fp16"))
    if accumulate == "fp16" and precision != "fp16":
        raise ValueError(f"accumulate='fp16' only exists for precision='fp16', got "
                         f"precision={precision!r}; use accumulate='fp32'")
    return g, g.peak_flops(precision, accumulate=accumulate)


def utilization(model_flops_per_s, *, gpu, precision="bf16", accumulate="fp32", n_gpus=1,
                hardware_flops_per_s=None, tokens_per_s=None) -> Utilization:
    """MFU = achieved model FLOP/s / (n_gpus x dense peak of ``gpu`` at ``precision``).

    ``gpu`` is a catalog name or a :class:`~gpu_lessons.hardware.GPU`; the peak is dense
    (sparse peaks are refused by the catalog).  ``accumulate="fp16"`` selects the FP16-accumulate
    peak where a GPU has a faster one (GeForce); training accumulates in FP32 (M18).
    """
    achieved = _validate.real("model_flops_per_s", model_flops_per_s, low=0)
    n = _validate.integer("n_gpus", n_gpus, low=1)
    hw = achieved if hardware_flops_per_s is None else _validate.real(
        "hardware_flops_per_s", hardware_flops_per_s, low=achieved)
    if tokens_per_s is not None:
        tokens_per_s = _validate.real("tokens_per_s", tokens_per_s, low=0)
    g, peak = _peak(gpu, precision, accumulate)
    return Utilization(gpu=g.name, precision=precision, accumulate=accumulate, n_gpus=n,
                       peak_flops_per_gpu=peak, model_flops_per_s=achieved,
                       hardware_flops_per_s=hw, tokens_per_s=tokens_per_s)


def achieved_flops(flops_per_token, *, tokens_per_s=None, steps_per_s=None,
                   tokens_per_step=None) -> float:
    """FLOP/s = FLOPs per token x tokens per second (tokens/s = steps/s x tokens per step).

    A common slip forgets the tokens per sequence (docs/misconceptions.md, M32): 1000 sequences/s x 1024
    tokens x 10 GFLOP/token = 10.24 PFLOP/s, not 10 TFLOP/s.
    """
    per_token = _validate.real("flops_per_token", flops_per_token, low=0)
    return per_token * _tokens_per_s(tokens_per_s, steps_per_s, tokens_per_step)


def _tokens_per_s(tokens_per_s, steps_per_s, tokens_per_step) -> float:
    if (tokens_per_s is None) == (steps_per_s is None):
        raise ValueError("give exactly one of tokens_per_s or steps_per_s (with tokens_per_step)"
                         f"; got tokens_per_s={tokens_per_s!r}, steps_per_s={steps_per_s!r}")
    if tokens_per_s is not None:
        if tokens_per_step is not None:
            raise ValueError("tokens_per_step goes with steps_per_s, not with tokens_per_s")
        return _validate.real("tokens_per_s", tokens_per_s, low=0)
    if tokens_per_step is None:
        raise ValueError("steps_per_s needs tokens_per_step (global batch x seq_len)")
    return (_validate.real("steps_per_s", steps_per_s, low=0)
            * _validate.integer("tokens_per_step", tokens_per_step, low=1))


def mfu(flops, *, gpu, tokens_per_s=None, steps_per_s=None, tokens_per_step=None,
        precision="bf16", accumulate="fp32", n_gpus=1, recompute=False) -> Utilization:
    """MFU and HFU of a training run from its measured throughput (PaLM App. B).

    ``flops``: a :class:`TransformerFlops` (its exact training count; with ``steps_per_s``,
    tokens per step default to its batch x seq_len, the global batch) or a number, the model's
    training FLOPs per token (e.g. from :func:`palm_flops_per_token`).  Throughput is for the
    whole job: ``tokens_per_s``, or ``steps_per_s`` and ``tokens_per_step``.  ``recompute``:
    the run used full activation recomputation, so hardware FLOPs add a forward of every layer
    (for a plain number: a third of the training FLOPs, i.e. one whole forward).

    MFU = tokens/s x model FLOPs per token / (n_gpus x peak); HFU the same with hardware FLOPs.
    """
    recompute = _validate.flag("recompute", recompute)
    if isinstance(flops, TransformerFlops):
        if steps_per_s is not None and tokens_per_step is None:
            tokens_per_step = flops.tokens
        model = flops.training_per_token
        hw = (flops.training_recompute if recompute else flops.training) / flops.tokens
    elif isinstance(flops, bool) or not isinstance(flops, (int, float)):
        raise TypeError("flops must be a TransformerFlops or the training FLOPs per token "
                        f"(a number), got {flops!r} ({type(flops).__name__})")
    else:
        model = _validate.real("flops", flops, low=0, low_open=True)
        hw = model * 4 / 3 if recompute else model
    rate = _tokens_per_s(tokens_per_s, steps_per_s, tokens_per_step)
    return utilization(model * rate, gpu=gpu, precision=precision, accumulate=accumulate,
                       n_gpus=n_gpus, hardware_flops_per_s=hw * rate, tokens_per_s=rate)


# -- two worked examples as often quoted, and their corrections ------------------------------------

def sequence_rate_times_token_flops(sequences_per_s, flops_per_token) -> float:
    """Sequences/s x FLOPs per token: the FLOP rate if every sequence were one token long (the
    slip of M32 in docs/misconceptions.md); :func:`achieved_flops` is the correct one."""
    return (_validate.real("sequences_per_s", sequences_per_s, low=0)
            * _validate.real("flops_per_token", flops_per_token, low=0))


#: A throughput example as often quoted: 1000 sequences/s of 1024 tokens, 10 GFLOP per token
#: for forward + backward, "10 TFLOP/s"; it is 10.24 PFLOP/s (docs/misconceptions.md, M32).
THROUGHPUT_EXAMPLE = {"sequences_per_s": 1000, "tokens_per_sequence": 1024,
                           "flops_per_token": 10e9,
                           "source": "docs/misconceptions.md, M32"}

#: An MFU example as often worked: 4 x RTX 4090 train a 350M model at 0.1 TFLOP per step,
#: 50 steps/s, divided by 330 TFLOP/s per GPU, the FP16-accumulate peak; mixed-precision training
#: accumulates in FP32, where GeForce Ada gives 165.2 (Ada whitepaper v2.02, App. A), so the
#: MFU doubles (docs/misconceptions.md, M18).
RTX4090_MFU_EXAMPLE = {"gpu": "RTX 4090", "n_gpus": 4, "flops_per_step": 0.1e12,
                    "steps_per_s": 50, "precision": "fp16",
                    "source": "docs/misconceptions.md, M18"}


def rtx4090_mfu_example(accumulate="fp16") -> Utilization:
    """The RTX 4090 example against the catalog peak: ``accumulate="fp16"`` is what the
    seed used (330.3 TFLOP/s, MFU 0.38 %), ``"fp32"`` the right peak for training (165.2,
    0.76 %)."""
    ex = RTX4090_MFU_EXAMPLE
    return utilization(ex["flops_per_step"] * ex["steps_per_s"], gpu=ex["gpu"],
                       precision=ex["precision"], accumulate=accumulate, n_gpus=ex["n_gpus"])


# -- published utilisation figures ----------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class ReferenceRun(Readout):
    """A published training run's utilisation, for comparison in the lessons."""

    name: str
    hardware: str
    mfu: float | None
    hfu: float | None
    source: str
    note: str = ""

    def readout_title(self) -> str:
        return f"{self.name} on {self.hardware}"

    def readout_rows(self) -> tuple[Row, ...]:
        return tuple(Row(label, v, "%") for label, v in (("MFU", self.mfu), ("HFU", self.hfu))
                     if v is not None)


REFERENCE_RUNS = (
    ReferenceRun("PaLM 540B", "6144 TPU v4", mfu=0.462, hfu=0.578,
                 source="Chowdhery et al. 2022, PaLM, arXiv 2204.02311, Table 3 and App. B",
                 note="238.3K tokens/s; 45.7 % MFU if the attention term is left out (6N only)"),
    ReferenceRun("GPT-style training with FlashAttention-2", "A100", mfu=0.72, hfu=None,
                 source="Dao 2023, FlashAttention-2, arXiv 2307.08691",
                 note="up to 225 of 312 TFLOP/s per A100, end to end"),
    ReferenceRun("Megatron-LM 1T-parameter GPT", "3072 A100", mfu=None, hfu=0.52,
                 source="Narayanan et al. 2021, arXiv 2104.04473, Table 1",
                 note="163 TFLOP/s per GPU = 52 % of 312; their FLOP count (eq. 3) includes "
                      "activation recomputation, so it is a hardware-FLOPs figure"),
)

__all__ = [
    "COMPONENTS",
    "COMPONENT_LABELS",
    "FORMULAS",
    "MFU_PRECISIONS",
    "PRESETS",
    "REFERENCE_RUNS",
    "RTX4090_MFU_EXAMPLE",
    "THROUGHPUT_EXAMPLE",
    "EstimateComparison",
    "ParameterCount",
    "Preset",
    "ReferenceRun",
    "TransformerFlops",
    "Utilization",
    "achieved_flops",
    "attention_flops",
    "attention_multiply_adds",
    "compare_estimates",
    "megatron_layer_forward_flops",
    "megatron_training_flops",
    "mfu",
    "mlp_flops",
    "mlp_flops_doubled",
    "palm_flops_per_token",
    "parameter_count",
    "rtx4090_mfu_example",
    "sequence_rate_times_token_flops",
    "six_n_flops_per_token",
    "training_flops",
    "transformer_flops",
    "twice_forward_flops",
    "utilization",
]
