"""Every measured figure a lesson quotes in its prose agrees with the committed records.

``QUOTES`` is the list of those figures: the notebook, the text as the lesson writes it, and for
each number in it the record it comes from: the course's measured figures
(``gpu_lessons.hardware.measured``, which ``tests/test_measured.py`` ties to ``tests/data/``)
where the figure is there, else the raw record in ``tests/data/*.json``, or
``docs/measured/h200.md`` where only the report keeps a figure.  A figure must equal the
record at the precision it is written with (or within ``rel`` where the lesson says "about").

A second test is the safety net: every number in a lesson sentence that reports an H200 run
(mentions the H200 and a measuring verb) must lie inside one of the quoted texts, so a new
measured figure cannot enter a lesson without being checked here.
"""

import json
import re
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from gpu_lessons.hardware import measured
from gpu_lessons.memory import shared_load

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
REPORT = ROOT / "docs" / "measured" / "h200.md"


# -- the records ---------------------------------------------------------------------------------

def fig(key) -> float:
    """A figure of gpu_lessons/data/measured.toml."""
    return measured(key).value


def tflops_from_ms(key, n=8192) -> float:
    return 2 * n**3 / (fig(key) / 1e3) / 1e12


@cache
def _run() -> dict:
    return json.loads((DATA / "h200_measurements.json").read_text(encoding="utf-8"))


def _median(timing) -> float:
    return statistics.median(timing["samples"])


def copy_gbs(kind="copy") -> float:
    r = _run()[kind]
    return r["bytes_moved"] / _median(r["timing"]) / 1e9


def size_sweep_gbs(working_set_mib: int) -> float:
    """Copy bandwidth for a working set of both arrays (a CUDA graph of ``copies`` copies)."""
    for p in _run()["size_sweep"]["points"]:
        if 2 * p["array_bytes"] == working_set_mib << 20:
            return p["bytes_moved"] * p["copies"] / _median(p["timing"]) / 1e9
    raise KeyError(working_set_mib)


def gemm(precision, n, mode="burst") -> dict:
    for r in _run()["gemm"] + _run()["gemm_sustained"]:
        if (r["precision"], r["n"], r["mode"], r["data"]) == (precision, n, mode, "normal"):
            return r
    raise KeyError((precision, n, mode))


def gemm_tflops(precision, n, mode="burst") -> float:
    """From the raw record (measured.toml keeps the full-clock and power-limited 8192³ times)."""
    return 2 * n**3 / _median(gemm(precision, n, mode)["timing"]) / 1e12


def gemm_repeats_tflops() -> list[float]:
    runs = json.loads((DATA / "h200_gemm_repeats.json").read_text(encoding="utf-8"))["runs"]
    return sorted(2 * r["n"] ** 3 / _median(r["timing"]) / 1e12 for r in runs)


def simt_us(name) -> float:
    for k in _run()["simt"]["kernels"]:
        if k["name"] == name:
            return _median(k["timing"]) * 1e6
    raise KeyError(name)


def strided_gbs(stride, element_bytes=4) -> float:
    """Useful bandwidth of dst[i] = src[i * stride]: elements read + written, per second."""
    for sweep in _run()["stride"]:
        if sweep["element_bytes"] == element_bytes and sweep["l2_fetch_granularity"] == 64:
            for p in sweep["points"]:
                if p["stride"] == stride and p["offset"] == 0:
                    return sweep["n_elements"] * element_bytes * 2 / _median(p["timing"]) / 1e9
    raise KeyError(stride)


def bank_worst_ratio() -> float:
    """Largest |measured cycles per warp-wide load / the model's wavefronts - 1|."""
    worst = 0.0
    for sweep in _run()["bank"]:
        size = sweep["element_bytes"]
        per_load = sweep["iters"] * sweep["loads_per_iter"] * sweep["warps_per_block"]
        for p in sweep["points"]:
            cycles = statistics.median(p["block_cycles"]) / per_load
            addresses = [(lane * p["stride"]) % 2048 * size for lane in range(32)]
            model = shared_load(addresses, bytes_per_thread=size).wavefronts
            worst = max(worst, abs(cycles / model - 1))
    return worst


