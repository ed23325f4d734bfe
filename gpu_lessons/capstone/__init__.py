"""The capstone (notebook 10): mystery kernels, the evidence about them, and the diagnosis.

Each :class:`MysteryKernel` is what a learner gets: a short CUDA snippet, the problem sizes, the
GPU, the time per run and **where that time comes from** — measured on an H200
(``docs/measured/h200.md``) or derived from a model, which the ``time_source`` field then says
in words.  :func:`evidence` gathers what the course's tools say about it; :func:`diagnose`
applies Nsight Compute's Speed Of Light rule (a unit at 60 % of its peak or more is the
bottleneck, everything below it means latency-bound) and re-diagnoses the fixed kernel.

The package, one job per module:

* :mod:`.pipes` — the SM-throughput model: a kernel's instruction mix against the throughput of
  each SM pipe and of instruction issue (what Nsight Compute calls "SM throughput");
* :mod:`.kernel` — the kernel card (:class:`MysteryKernel`, :class:`WarpAccess`,
  :class:`Launch`);
* :mod:`.mysteries` — the seven kernels of the lesson, one function each (:data:`MYSTERIES`);
* :mod:`.diagnosis` — :func:`evidence`, :func:`classify`, :func:`diagnose`, :func:`answer_key`;
* :mod:`.latency_model` — the latency model of lesson 06 for a kernel whose warps each load
  once, against its measured time (:func:`latency_prediction`);
* :mod:`.gemm_story` — the end-to-end "make a GEMM faster" example (:func:`gemm_story`);
* :mod:`.measured` — the H200 figures quoted, by name, from ``data/measured.toml``
  (:data:`H200_MEASURED`).
"""

from .diagnosis import (
    NEAR_ROOF,
    VERDICTS,
    WAVEFRONTS_PER_SM_PER_CYCLE,
    AnswerKey,
    Diagnosis,
    Evidence,
    answer_key,
    classify,
    diagnose,
    evidence,
)
from .gemm_story import Step, Story, gemm_story
from .kernel import Launch, MysteryKernel, WarpAccess
from .latency_model import LatencyPrediction, latency_prediction
from .measured import H200_MEASURED
from .mysteries import MYSTERIES, mystery, roofline_points
from .pipes import InstructionMix, SMThroughput, pipe_rates, sm_throughput

__all__ = [
    "H200_MEASURED", "MYSTERIES", "NEAR_ROOF", "VERDICTS", "WAVEFRONTS_PER_SM_PER_CYCLE",
    "AnswerKey", "Diagnosis", "Evidence", "InstructionMix", "LatencyPrediction", "Launch",
    "MysteryKernel", "SMThroughput", "Step", "Story", "WarpAccess", "answer_key", "classify",
    "diagnose", "evidence", "gemm_story", "latency_prediction", "mystery", "pipe_rates",
    "roofline_points", "sm_throughput",
]
