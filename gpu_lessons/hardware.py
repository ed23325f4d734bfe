"""The GPU catalog: datasheet numbers for real GPUs, each with its source; and the figures the
course measured on real GPUs, each with its record.

The numbers live in ``data/gpus.toml`` and ``data/measured.toml`` (data, not code); this module
loads them into frozen dataclasses and derives what the lessons need:

* peak FLOP/s per precision (dense, never sparse),
* memory bandwidth and the ridge point ``I_max = pi / beta`` (FLOP/byte),
* the two platform formulas, computed from first principles:
  ``pi = N_cores x f x FLOPs-per-cycle`` (an FMA is 2 FLOPs) and
  ``beta = bus width x data rate``.

>>> h100 = gpu("h100")
>>> round(h100.peak_flops("fp16") / 1e12, 1)
989.4
>>> round(h100.ridge_point("fp16"))
295
>>> str(measured("h200.launch.back_to_back_us"))
'6.05 µs'
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from . import _format, _validate

#: Threads per warp on every NVIDIA GPU so far (CUDA C++ Programming Guide, "SIMT Architecture").
WARP_SIZE = 32

#: Precisions the catalog may hold, in the order a table shows them.  "fp16" and "bf16" are
#: tensor-core peaks with FP32 accumulate; "fp16_acc16" exists only where FP16 accumulate is
#: faster (GeForce); "fp32" is the CUDA-core (non-tensor) peak; "tf32" the tensor-core TF32 peak.
PRECISIONS = ("fp64", "fp64_tensor", "fp32", "tf32", "fp16", "bf16", "fp16_acc16", "fp8")


@dataclass(frozen=True, repr=False)
class GPU(_format.Readout):
    """One GPU's datasheet figures.  Every number's source is in ``sources[field]``."""

    name: str
    cc: str
    memory_type: str
    sms: int
    fp32_cores_per_sm: int
    memory_gb: float
    bandwidth_gbs: float
    l2_bytes: int
    peak_tflops: dict[str, float]
    boost_mhz: float | None = None
    tensor_boost_mhz: float | None = None
    bus_width_bits: int | None = None
    memory_clock_mhz: float | None = None
    memory_data_rate_gbps: float | None = None
    l2_bytes_per_clk: int | None = None
    tensor_flops_per_clk_per_sm: dict[str, int] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    # -- peaks ------------------------------------------------------------------------------
    @property
    def fp32_cores(self) -> int:
        """CUDA cores (FP32 lanes) on the whole chip: SMs x cores per SM."""
        return self.sms * self.fp32_cores_per_sm

    def peak_flops(self, precision: str = "fp32", *, accumulate: str = "fp32",
                   sparse: bool = False) -> float:
        """Dense peak in FLOP/s for ``precision`` (see :data:`PRECISIONS`).

        ``accumulate="fp16"`` picks the FP16-accumulate peak where a GPU has a faster one
        (GeForce: RTX 4090 330.3 vs 165.2 TFLOP/s); mixed-precision training accumulates in
        FP32, so that is the default.  Sparse (2:4) peaks are refused: they are 2x the dense
        figure and only apply to pruned weights, so they make MFU meaningless.
        """
        if sparse:
            raise ValueError(
                "sparse=True: the catalog holds dense peaks only; vendors' sparse (2:4) peaks "
                "are 2x dense and must not be used for rooflines or MFU")
        _validate.choice("precision", precision, PRECISIONS)
        _validate.choice("accumulate", accumulate, ("fp32", "fp16"))
        key = precision
        if accumulate == "fp16" and precision == "fp16" and "fp16_acc16" in self.peak_tflops:
            key = "fp16_acc16"
        if key not in self.peak_tflops:
            have = ", ".join(k for k in PRECISIONS if k in self.peak_tflops)
            raise ValueError(f"precision={precision!r}: {self.name} has no such peak "
                             f"(it has {have})")
        return self.peak_tflops[key] * 1e12

    @property
    def bandwidth(self) -> float:
        """Datasheet DRAM bandwidth in bytes/s."""
        return self.bandwidth_gbs * 1e9

    def ridge_point(self, precision: str = "fp32", **kw) -> float:
        """``I_max = pi / beta`` in FLOP/byte: below it a kernel is memory-bound."""
        return self.peak_flops(precision, **kw) / self.bandwidth

    @property
    def l2_bandwidth(self) -> float | None:
        """L2 bandwidth in bytes/s (bytes per clock x boost clock) where the catalog knows it."""
        if self.l2_bytes_per_clk is None or self.boost_mhz is None:
            return None
        return self.l2_bytes_per_clk * self.boost_mhz * 1e6

    # -- the platform formulas -------------------------------------------------------------
    def pi_from_cores(self) -> float | None:
        """FP32 peak from first principles: cores x boost clock x 2 FLOPs (one FMA) per cycle."""
        if self.boost_mhz is None:
            return None
        return compute_peak(self.fp32_cores, self.boost_mhz * 1e6, 2)

    def pi_tensor_from_clock(self, precision: str = "fp16") -> float | None:
        """Tensor-core peak: SMs x tensor clock x dense FLOPs per clock per SM."""
        per_clk = self.tensor_flops_per_clk_per_sm.get(precision)
        clock = self.tensor_boost_mhz or self.boost_mhz
        if per_clk is None or clock is None:
            return None
        return compute_peak(self.sms, clock * 1e6, per_clk)

    def peak_flops_at_clock(self, precision: str, sm_mhz: float) -> float | None:
        """The dense peak if the SMs ran at ``sm_mhz``: peaks scale with the clock.

        The datasheet's tensor-core peaks assume ``tensor_boost_mhz`` (1,830 MHz on the H100
        and H200), its CUDA-core peaks ``boost_mhz``.  A GPU at its power limit runs slower
        than either, and this is the peak it can reach there.  None if the catalog lacks the
        rated clock or the precision.
        """
        _validate.choice("precision", precision, PRECISIONS)
        sm_mhz = _validate.positive("sm_mhz", sm_mhz)
        tensor = precision not in ("fp32", "fp64")
        rated = (self.tensor_boost_mhz if tensor else None) or self.boost_mhz
        try:
            peak = self.peak_flops(precision)
        except ValueError:
            return None
        return None if rated is None else peak * sm_mhz / rated

    def beta_from_bus(self) -> float | None:
        """DRAM bandwidth from first principles: bus width (bytes) x data rate (transfers/s).

        HBM is double data rate: data rate = 2 x memory clock.  GDDR parts quote the
        per-pin data rate directly (e.g. 21 Gbit/s on the RTX 4090).
        """
        if self.bus_width_bits is None:
            return None
        if self.memory_data_rate_gbps is not None:
            rate = self.memory_data_rate_gbps * 1e9
        elif self.memory_clock_mhz is not None:
            rate = 2 * self.memory_clock_mhz * 1e6
        else:
            return None
        return memory_bandwidth(self.bus_width_bits, rate)

    def readout_title(self) -> str:
        return self.name

    def readout_rows(self) -> tuple[_format.Row, ...]:
        Row = _format.Row
        return (Row("compute capability", self.cc), Row("SMs", self.sms),
                Row("FP32 cores", self.fp32_cores),
                Row("memory", f"{_format.memory_size(self.memory_gb * 1e9)} {self.memory_type}"),
                Row("bandwidth", self.bandwidth, "B/s"), Row("L2", self.l2_bytes, "B"),
                *(Row(f"peak {p} (dense)", v * 1e12, "FLOP/s") for p, v in self.peak_tflops.items()))


def compute_peak(units: int, clock_hz: float, flops_per_cycle: float) -> float:
    """The compute roof ``pi = N x f x IPC`` in FLOP/s (count an FMA as 2 FLOPs in ``flops_per_cycle``)."""
    _validate.integer("units", units, low=1)
    _validate.positive("clock_hz", clock_hz)
    _validate.positive("flops_per_cycle", flops_per_cycle)
    return units * clock_hz * flops_per_cycle


def memory_bandwidth(bus_width_bits: int, transfers_per_s: float) -> float:
    """The memory roof ``beta = bus width x data rate`` in bytes/s."""
    _validate.integer("bus_width_bits", bus_width_bits, low=1)
    _validate.positive("transfers_per_s", transfers_per_s)
    return bus_width_bits / 8 * transfers_per_s


# -- loading -----------------------------------------------------------------------------------

@cache
def catalog() -> dict[str, GPU]:
    """All GPUs, keyed by their canonical name, in catalog order."""
    raw = tomllib.loads(resources.files(__package__).joinpath("data/gpus.toml").read_text("utf-8"))
    source_names = raw["sources"]
    gpus = {}
    for entry in raw["gpu"]:
        values, sources = {}, {}
        for key, val in entry.items():
            if isinstance(val, dict):
                src = source_names[val["source"]]
                if "value" in val:
                    values[key] = val["value"]
                    sources[key] = src
                else:  # a table of per-precision numbers sharing one source
                    values[key] = {k: v for k, v in val.items() if k != "source"}
                    for k in values[key]:
                        sources[f"{key}.{k}"] = src
            else:
                values[key] = tuple(val) if isinstance(val, list) else val
        gpus[entry["name"]] = GPU(**values, sources=sources)
    return gpus


def names() -> list[str]:
    """Canonical names of every GPU in the catalog."""
    return list(catalog())


def _key(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def gpu(name) -> GPU:
    """Look a GPU up by name, forgiving case, spaces, dashes and common aliases.

    ``gpu("h100")``, ``gpu("H100 SXM")`` and ``gpu("4090")`` all work; a GPU object is
    returned unchanged.  An unknown name raises ``ValueError`` listing the names that exist.
    """
    if isinstance(name, GPU):
        return name
    if not isinstance(name, str):
        raise TypeError(f"name must be a GPU name (str) or a GPU, got {name!r}")
    wanted = _key(name)
    for g in catalog().values():
        if wanted in {_key(g.name), *(_key(a) for a in g.aliases)}:
            return g
    close = difflib.get_close_matches(name, names(), n=3, cutoff=0.4)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"name={name!r} is not in the GPU catalog.{hint} "
                     f"Known GPUs: {', '.join(names())}")


# -- measured figures ------------------------------------------------------------------------------

#: The units a measured figure may carry, with their size in the SI base unit (s, B/s, FLOP/s,
#: Hz, bytes; a percentage as a fraction; counts and rates per SM clock as themselves).
UNITS = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "GB/s": 1e9, "TB/s": 1e12,
         "TFLOP/s": 1e12, "MHz": 1e6, "B": 1.0, "%": 0.01, "cycles": 1.0,
         "instructions/warp": 1.0, "B/clock/SM": 1.0, "warp instructions/clock/SM": 1.0}


@dataclass(frozen=True)
class Measured:
    """One figure measured on a real GPU: ``value`` in ``unit``, the ``gpu`` (a catalog name)
    and ``date`` of the run, the ``record`` holding its raw samples (a file under
    ``tests/data/``), ``where`` in that record it is and ``what`` was measured."""

    key: str
    value: float
    unit: str
    gpu: str
    date: str
    record: str
    where: str = field(repr=False)
    what: str = field(repr=False)
    how: str = field(default="", repr=False)
    doc: str = field(default="", repr=False)

    @property
    def si(self) -> float:
        """The value in the SI base unit: seconds for times, bytes/s for bandwidths, FLOP/s,
        Hz for clocks, a fraction for a percentage."""
        return self.value * UNITS[self.unit]

    @property
    def source(self) -> str:
        """One line a lesson or a result can cite: what, on which GPU, when, and where."""
        return (f"{self.what}; measured on an {self.gpu}, {self.date} ({self.how}); "
                f"{self.doc}; raw samples in {self.record}")

    def __str__(self) -> str:
        # every digit the data file writes, no more: 1,044.512 µs, 4,205 GB/s
        v = self.value
        return f"{int(v):,} {self.unit}" if v.is_integer() else f"{v:,} {self.unit}"

    def __repr__(self) -> str:
        return (f"Measured({self.key} = {self}, {self.gpu}, {self.date}, {self.record})")


@cache
def measured_figures() -> dict[str, Measured]:
    """Every measured figure, keyed as in ``data/measured.toml``."""
    raw = tomllib.loads(
        resources.files(__package__).joinpath("data/measured.toml").read_text("utf-8"))
    runs = raw["runs"]
    figures = {}
    for key, entry in raw["figures"].items():
        run = runs[entry["run"]]
        figures[key] = Measured(key=key, value=float(entry["value"]), unit=entry["unit"],
                                gpu=run["gpu"], date=run["date"], record=run["record"],
                                where=entry["where"], what=entry["what"], how=run["how"],
                                doc=run["doc"])
    return figures


def measured(key: str) -> Measured:
    """The measured figure ``key`` (``"h200.launch.back_to_back_us"``): a :class:`Measured`
    with its value, unit, GPU, date and the record it comes from.  An unknown key raises
    ``ValueError`` naming the closest keys that exist."""
    if not isinstance(key, str):
        raise TypeError(f"key must be a measured figure's name (str), got {key!r}")
    figures = measured_figures()
    if key in figures:
        return figures[key]
    close = difflib.get_close_matches(key, list(figures), n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"key={key!r} is not a measured figure.{hint} The figures are listed in "
                     "gpu_lessons/data/measured.toml")
