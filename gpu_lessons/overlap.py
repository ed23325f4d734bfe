"""The overlap model's prediction beside the overlap measurement, point by point.

Nothing here re-derives the model: every prediction is a call of
:func:`gpu_lessons.system.training_step` (bucketed all-reduce overlapped with backward) with
parameters taken from the measurement itself:

* **backward compute**: the measured GEMM chain alone, split evenly over its layers (forward 0);
* **all-reduce**: the model's ring formula ``t(S) = 2(p−1)·α + 2(p−1)/p · S / B``
  (:func:`gpu_lessons.system.allreduce_time`), with ``α`` (latency per ring step) and ``B``
  (bytes/s per GPU and direction) **fitted** to the measured all-reduce times (b) — a linear fit
  of ``t`` against ``S`` that minimises the *relative* error (each point weighted by 1/t), over
  the sizes the buckets span (a quarter of the smallest bucket to four times the largest).  For
  large sizes ``B`` is the bus bandwidth nccl-tests reports;
* **SM sharing** (``comm_sm_fraction``): 0 — the overlap model alone — or the value measured in
  phase (d) (:attr:`Contention.comm_sm_fraction`): how much slower the GEMMs ran beside NCCL.

Measured and predicted exposed communication mean the same thing: step − compute alone (the
compute's slowdown under communication plus the communication left after it).  A point
agrees when the prediction is within ``tolerance`` (20 %) of the measurement; where it does
not, :attr:`OverlapComparison.notes` says which measured effect the model leaves out and how
large it was (the compute and the all-reduces slowing each other, the fit's own error).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _validate, system
from ._format import Readout, Row, Table, binary_bytes, exact_bytes, fixed, html_table, percent, text_table
from .overlap_record import (
    BACKENDS,
    SCHEMA,
    AllReducePoint,
    Contention,
    OverlapConfig,
    OverlapPoint,
    _contention,
    _need,
    _slowest,
)

# -- the measurement -------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class OverlapMeasurement:
    """Everything one run measured, in µs and GB/s (module docstring for the phases).

    ``smoke_test``: one GPU, so the all-reduces moved nothing between GPUs: a check of the code
    path, not a measurement of communication.  ``synthetic``: made up for tests, never a
    measurement.  ``raw`` is the record it was built from (every rank's samples, seconds).
    """

    world_size: int
    backend: str
    gpu_names: tuple[str, ...]
    smoke_test: bool
    synthetic: bool
    config: OverlapConfig
    compute_us: float
    allreduce: tuple[AllReducePoint, ...]
    points: tuple[OverlapPoint, ...]
    contention: Contention
    meta: dict = field(default_factory=dict, compare=False)
    raw: dict = field(default_factory=dict, compare=False)

    @property
    def layer_us(self) -> float:
        """Compute per layer (one GEMM), µs."""
        return self.compute_us / self.config.n_layers

    @property
    def gemm_tflops(self) -> float:
        """Rate of the GEMM chain alone, TFLOP/s (2·n³ FLOPs per GEMM)."""
        return self.config.gemm_flops / (self.layer_us * 1e-6) / 1e12

    @property
    def label(self) -> str:
        names = sorted(set(self.gpu_names))
        what = names[0] if len(names) == 1 else " + ".join(names)
        tags = [t for t, on in (("SYNTHETIC test fixture, not a measurement", self.synthetic),
                                ("smoke test (one GPU: no communication measured)",
                                 self.smoke_test)) if on]
        return f"{self.world_size} × {what} ({self.backend})" + "".join(f" — {t}" for t in tags)

    def compare(self, **kwargs):
        """The overlap model's prediction beside every point
        (:func:`compare_overlap`)."""
        return compare_overlap(self, **kwargs)

    def to_raw(self) -> dict:
        return self.raw

    def save(self, path) -> None:
        """Write the raw record as JSON (what :func:`load_overlap` reads)."""
        Path(path).write_text(json.dumps(self.raw, indent=1) + "\n")

    def to_dict(self) -> dict:
        """The summary, JSON-ready, with the unit in every key."""
        return {"label": self.label, "world_size": self.world_size, "backend": self.backend,
                "gpu_names": list(self.gpu_names), "smoke_test": self.smoke_test,
                "synthetic": self.synthetic, "compute_us": self.compute_us,
                "layer_us": self.layer_us, "gemm_tflops": self.gemm_tflops,
                "allreduce": [{"bytes": p.nbytes, "time_us": p.time_us,
                               "algbw_gbs": p.algbw_gbs, "busbw_gbs": p.busbw_gbs}
                              for p in self.allreduce],
                "overlap": [{"bucket_bytes": p.bucket_bytes, "n_buckets": p.n_buckets,
                             "total_us": p.total_us, "exposed_us": p.exposed_us,
                             "slowdown_us": p.slowdown_us, "tail_us": p.tail_us}
                            for p in self.points],
                "contention": {"compute_slowdown": self.contention.compute_slowdown,
                               "comm_sm_fraction": self.contention.comm_sm_fraction,
                               "comm_slowdown": self.contention.comm_slowdown}}

    def _rows(self):
        for p in self.points:
            yield (binary_bytes(p.bucket_bytes), f"{p.n_buckets}", fixed(p.total_us, 'µs'),
                   fixed(p.exposed_us, 'µs'), fixed(p.slowdown_us, 'µs'), fixed(p.tail_us, 'µs'))

    _HEAD = ("bucket", "buckets", "step", "exposed (step − compute alone)",
             "compute slowed", "comm after compute")

    def __repr__(self) -> str:
        c = self.config
        big = self.allreduce[-1]
        lines = [f"Overlap on {self.label}",
                 f"compute alone: {c.n_layers} GEMMs of {c.gemm_n}³ {c.dtype} = "
                 f"{fixed(self.compute_us, 'µs')} ({fixed(self.layer_us, 'µs')} each, "
                 f"{fixed(self.gemm_tflops, 'TFLOP/s')})",
                 f"all-reduce of {binary_bytes(big.nbytes)}: {fixed(big.time_us, 'µs')}, busbw "
                 f"{fixed(big.busbw_gbs, 'GB/s')}",
                 repr(self.contention), text_table(self._HEAD, self._rows())]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(f"Overlap measured on {self.label}: compute alone "
                          f"{fixed(self.compute_us, 'µs')}, gradients "
                          f"{binary_bytes(self.config.total_grad_bytes)}", self._HEAD,
                          self._rows())


def overlap_from_raw(raw: dict) -> OverlapMeasurement:
    """Build the results from a raw record (pure arithmetic; what the tests replay).  A record
    that is not one raises ``ValueError`` saying what is wrong."""
    if not isinstance(raw, dict):
        raise TypeError(f"raw must be a dict (a parsed overlap record), got {type(raw).__name__}")
    try:
        return _from_raw(raw)
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ValueError(f"not an overlap record: {type(exc).__name__} {exc}") from None


def _from_raw(raw: dict) -> OverlapMeasurement:
    if _need(raw, "schema") != SCHEMA:
        raise ValueError(f"overlap record schema {raw['schema']!r} is not {SCHEMA}")
    config = OverlapConfig.from_raw(_need(raw, "config"))
    world = _validate.integer("world_size", _need(raw, "world_size"), low=1)
    ranks = _need(raw, "by_rank")
    if not isinstance(ranks, list) or len(ranks) != world:
        raise ValueError(f"not an overlap record: by_rank must hold {world} ranks")
    compute = _slowest([_need(r, "compute_samples", "a rank") for r in ranks],
                       "compute_samples")
    allreduce = []
    for i, nbytes in enumerate(config.allreduce_bytes):
        per_rank = [_need(r, "allreduce", "a rank")[i] for r in ranks]
        if any(p.get("nbytes") != nbytes for p in per_rank):
            raise ValueError(f"not an overlap record: all-reduce {i} is not {nbytes} bytes")
        allreduce.append(AllReducePoint(nbytes, world, _slowest(
            [p["samples"] for p in per_rank], f"allreduce {exact_bytes(nbytes)} samples")))
    points = []
    for i, cap in enumerate(config.bucket_bytes):
        per_rank = [_need(r, "overlap", "a rank")[i] for r in ranks]
        buckets = tuple(tuple(int(x) for x in g) for g in _need(per_rank[0], "buckets"))
        points.append(OverlapPoint(
            cap, buckets, _slowest([p["total_samples"] for p in per_rank], "overlap total"),
            _slowest([p["compute_samples"] for p in per_rank], "overlap compute"), compute))
    names = tuple(str(_need(r, "meta", "a rank").get("name", "?")) for r in ranks)
    return OverlapMeasurement(world, _validate.choice("backend", raw.get("backend"), BACKENDS),
                              names, bool(raw.get("smoke_test", world == 1)),
                              bool(raw.get("synthetic", False)), config, compute,
                              tuple(allreduce), tuple(points), _contention(ranks, compute),
                              dict(raw.get("meta", {})), raw)


def load_overlap(path) -> OverlapMeasurement:
    """Read a record written by ``tools/device/overlap_nccl.py`` (or :meth:`save`)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"path must be an overlap record (a JSON file), got {str(path)!r}: "
                         "no such file")
    try:
        raw = json.loads(p.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{p.name} is not JSON: {exc}") from None
    return overlap_from_raw(raw)


# -- the model beside it ---------------------------------------------------------------------

#: A prediction within this fraction of the measurement counts as agreement.
TOLERANCE = 0.20


@dataclass(frozen=True, repr=False)
class AllReduceFit(Readout):
    """The ring model fitted to measured all-reduce times: ``latency_us`` = α per ring step,
    ``bus_bandwidth`` = B in bytes/s per GPU and direction, over sizes ``fit_bytes``;
    ``residuals``: (bytes, model / measured − 1) for every measured size."""

    gpus: int
    latency_us: float
    bus_bandwidth: float
    fit_bytes: tuple[int, int]
    residuals: tuple[tuple[int, float], ...]

    def time_us(self, nbytes: float) -> float:
        """The fitted model's all-reduce time, µs (:func:`gpu_lessons.system.allreduce_time`)."""
        return system.allreduce_time(nbytes, self.gpus, self.bus_bandwidth,
                                     latency_us=self.latency_us) * 1e6

    @property
    def busbw_gbs(self) -> float:
        return self.bus_bandwidth / 1e9

    def residual(self, nbytes: int) -> float | None:
        return dict(self.residuals).get(nbytes)

    @property
    def worst_residual(self) -> float:
        """The largest |model / measured − 1| among the fitted sizes."""
        lo, hi = self.fit_bytes
        return max(abs(r) for s, r in self.residuals if lo <= s <= hi)

    def readout_title(self) -> str:
        return f"Ring all-reduce fitted on {self.gpus} GPUs"

    def readout_rows(self) -> tuple[Row, ...]:
        lo, hi = self.fit_bytes
        return (Row("α per ring step", self.latency_us * 1e-6, "s"),
                Row("bus bandwidth B", self.bus_bandwidth, "B/s"),
                Row("smallest size fitted", lo, "B"), Row("largest size fitted", hi, "B"),
                Row("worst error there", self.worst_residual, "%"))


def fit_allreduce(points, *, min_bytes: float = 0, max_bytes: float = float("inf")) -> AllReduceFit:
    """Fit the ring model to measured all-reduce points (module docstring) over sizes in
    ``[min_bytes, max_bytes]``; needs two GPUs or more and two sizes or more."""
    pts = tuple(points)
    if not pts or not all(isinstance(p, AllReducePoint) for p in pts):
        raise TypeError("points must be AllReducePoint values (an OverlapMeasurement's "
                        ".allreduce)")
    p = pts[0].gpus
    if p < 2:
        raise ValueError("an all-reduce on one GPU moves nothing between GPUs (a smoke test): "
                         "there is no communication to fit; measure on two GPUs or more")
    lo = _validate.real("min_bytes", min_bytes, low=0.0)
    hi = float(max_bytes)
    used = [q for q in pts if lo <= q.nbytes <= hi]
    if len(used) < 2:
        raise ValueError(f"fitting needs two sizes or more within min_bytes..max_bytes, found "
                         f"{len(used)} in {binary_bytes(lo)}..{binary_bytes(min(hi, 2**62))}")
    s = np.array([q.nbytes for q in used], dtype=float)
    t = np.array([q.time_us for q in used], dtype=float)
    # t ≈ a + b·S with each row divided by t: least squares on the relative error
    (a, b), *_ = np.linalg.lstsq(np.column_stack([1 / t, s / t]), np.ones_like(t), rcond=None)
    if a < 0:  # no measurable latency: bandwidth alone, b = Σ(S/t) / Σ(S/t)²
        a, b = 0.0, float(np.sum(s / t) / np.sum((s / t) ** 2))
    if b <= 0:
        raise ValueError("the measured all-reduce time does not grow with size: no bandwidth "
                         "to fit")
    alpha = a / (2 * (p - 1))
    bandwidth = 2 * (p - 1) / p / b * 1e6          # b is µs per byte
    fit = AllReduceFit(p, float(alpha), float(bandwidth), (int(s.min()), int(s.max())), ())
    residuals = tuple((q.nbytes, fit.time_us(q.nbytes) / q.time_us - 1) for q in pts)
    return AllReduceFit(p, fit.latency_us, fit.bus_bandwidth, fit.fit_bytes, residuals)


def _bucket_range(m: OverlapMeasurement) -> tuple[float, float]:
    """Smallest and largest bucket the overlap phase all-reduced, bytes."""
    per = m.config.grad_bytes_per_layer
    sizes = [len(g) * per for p in m.points for g in p.buckets]
    return min(sizes), max(sizes)


def fit_for(m: OverlapMeasurement) -> AllReduceFit:
    """:func:`fit_allreduce` on ``m``'s all-reduces over the sizes its buckets span."""
    lo, hi = _bucket_range(m)
    return fit_allreduce(m.allreduce, min_bytes=lo / 4, max_bytes=hi * 4)


def predict_step(m: OverlapMeasurement, bucket_bytes: float, *, fit: AllReduceFit,
                 comm_sm_fraction: float = 0.0) -> system.StepRun:
    """The model's training step for ``m``'s layers with buckets of ``bucket_bytes``."""
    n = m.config.n_layers
    return system.training_step(0.0, [m.layer_us / 1e3] * n, [m.config.grad_bytes_per_layer] * n,
                                gpus=m.world_size, link_bandwidth=fit.bus_bandwidth,
                                latency_us=fit.latency_us, bucket_bytes=bucket_bytes,
                                comm_sm_fraction=comm_sm_fraction)


def predicted_exposed_us(m: OverlapMeasurement, bucket_bytes, *, fit: AllReduceFit,
                         comm_sm_fraction: float = 0.0) -> np.ndarray:
    """Predicted exposed communication (step − compute alone, µs) for each bucket size."""
    out = []
    for cap in np.atleast_1d(np.asarray(bucket_bytes, dtype=float)):
        run = predict_step(m, float(cap), fit=fit, comm_sm_fraction=comm_sm_fraction)
        out.append((run.step_ms - run.compute_ms) * 1e3)
    return np.array(out)


@dataclass(frozen=True)
class OverlapRow:
    """One bucket size: measured and predicted exposed communication and its two parts, µs."""

    bucket_bytes: int
    n_buckets: int
    measured_us: float
    predicted_us: float
    predicted_no_sharing_us: float
    measured_slowdown_us: float
    predicted_slowdown_us: float
    measured_tail_us: float
    predicted_tail_us: float

    @property
    def error(self) -> float | None:
        """predicted / measured − 1 (``None`` when nothing measurable was exposed)."""
        return self.predicted_us / self.measured_us - 1 if self.measured_us > 0 else None

    @property
    def error_no_sharing(self) -> float | None:
        return (self.predicted_no_sharing_us / self.measured_us - 1
                if self.measured_us > 0 else None)

    def within(self, tolerance: float = TOLERANCE) -> bool:
        return self.error is not None and abs(self.error) <= tolerance


def signed_percent(x: float | None) -> str:
    """``+6.4%``, ``-23.0%``; an em dash for ``None``."""
    return "—" if x is None else f"{percent(x, signed=True)}"


@dataclass(frozen=True, repr=False)
class OverlapComparison(Table):
    """Measured exposed communication beside the model's, per bucket size (module docstring)."""

    measurement: OverlapMeasurement
    fit: AllReduceFit
    comm_sm_fraction: float
    tolerance: float
    rows: tuple[OverlapRow, ...]

    @property
    def agreeing(self) -> int:
        return sum(r.within(self.tolerance) for r in self.rows)

    @property
    def all_within(self) -> bool:
        return self.agreeing == len(self.rows)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the model leaves out, with the measured size of each effect, for the points
        outside the tolerance (empty when every point agrees)."""
        m, c = self.measurement, self.measurement.contention
        out = []
        for r, point in zip(self.rows, m.points, strict=True):
            if r.within(self.tolerance):
                continue
            size = len(point.buckets[0]) * m.config.grad_bytes_per_layer   # the first bucket
            near, res = min(self.fit.residuals, key=lambda sr: abs(np.log(sr[0] / size)))
            parts = [f"buckets of {binary_bytes(r.bucket_bytes)}: model "
                     f"{fixed(r.predicted_us, 'µs')} vs measured {fixed(r.measured_us, 'µs')} "
                     f"({signed_percent(r.error)}); without SM sharing the model says "
                     f"{fixed(r.predicted_no_sharing_us, 'µs')} ({signed_percent(r.error_no_sharing)})",
                     f"compute slowed by {fixed(r.measured_slowdown_us, 'µs')} measured vs "
                     f"{fixed(r.predicted_slowdown_us, 'µs')} modelled; communication after the "
                     f"compute {fixed(r.measured_tail_us, 'µs')} measured vs "
                     f"{fixed(r.predicted_tail_us, 'µs')} modelled"]
            if c.comm_slowdown is not None:
                parts.append(f"the model runs every all-reduce at full speed, but beside the "
                             f"GEMMs they took {percent(c.comm_slowdown, signed=True)} longer (phase d)")
            parts.append(f"the ring fit is off by {percent(res, signed=True)} at {binary_bytes(near)}, the "
                         f"measured size nearest these buckets' {binary_bytes(size)}")
            out.append("; ".join(parts) + ".")
        return tuple(out)

    _HEAD = ("bucket", "buckets", "measured exposed", "model", "error", "model, no SM sharing",
             "error", "within")

    def _rows(self):
        for r in self.rows:
            yield (binary_bytes(r.bucket_bytes), f"{r.n_buckets}", fixed(r.measured_us, 'µs'),
                   fixed(r.predicted_us, 'µs'), signed_percent(r.error),
                   fixed(r.predicted_no_sharing_us, 'µs'), signed_percent(r.error_no_sharing),
                   "yes" if r.within(self.tolerance) else "no")

    def _caption(self) -> str:
        return (f"Exposed communication on {self.measurement.label}: model with α = "
                f"{fixed(self.fit.latency_us, 'µs', 2)}, B = {fixed(self.fit.busbw_gbs, 'GB/s')} "
                f"(fitted), "
                f"compute {fixed(self.measurement.layer_us, 'µs')} per layer, SM share taken by "
                f"NCCL {percent(self.comm_sm_fraction)}; {self.agreeing} of {len(self.rows)} within "
                f"{percent(self.tolerance)}")

    def table(self):
        """Per bucket size: measured and modelled exposed time, with and without SM sharing."""
        return self._caption(), self._HEAD, list(self._rows())

    def __repr__(self) -> str:
        return "\n".join([super().__repr__(), *self.notes])

    def _repr_html_(self) -> str:
        return super()._repr_html_() + "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)

    def markdown(self) -> str:
        return _md_table(self._HEAD, self._rows())


def compare_overlap(m: OverlapMeasurement, *, comm_sm_fraction="measured",
                    tolerance: float = TOLERANCE, fit: AllReduceFit | None = None
                    ) -> OverlapComparison:
    """Every bucket size of ``m`` measured and predicted (module docstring).

    ``comm_sm_fraction``: ``"measured"`` (phase d's value, the default) or a number 0..0.95;
    ``fit``: the all-reduce model to use (default :func:`fit_for`).
    """
    if not isinstance(m, OverlapMeasurement):
        raise TypeError(f"m must be an OverlapMeasurement, got {type(m).__name__}")
    if m.smoke_test or m.world_size < 2:
        raise ValueError("this run used one GPU: a smoke test of the code path, with no "
                         "communication between GPUs to compare against the model")
    tol = _validate.real("tolerance", tolerance, low=0.0, high=10.0)
    f = (m.contention.comm_sm_fraction if isinstance(comm_sm_fraction, str)
         and comm_sm_fraction == "measured"
         else _validate.real("comm_sm_fraction", comm_sm_fraction, low=0.0, high=0.95))
    fit = fit_for(m) if fit is None else fit
    rows = []
    for p in m.points:
        run = predict_step(m, p.bucket_bytes, fit=fit, comm_sm_fraction=f)
        bare = predict_step(m, p.bucket_bytes, fit=fit, comm_sm_fraction=0.0)
        if len(run.buckets) != p.n_buckets:   # the same DDP rule on both sides, or a bug
            raise AssertionError(f"model made {len(run.buckets)} buckets, the run "
                                 f"{p.n_buckets}")
        rows.append(OverlapRow(p.bucket_bytes, p.n_buckets, p.exposed_us,
                               (run.step_ms - run.compute_ms) * 1e3,
                               (bare.step_ms - bare.compute_ms) * 1e3, p.slowdown_us,
                               run.slowdown_ms * 1e3, p.tail_us, run.exposed_comm_ms * 1e3))
    return OverlapComparison(m, fit, f, tol, tuple(rows))


# -- the Markdown report for docs/measured/ --------------------------------------------------

def _md_table(head, rows) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def report_markdown(m: OverlapMeasurement) -> str:
    """The tables of a ``docs/measured/`` page for one run: conditions, all-reduce sweep with
    the fit, compute, contention, and the comparison with the model."""
    c, meta = m.config, m.meta
    lines = [f"# Communication/computation overlap: {m.label}", ""]
    if m.synthetic:
        lines += ["**Synthetic test fixture: made-up numbers for testing the code, not a "
                  "measurement.**", ""]
    if m.smoke_test:
        lines += ["**Smoke test on one GPU**: an all-reduce over one rank moves nothing between "
                  "GPUs, so the all-reduce and overlap figures below check the code path only; "
                  "they are not a measurement of communication.", ""]
    cond = [("date (UTC)", meta.get("date_utc", "—")),
            ("GPUs", ", ".join(m.gpu_names)),
            ("versions", f"PyTorch {meta.get('torch', '—')}, NCCL {meta.get('nccl', '—')}, "
                         f"CUDA {meta.get('cuda_runtime', '—')}, driver "
                         f"{', '.join(meta.get('driver', [])) or '—'}"),
            ("NVLink multicast", ", ".join(f"{k}={v}" for k, v in meta.get("env", {}).items()
                                           if k in ("NCCL_NVLS_ENABLE",
                                                    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                    "NVSHMEM_DISABLE_NVLS")) or "—"),
            ("method", f"median of {c.repeats} timed runs after {c.warmup} warm-up run(s), the "
                       "slowest rank per run, " + ("CUDA events" if m.backend == "nccl" else
                                                   "host clocks (gloo on the CPU)") +
                       f"; all-reduce = {c.iters} back-to-back operations per timed run")]
    nccl = meta.get("nccl_init") or {}
    if nccl.get("coll_channels"):
        n, sms = nccl["coll_channels"], m.raw["by_rank"][0]["meta"].get("sms")
        share = f" = {percent(n / sms)} of the {sms} SMs" if sms else ""
        cond.append(("NCCL set-up (NCCL_DEBUG=INFO)",
                     f"{n} channels: a collective runs at most {n} thread blocks, one per SM"
                     f"{share}; transports {', '.join(nccl.get('transports', [])) or '—'}"))
    clocks = [r.get("meta", {}).get("clock") for r in m.raw.get("by_rank", [])]
    clocks = [k for k in clocks if k]
    if clocks:
        cond.append(("SM clock while timing", "; ".join(
            f"rank {i}: {k['sm_mhz_min']:,}–{fixed(k['sm_mhz_max'], 'MHz', 0)}, "
            f"{', '.join(k['reasons']) or 'no limit reason'}" for i, k in enumerate(clocks))))
    lines += [_md_table(("", ""), cond), ""]
    topo = meta.get("topology")
    if topo and not str(topo).startswith("unavailable"):
        # nvidia-smi underlines its header with terminal escape codes even into a pipe
        plain = re.sub(r"\x1b\[[0-9;]*m", "", str(topo))
        lines += ["GPU links (`nvidia-smi topo -m`):", "", "```", plain, "```", ""]

    lines += ["## All-reduce alone", ""]
    fit = None
    if not m.smoke_test:
        try:
            fit = fit_for(m)
        except ValueError as exc:
            lines += [f"The ring model could not be fitted: {exc}.", ""]
    if fit is not None:
        lines += [f"Ring model fitted on {binary_bytes(fit.fit_bytes[0])}–"
                  f"{binary_bytes(fit.fit_bytes[1])}: α = {fixed(fit.latency_us, 'µs', 2)} per ring "
                  f"step, B = {fixed(fit.busbw_gbs, 'GB/s')} per GPU and direction.", ""]
    rows = [(binary_bytes(p.nbytes), fixed(p.time_us, 'µs'), fixed(p.algbw_gbs, 'GB/s', 2),
             fixed(p.busbw_gbs, 'GB/s', 2),
             "—" if fit is None else
             f"{fixed(fit.time_us(p.nbytes), 'µs')} ({signed_percent(fit.residual(p.nbytes))})")
            for p in m.allreduce]
    lines += [_md_table(("size", "time", "algbw", "busbw (nccl-tests)", "ring model"), rows), ""]

    ct = m.contention
    lines += ["## Compute and contention", "",
              f"{c.n_layers} GEMMs of {c.gemm_n}³ in {c.dtype}: {fixed(m.compute_us, 'µs')} alone "
              f"({fixed(m.layer_us, 'µs')} each, {fixed(m.gemm_tflops, 'TFLOP/s')}).  Beside "
              f"{ct.count} back-to-back all-reduces of {binary_bytes(ct.allreduce_bytes)}: "
              f"{fixed(ct.compute_us, 'µs')} ({percent(ct.compute_slowdown, signed=True)}), "
              "so NCCL's kernels took "
              f"the equivalent of {percent(ct.comm_sm_fraction)} of the GPU from the GEMMs; each "
              "all-reduce took " + (
                  "— (none ended while the GEMMs ran)" if ct.comm_slowdown is None else
                  f"{fixed(ct.allreduce_under_us, 'µs')} instead of {fixed(ct.allreduce_alone_us, 'µs')} "
                  f"alone ({percent(ct.comm_slowdown, signed=True)})") + ".", ""]

    lines += ["## Bucketed all-reduce overlapped with the GEMMs", "",
              _md_table(OverlapMeasurement._HEAD, m._rows()), ""]
    if fit is not None:
        cmp_ = compare_overlap(m, fit=fit)
        lines += ["## The model beside the measurement", "", cmp_._caption() + ".", "",
                  cmp_.markdown(), ""]
        lines += [f"- {n}" for n in cmp_.notes]
    return "\n".join(lines).rstrip() + "\n"