def bank_bytes_per_cycle() -> float:
    """Shared-memory bytes per SM cycle at stride 1 with 4-byte loads (one warp-wide load of
    128 bytes per measured cycle)."""
    sweep, = (w for w in _run()["bank"] if w["element_bytes"] == 4)
    per_load = sweep["iters"] * sweep["loads_per_iter"] * sweep["warps_per_block"]
    p, = (p for p in sweep["points"] if p["stride"] == 1)
    return 32 * 4 / (statistics.median(p["block_cycles"]) / per_load)


def launch_us(kind) -> float:
    return _median(_run()["launch"][kind]) * 1e6


def transfer_gbs(direction, memory) -> float:
    t = _run()["transfers"]
    for row in t["rows"]:
        if (row["direction"], row["memory"]) == (direction, memory):
            return t["bytes"] / _median(row["timing"]) / 1e9
    raise KeyError((direction, memory))


def report_numbers(pattern) -> list[float]:
    """Numbers of the one line of docs/measured/h200.md that matches ``pattern``."""
    lines = [ln for ln in REPORT.read_text(encoding="utf-8").splitlines() if re.search(pattern, ln)]
    assert len(lines) == 1, f"{pattern!r} matches {len(lines)} lines of {REPORT.name}"
    return [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*(?:\.\d+)?", lines[0])]


# -- what the lessons quote ------------------------------------------------------------------------

@dataclass(frozen=True)
class Quote:
    notebook: str                 # two-digit lesson number
    text: str                     # as the lesson's markdown writes it
    figures: tuple                # (number as written, record getter), in any order
    rel: float = 0.0              # extra tolerance for figures the lesson calls "about"


H200_SUSTAINED = ("fp16", 8192, "sustained")

QUOTES = [
    Quote("01", "the copy reached 4,205 GB/s of the 4,800 GB/s datasheet figure",
          (("4,205", lambda: fig("h200.copy.bandwidth_gbs")),)),
    Quote("01", "50.7 of 66.9 TFLOP/s", (("50.7", lambda: tflops_from_ms("h200.gemm.fp32_8192_ms")),)),
    Quote("02", "took 99.7 µs and\n52.5 µs: a ratio of 1.90",
          (("99.7", lambda: fig("h200.simt.branch_by_parity_us")),
           ("52.5", lambda: fig("h200.simt.branch_by_warp_us")),
           ("1.90", lambda: simt_us("branch_by_parity") / simt_us("branch_by_warp"))),),
    Quote("02", "the parity branch\n  took about 1.9× as long",
          (("1.9", lambda: simt_us("branch_by_parity") / simt_us("branch_by_warp")),)),
    Quote("03", "the caps 32, 64, 128 and 255 gave 1,000, 832, 408 and 0 bytes",
          (("1,000", lambda: report_numbers(r"registers and spills of one kernel")[4]),
           ("832", lambda: report_numbers(r"registers and spills of one kernel")[5]),
           ("408", lambda: report_numbers(r"registers and spills of one kernel")[6]),
           (" 0 ", lambda: report_numbers(r"registers and spills of one kernel")[7]))),
    Quote("03", "About 5.8 TB/s for a copy whose two arrays total 32 MiB",
          (("5.8", lambda: fig("h200.copy_in_l2.bandwidth_gbs") / 1e3),)),
    Quote("03", "4.3 TB/s for 1 GiB", (("4.3", lambda: size_sweep_gbs(1024) / 1e3),)),
    Quote("04", "measured 3,834 GB/s at stride 1 and 2,753, 1,696, 967 and 428 GB/s at\nstrides 2, 4, "
          "8 and 32: 72 %, 44 %, 25 % and 11 % of stride 1",
          (("3,834", lambda: fig("h200.strided_copy.float_stride1_useful_gbs")),
           ("2,753", lambda: fig("h200.strided_copy.float_stride2_useful_gbs")),
           ("1,696", lambda: fig("h200.strided_copy.float_stride4_useful_gbs")),
           ("967", lambda: strided_gbs(8)),
           ("428", lambda: strided_gbs(32)),
           ("72", lambda: 100 * strided_gbs(2) / strided_gbs(1)),
           ("44", lambda: 100 * strided_gbs(4) / strided_gbs(1)),
           ("25", lambda: 100 * strided_gbs(8) / strided_gbs(1)),
           ("11", lambda: 100 * strided_gbs(32) / strided_gbs(1)))),
    Quote("04", "for 4-,\n8- and 16-byte loads, within 8 %", (("8", lambda: 100 * bank_worst_ratio()),),
          rel=1.0),       # "within 8 %": the worst deviation must not exceed 8 %
    Quote("05", "The FP16 product reached 763.9 TFLOP/s (77 % of the 989 TFLOP/s dense peak)",
          (("763.9", lambda: tflops_from_ms("h200.gemm.fp16_8192_ms")),
           ("77", lambda: 100 * tflops_from_ms("h200.gemm.fp16_8192_ms") / 989.4))),
    Quote("05", "eight more calls gave 736–762",
          (("736", lambda: gemm_repeats_tflops()[0]), ("762", lambda: gemm_repeats_tflops()[-1]))),
    Quote("05", "the same product ran\nat 642 TFLOP/s",
          (("642", lambda: gemm_tflops(*H200_SUSTAINED)),)),
    Quote("05", "pulled the clock down to about 1,440 MHz",
          (("1,440", lambda: gemm(*H200_SUSTAINED)["clock"]["sm_mhz_median"]),)),
    Quote("05", "The triad reached 4,346 GB/s (91 % of 4.8 TB/s)",
          (("4,346", lambda: fig("h200.triad.bandwidth_gbs")),
           ("91", lambda: fig("h200.triad.bandwidth_gbs") / 48))),
    Quote("07", "128 bytes per cycle per SM (measured on an H200)",
          (("128", bank_bytes_per_cycle),), rel=0.01),
    Quote("08", "back-to-back launches cost 6.05 µs, 10.97 µs with a sync after each, and\n0.70 µs per "
          "node of a CUDA graph",
          (("6.05", lambda: fig("h200.launch.back_to_back_us")),
           ("10.97", lambda: fig("h200.launch.synced_us")),
           ("0.70", lambda: launch_us("graph")))),
    Quote("08", "ranged over 4.16–6.21 µs",
          (("4.16", lambda: report_numbers(r"earlier runs gave .* back-to-back")[1]),
           ("6.21", lambda: report_numbers(r"earlier runs gave .* back-to-back")[2]))),
    Quote("08", "Pinned copies reached 55.2 GB/s host to device and 55.1 GB/s back",
          (("55.2", lambda: fig("h200.host_copy.pinned_h2d_gbs")),
           ("55.1", lambda: fig("h200.host_copy.pinned_d2h_gbs")))),
    Quote("08", "pageable host-to-device copies 7.9 GB/s",
          (("7.9", lambda: fig("h200.host_copy.pageable_h2d_gbs")),)),
    Quote("09", "the same GEMM ran at about 1,440 MHz and 642 TFLOP/s, **65 %** of the datasheet "
          "peak though 82 % of the peak *at the clock it\nwas allowed*",
          (("1,440", lambda: gemm(*H200_SUSTAINED)["clock"]["sm_mhz_median"]),
           ("642", lambda: gemm_tflops(*H200_SUSTAINED)),
           ("65", lambda: 100 * gemm_tflops(*H200_SUSTAINED) / 989.4),
           ("82", lambda: 100 * gemm_tflops(*H200_SUSTAINED)
                          / (989.4 * gemm(*H200_SUSTAINED)["clock"]["sm_mhz_median"] / 1830)))),
    Quote("09", "sustained mode, 1,425–1,455\nMHz, 642.0 TFLOP/s",
          (("1,425", lambda: gemm(*H200_SUSTAINED)["clock"]["sm_mhz_min"]),
           ("1,455", lambda: gemm(*H200_SUSTAINED)["clock"]["sm_mhz_max"]),
           ("642.0", lambda: gemm_tflops(*H200_SUSTAINED)))),
    Quote("09", "a large GEMM on an H200 reaches about 75 % in a burst\n  and 65 % under sustained load",
          (("75", lambda: 100 * statistics.median(gemm_repeats_tflops()) / 989.4),
           ("65", lambda: 100 * gemm_tflops(*H200_SUSTAINED) / 989.4)), rel=0.02),
]


def fir_round_idle_cycles() -> float:
    """Cycles of each round of the capstone's filter (mystery 6) with no warp on the SM: the
    rounds' cycles as Nsight Compute timed them x the share of cycles without a warp (issue
    slots used over elapsed cycles against Nsight Compute's figure over active cycles)."""
    k = json.loads((DATA / "h200_capstone_fir.json").read_text(encoding="utf-8"))
    raw = k["kernels"]["fir40_v1"]["ncu_raw"]
    cycles = raw["gpu__time_duration.sum"] * 1e-9 * raw["sm__cycles_elapsed.avg.per_second"]
    active = (raw["smsp__inst_executed.sum"] / (4 * 132 * cycles)
              / (raw["sm__inst_issued.avg.pct_of_peak_sustained_active"] / 100))
    rounds = k["meta"]["n_floats"] / 32 / (132 * 8)          # 8 warps per SM
    return (1 - active) * cycles / rounds


def fir_us(name) -> float:
    return fig(f"h200.capstone_fir.{name}_us")


QUOTES += [
    Quote("10", "The H200 measured the fixed version too: about 4× faster",
          (("4", lambda: fig("h200.strided_copy.float_stride8_us")
            / fig("h200.strided_copy.float_stride1_us")),), rel=0.02),
    Quote("10", "Measured on an H200 it took 1.50 ms, and Nsight Compute put the SM at 20 % and "
          "DRAM at 7 % of their peaks",
          (("1.50", lambda: fir_us("fir40_v1") / 1e3),
           ("20", lambda: fig("h200.capstone_fir.fir40_v1_sm_throughput_pct")),
           ("7", lambda: fig("h200.capstone_fir.fir40_v1_dram_throughput_pct")))),
    Quote("10", "The H200 measured each step: taps in shared memory 451.6 µs, in constant memory "
          "377.9 µs, and with float4 loads 243.8 µs, 6.2× faster than the mystery",
          (("451.6", lambda: fir_us("fir40_v2")), ("377.9", lambda: fir_us("fir40_v3")),
           ("243.8", lambda: fir_us("fir40_v4")),
           ("6.2", lambda: fir_us("fir40_v1") / fir_us("fir40_v4")))),
    Quote("10", "On the H200 a float4 copy of the same 512 MiB took 140.6 µs and the filter "
          "243.8 µs",
          (("140.6", lambda: fir_us("copy_f4")), ("243.8", lambda: fir_us("fir40_v4")))),
    Quote("10", "Nsight Compute reported SM throughput 86 % (its instruction issue) and DRAM 47 %",
          (("86", lambda: fig("h200.capstone_fir.fir40_v4_sm_throughput_pct")),
           ("47", lambda: fig("h200.capstone_fir.fir40_v4_dram_throughput_pct")))),
    Quote("10", "in the 227.0 µs Nsight Compute timed the kernel alone (79 % of the 243.8 µs",
          (("227.0", lambda: fig("h200.capstone_fir.fir40_v4_kernel_us")),
           ("79", lambda: 100 * 382 * 2**24 / 32 / (4 * 132) / (fir_us("fir40_v4") * 1e-6 * 1.98e9)),
           ("243.8", lambda: fir_us("fir40_v4")))),
    Quote("10", "this kernel keeps DRAM only 7 % busy, and a pointer chase measured 340 ns "
          "unloaded",
          (("7", lambda: fig("h200.capstone_fir.fir40_v1_dram_throughput_pct")),
           ("340", lambda: fig("h200.pointer_chase.hbm_ns")))),
    Quote("10", "Nsight Compute found warps resident in only 84 % of the cycles, about 240 cycles "
          "of each round",
          (("84", lambda: fig("h200.capstone_fir.fir40_v1_sm_active_pct")),
           ("240", fir_round_idle_cycles)), rel=0.01),
]


def _squash(text: str) -> str:
    """Line breaks inside a paragraph do not matter; paragraph breaks end a sentence."""
    return re.sub(r"[ \t]*\n[ \t]*", " ", re.sub(r"\n\s*\n", " ¶ ", text)).replace("  ", " ")


def _lesson_markdown(number: str) -> str:
    path, = (ROOT / "notebooks").glob(f"{number}_*.ipynb")
    nb = json.loads(path.read_text(encoding="utf-8"))
    return _squash("\n\n".join("".join(c["source"]) for c in nb["cells"]
                                if c["cell_type"] == "markdown"))


def _value(written: str) -> tuple[float, float]:
    """The number and half a unit of its last written digit."""
    s = written.strip().replace(",", "")
    decimals = len(s.split(".")[1]) if "." in s else 0
    return float(s), 0.5 * 10.0**-decimals


@pytest.mark.parametrize("quote", QUOTES, ids=lambda q: f"{q.notebook}:{q.text[:30]}")
def test_quoted_figure_matches_the_record(quote):
    assert _squash(quote.text) in _lesson_markdown(quote.notebook), "the lesson no longer says this"
    for written, record in quote.figures:
        assert written in quote.text, f"{written!r} is not in the quoted text"
        value, half_digit = _value(written)
        actual = record()
        slack = half_digit + quote.rel * abs(actual) + 1e-9
        if quote.rel >= 1.0:                       # an upper bound ("within 8 %")
            assert actual <= value, f"{written}: the record has {actual:.4g}"
        else:
            assert abs(value - actual) <= slack, f"{written}: the record has {actual:.6g}"


# -- the safety net ---------------------------------------------------------------------------------

_REPORTING = re.compile(r"\bH200\b.*\b(measured|ran|took|reached|gave|cost|ranged)\b|"
                        r"\b(measured|ran|took|reached|gave|cost|ranged)\b.*\bH200\b", re.S)
_NUMBER = re.compile(r"(?<![\w.^/])\d[\d,]*(?:\.\d+)?(?![\w³²])")

#: Numbers in H200-reporting sentences that are not measurements: datasheet figures, sizes,
#: settings, model outputs.  (notebook, number, why)
NOT_MEASURED = {
    ("01", "4,800"): "H200 datasheet bandwidth",
    ("01", "88"): "4,205 / 4,800, quoted above",
    ("01", "8192"): "matrix size",
    ("01", "66.9"): "FP32 datasheet peak",
    ("02", "4,194,304"): "elements",
    ("03", "32"): "register caps / working-set size",
    ("03", "64"): "register cap", ("03", "128"): "register cap", ("03", "255"): "register cap",
    ("03", "60"): "L2 size (MiB), catalog", ("03", "1"): "1 GiB working set",
    ("03", "160"): "live values the kernel keeps per thread",
    ("04", "1"): "stride", ("04", "2"): "stride", ("04", "4"): "stride / element bytes",
    ("04", "8"): "stride / element bytes", ("04", "16"): "element bytes",
    ("04", "64"): "the L2 fetch granularity the runtime reports", ("04", "48"): "bytes apart",
    ("04", "13"): "model error bound, docs/measured/h200.md",
    ("05", "989"): "dense FP16 peak", ("05", "1,980"): "rated SM clock", ("05", "2"): "seconds",
    ("05", "700"): "board power limit", ("05", "4.8"): "datasheet bandwidth",
    ("09", "1,980"): "rated SM clock", ("09", "700"): "board power limit",
    ("09", "1,830"): "the tensor clock the datasheet peak assumes", ("09", "2"): "seconds",
    ("09", "100"): "per cent", ("09", "8192"): "matrix size",
    ("07", "32"): "banks", ("07", "4"): "bytes per bank", ("07", "128"): "FP32 lanes per SM",
    ("07", "2"): "FLOPs per FMA", ("07", "100"): "kernels in the modelled step",
    ("08", "10"): "an estimate, said so in the sentence",
    ("10", "6"): "the exponent of 1e-6, the FP32 GEMM's relative error (1.7e-6 in the record; "
                 "tests/test_capstone.py checks the order)",
    ("10", "4"): "the exponent of 2e-4, the FP16 GEMM's relative error (2.1e-4 in the record)",
}


def _covered(number_span, spans):
    return any(a <= number_span[0] and number_span[1] <= b for a, b in spans)


@pytest.mark.parametrize("number", [f"{n:02d}" for n in range(0, 11)])
def test_every_measured_number_in_a_lesson_is_checked(number):
    text = _lesson_markdown(number)
    spans = []
    for q in QUOTES:
        if q.notebook == number:
            start = text.find(_squash(q.text))
            if start >= 0:
                spans.append((start, start + len(_squash(q.text))))
    unchecked = []
    for sentence in re.finditer(r"(?:[^.!?¶]|[.!?](?=\S))+", text):   # "1.50" stays whole
        s = sentence.group(0)
        if "`" in s or not _REPORTING.search(s):
            continue
        for m in _NUMBER.finditer(s):
            where = (sentence.start() + m.start(), sentence.start() + m.end())
            if not _covered(where, spans) and (number, m.group(0)) not in NOT_MEASURED:
                unchecked.append(f"{m.group(0)!r} in: {' '.join(s.split())[:120]}")
    assert not unchecked, "measured figures not in QUOTES:\n" + "\n".join(unchecked)
