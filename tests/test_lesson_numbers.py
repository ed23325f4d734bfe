"""Every measured figure a lesson quotes in its prose agrees with the committed records.

``QUOTES`` is the list of those figures: the notebook, the text as the lesson writes it, and for
each number in it how it follows from the course's measured figures
(``gpu_lessons.hardware.measured``, data in ``gpu_lessons/data/measured.toml``), which
``tests/test_measured.py`` recomputes from the raw records in ``tests/data/``.  So there is one
path from a record to a lesson: record -> measured.toml (checked there) -> lesson (checked here);
this file never reads a raw record itself.  A figure must equal its value at the precision it is
written with (or within ``rel`` where the lesson says "about"), or respect the bound the lesson
states ("within 8 %", "more than 2x").

A second test is the safety net: every number in a lesson sentence that reports a measurement
(a measuring verb, in a sentence or paragraph about the H200 or a measurement) must lie inside
one of the quoted texts or be listed in ``NOT_MEASURED`` with the reason, so a new measured
figure cannot enter a lesson without being checked here.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpu_lessons.hardware import gpu, measured

ROOT = Path(__file__).resolve().parents[1]
H200 = gpu("h200")
FP16_PEAK_TFLOPS = H200.peak_flops("fp16") / 1e12       # dense, 989.4
FP32_PEAK_TFLOPS = H200.peak_flops("fp32") / 1e12       # 66.9
BANDWIDTH_GBS = H200.bandwidth / 1e9                    # 4,800
#: the clock the datasheet's dense tensor peak assumes (989.4 TFLOP/s = 132 SMs x 4096 FLOP/clock
#: x 1,830 MHz; docs/measured/h200.md, "Matrix multiply")
TENSOR_PEAK_MHZ = 1830
#: PCIe 5.0 x16, one direction: 32 GT/s x 16 lanes x 128/130 (encoding) / 8 bits = 63.0 GB/s
PCIE5_X16_GBS = 32 * 16 * 128 / 130 / 8


# -- the figures, all through gpu_lessons.hardware.measured -----------------------------------------

def fig(key) -> float:
    """A figure of gpu_lessons/data/measured.toml, in its own unit."""
    return measured(key).value


def tflops_from_ms(key, n=8192) -> float:
    return 2 * n**3 / (fig(key) / 1e3) / 1e12


def fir_us(name) -> float:
    return fig(f"h200.capstone_fir.{name}_us")


def fir40_v4_issue_pct(kernel_us, clock_mhz) -> float:
    """The pipe model's issue-slot share for fir40_v4: instructions per warp x warps /
    (4 schedulers x 132 SMs x cycles); 2^26 floats, four per thread: 2^24 / 32 warps."""
    warps = 2**26 / 4 / 32
    slots = fig("h200.capstone_fir.fir40_v4_instructions_per_warp") * warps / (4 * H200.sms)
    return 100 * slots / (kernel_us * 1e-6 * clock_mhz * 1e6)


# -- what the lessons quote ------------------------------------------------------------------------

#: Words a lesson uses for round fractions, and their values.
WORDS = {"half": 1 / 2, "a third": 1 / 3, "three quarters": 3 / 4}


@dataclass(frozen=True)
class Quote:
    notebook: str                 # two-digit lesson number
    text: str                     # as the lesson's markdown writes it
    figures: tuple                # (number or word as written, getter), in any order
    rel: float = 0.0              # extra tolerance for figures the lesson calls "about"
    bound: str = ""               # "at most" ("within 8 %"), "at least" ("more than 2x")


SUSTAINED = "h200.gemm.fp16_8192_power_limited"

QUOTES = [
    Quote("01", "the copy reached 4,205 GB/s of the 4,800 GB/s datasheet figure\n(88 %)",
          (("4,205", lambda: fig("h200.copy.bandwidth_gbs")),
           ("88", lambda: 100 * fig("h200.copy.bandwidth_gbs") / BANDWIDTH_GBS))),
    Quote("01", "50.7 of 66.9 TFLOP/s", (("50.7", lambda: tflops_from_ms("h200.gemm.fp32_8192_ms")),)),
    Quote("02", "took 99.7 µs and\n52.5 µs: a ratio of 1.90",
          (("99.7", lambda: fig("h200.simt.branch_by_parity_us")),
           ("52.5", lambda: fig("h200.simt.branch_by_warp_us")),
           ("1.90", lambda: fig("h200.simt.branch_by_parity_us")
            / fig("h200.simt.branch_by_warp_us"))),),
    Quote("02", "the parity branch\n  took about 1.9× as long",
          (("1.9", lambda: fig("h200.simt.branch_by_parity_us")
            / fig("h200.simt.branch_by_warp_us")),)),
    Quote("03", "the caps 32, 64, 128 and 255 gave 1,000,\n832, 408 and 0 bytes",
          (("1,000", lambda: fig("h200.occ_regs.cap32_local_bytes")),
           ("832", lambda: fig("h200.occ_regs.cap64_local_bytes")),
           ("408", lambda: fig("h200.occ_regs.cap128_local_bytes")),
           (" 0 ", lambda: fig("h200.occ_regs.cap255_local_bytes")))),
    Quote("03", "About 5.8 TB/s for a copy whose two arrays total 32 MiB",
          (("5.8", lambda: fig("h200.copy_in_l2.bandwidth_gbs") / 1e3),)),
    Quote("03", "4.3 TB/s for 1 GiB", (("4.3", lambda: fig("h200.copy_1gib.bandwidth_gbs") / 1e3),)),
    Quote("04", "measured 3,834 GB/s at stride 1 and 2,753, 1,696, 967 and 428 GB/s at\nstrides 2, 4, "
          "8 and 32: 72 %, 44 %, 25 % and 11 % of stride 1",
          (("3,834", lambda: fig("h200.strided_copy.float_stride1_useful_gbs")),
           ("2,753", lambda: fig("h200.strided_copy.float_stride2_useful_gbs")),
           ("1,696", lambda: fig("h200.strided_copy.float_stride4_useful_gbs")),
           ("967", lambda: fig("h200.strided_copy.float_stride8_useful_gbs")),
           ("428", lambda: fig("h200.strided_copy.float_stride32_useful_gbs")),
           *((pct, lambda s=s: 100 * fig(f"h200.strided_copy.float_stride{s}_useful_gbs")
              / fig("h200.strided_copy.float_stride1_useful_gbs"))
             for pct, s in (("72", 2), ("44", 4), ("25", 8), ("11", 32))))),
    Quote("04", "Counting such fetches puts every stride within 13 % of the measurement",
          (("13", lambda: fig("h200.strided_copy.float_fetch_model_worst_error_pct")),),
          bound="at most"),
    Quote("04", "for 4-,\n8- and 16-byte loads, within 8 %",
          (("8", lambda: fig("h200.shared_load.worst_model_error_pct")),), bound="at most"),
    Quote("05", "The FP16 product reached 763.9 TFLOP/s (77 % of the 989 TFLOP/s dense peak)",
          (("763.9", lambda: tflops_from_ms("h200.gemm.fp16_8192_ms")),
           ("77", lambda: 100 * tflops_from_ms("h200.gemm.fp16_8192_ms") / FP16_PEAK_TFLOPS))),
    Quote("05", "eight more calls gave 736–762",
          (("736", lambda: fig("h200.gemm_repeats.fp16_8192_min_tflops")),
           ("762", lambda: fig("h200.gemm_repeats.fp16_8192_max_tflops")))),
    Quote("05", "the same product ran\nat 642 TFLOP/s",
          (("642", lambda: tflops_from_ms(f"{SUSTAINED}_ms")),)),
    Quote("05", "pulled the clock down to about 1,440 MHz",
          (("1,440", lambda: fig(f"{SUSTAINED}_sm_clock_mhz")),)),
    Quote("05", "The triad reached 4,346 GB/s (91 % of 4.8 TB/s)",
          (("4,346", lambda: fig("h200.triad.bandwidth_gbs")),
           ("91", lambda: 100 * fig("h200.triad.bandwidth_gbs") / BANDWIDTH_GBS))),
    Quote("07", "128 bytes per cycle per SM (measured on an H200)",
          (("128", lambda: fig("h200.shared_load.bytes_per_clock")),)),
    Quote("08", "back-to-back launches cost 6.05 µs, 10.97 µs with a sync after each, and\n0.70 µs per "
          "node of a CUDA graph",
          (("6.05", lambda: fig("h200.launch.back_to_back_us")),
           ("10.97", lambda: fig("h200.launch.synced_us")),
           ("0.70", lambda: fig("h200.launch.graph_per_kernel_us")))),
    Quote("08", "its seven steps of 1,000 back-to-back launches\nranged over 5.76–6.23 µs per launch",
          (("5.76", lambda: fig("h200.launch.back_to_back_fastest_us")),
           ("6.23", lambda: fig("h200.launch.back_to_back_slowest_us")))),
    Quote("08", "Pinned copies reached 55.2 GB/s host to device and 55.1 GB/s\nback (88 % of PCIe 5.0 "
          "x16's 63 GB/s)",
          (("55.2", lambda: fig("h200.host_copy.pinned_h2d_gbs")),
           ("55.1", lambda: fig("h200.host_copy.pinned_d2h_gbs")),
           ("88", lambda: 100 * fig("h200.host_copy.pinned_h2d_gbs") / PCIE5_X16_GBS),
           ("63", lambda: PCIE5_X16_GBS))),
    Quote("08", "pageable host-to-device copies 7.9 GB/s",
          (("7.9", lambda: fig("h200.host_copy.pageable_h2d_gbs")),)),
    Quote("08", "(≈ 6 µs on the H200)", (("6", lambda: fig("h200.launch.back_to_back_us")),)),
    Quote("09", "the same GEMM ran at about 1,440 MHz and 642 TFLOP/s, **65 %** of the datasheet "
          "peak though 82 % of the peak *at the clock it\nwas allowed*",
          (("1,440", lambda: fig(f"{SUSTAINED}_sm_clock_mhz")),
           ("642", lambda: tflops_from_ms(f"{SUSTAINED}_ms")),
           ("65", lambda: 100 * tflops_from_ms(f"{SUSTAINED}_ms") / FP16_PEAK_TFLOPS),
           ("82", lambda: 100 * tflops_from_ms(f"{SUSTAINED}_ms") / (
               FP16_PEAK_TFLOPS * fig(f"{SUSTAINED}_sm_clock_mhz") / TENSOR_PEAK_MHZ)))),
    Quote("09", "sustained mode, 1,425–1,455\nMHz, 642.0 TFLOP/s",
          (("1,425", lambda: fig(f"{SUSTAINED}_sm_clock_min_mhz")),
           ("1,455", lambda: fig(f"{SUSTAINED}_sm_clock_max_mhz")),
           ("642.0", lambda: tflops_from_ms(f"{SUSTAINED}_ms")))),
    Quote("09", "a large GEMM on an H200 reaches about 75 % in a burst\n  and 65 % under sustained load",
          (("75", lambda: 100 * fig("h200.gemm_repeats.fp16_8192_median_tflops") / FP16_PEAK_TFLOPS),
           ("65", lambda: 100 * tflops_from_ms(f"{SUSTAINED}_ms") / FP16_PEAK_TFLOPS))),
    # -- lesson 10: the mysteries' measured runs
    Quote("10", "The H200 measured the fixed version too: about 4× faster",
          (("4", lambda: fig("h200.strided_copy.float_stride8_us")
            / fig("h200.strided_copy.float_stride1_us")),), rel=0.02),
    Quote("10", "DRAM runs at only about a third of its peak",       # 8192² floats read and written
          (("a third", lambda: 2 * 8192**2 * 4 / (fig("h200.simt.transpose_tiled_us") * 1e-6)
            / H200.bandwidth),), rel=0.05),
    Quote("10", "Measured after the fix:\nmore than 2× faster",
          (("2", lambda: fig("h200.simt.transpose_tiled_us")
            / fig("h200.simt.transpose_tiled_padded_us")),), bound="at least"),
    Quote("10", "the run reaches about three quarters of the FP32 peak",
          (("three quarters", lambda: tflops_from_ms("h200.gemm.fp32_8192_ms") / FP32_PEAK_TFLOPS),),
          rel=0.05),
    Quote("10", "About 77 % of the dense FP16 peak, measured on a\nrested GPU at its full clock; cuBLAS "
          "reaches 74–77 % on this GPU. Under sustained load the power\nlimit lowers the clock and the "
          "same product runs at about 65 %",
          (("77 % of", lambda: 100 * tflops_from_ms("h200.gemm.fp16_8192_ms") / FP16_PEAK_TFLOPS),
           ("74", lambda: 100 * fig("h200.gemm_repeats.fp16_8192_min_tflops") / FP16_PEAK_TFLOPS),
           ("77 % on", lambda: 100 * fig("h200.gemm_repeats.fp16_8192_max_tflops") / FP16_PEAK_TFLOPS),
           ("65", lambda: 100 * tflops_from_ms(f"{SUSTAINED}_ms") / FP16_PEAK_TFLOPS))),
    Quote("10", "Measured on an H200 it took 1.50 ms, and Nsight Compute put the\nSM at 20 % and "
          "DRAM at 7 % of their peaks",
          (("1.50", lambda: fir_us("fir40_v1") / 1e3),
           ("20", lambda: fig("h200.capstone_fir.fir40_v1_sm_throughput_pct")),
           ("7", lambda: fig("h200.capstone_fir.fir40_v1_dram_throughput_pct")))),
    Quote("10", "The H200 measured each step: taps in\nshared memory 451.6 µs, in constant memory "
          "377.9 µs, and with float4 loads 243.8 µs, 6.2× faster\nthan the mystery",
          (("451.6", lambda: fir_us("fir40_v2")), ("377.9", lambda: fir_us("fir40_v3")),
           ("243.8", lambda: fir_us("fir40_v4")),
           ("6.2", lambda: fir_us("fir40_v1") / fir_us("fir40_v4")))),
    Quote("10", "On the H200 a float4 copy of the\nsame 512 MiB took 140.6 µs and the filter "
          "243.8 µs",
          (("140.6", lambda: fir_us("copy_f4")), ("243.8", lambda: fir_us("fir40_v4")))),
    Quote("10", "Nsight Compute\nreported SM throughput 86 % (its instruction issue) and DRAM 47 %",
          (("86", lambda: fig("h200.capstone_fir.fir40_v4_sm_throughput_pct")),
           ("47", lambda: fig("h200.capstone_fir.fir40_v4_dram_throughput_pct")))),
    Quote("10", "382 instructions per four elements fill 86 % of the issue slots in the\n227.0 µs "
          "Nsight Compute timed the kernel alone (79 % of the 243.8 µs",
          (("382", lambda: fig("h200.capstone_fir.fir40_v4_instructions_per_warp")),
           # in the kernel's own time at the clock Nsight Compute read
           ("86", lambda: fir40_v4_issue_pct(fig("h200.capstone_fir.fir40_v4_kernel_us"),
                                             fig("h200.capstone_fir.fir40_v4_sm_clock_mhz"))),
           ("227.0", lambda: fig("h200.capstone_fir.fir40_v4_kernel_us")),
           # in the time between the CUDA events, at the rated 1,980 MHz
           ("79", lambda: fir40_v4_issue_pct(fir_us("fir40_v4"), H200.boost_mhz)),
           ("243.8", lambda: fir_us("fir40_v4")))),
    Quote("10", "Its FLOP rate, though, is only about half the FP32 peak",   # 120 FLOPs per element
          (("half", lambda: 120 * 2**26 / (fir_us("fir40_v4") * 1e-6) / 1e12 / FP32_PEAK_TFLOPS),),
          rel=0.05),
    Quote("10", "this kernel\nkeeps DRAM only 7 % busy, and a pointer chase measured 340 ns "
          "unloaded",
          (("7", lambda: fig("h200.capstone_fir.fir40_v1_dram_throughput_pct")),
           ("340", lambda: fig("h200.pointer_chase.hbm_ns")))),
    Quote("10", "Nsight Compute found warps resident in only 84 % of\nthe cycles, about 240 cycles "
          "of each round",
          (("84", lambda: fig("h200.capstone_fir.fir40_v1_sm_active_pct")),
           ("240", lambda: fig("h200.capstone_fir.fir40_v1_round_idle_cycles")))),
    Quote("10", "a 2 µs kernel cannot amortise a 6 µs launch\nand a 5 µs sync",
          (("6", lambda: fig("h200.launch.back_to_back_us")),
           ("5", lambda: fig("h200.launch.synced_us") - fig("h200.launch.back_to_back_us")))),
    Quote("10", "cuBLAS's\nFP32 kernel measured about three quarters of that bound",
          (("three quarters", lambda: tflops_from_ms("h200.gemm.fp32_8192_ms") / FP32_PEAK_TFLOPS),),
          rel=0.05),
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
    """The number (or word) and half a unit of its last written digit."""
    s = written.strip()
    if s in WORDS:
        return WORDS[s], 0.0
    s = s.split()[0].replace(",", "")
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
        if quote.bound == "at most":             # "within 8 %", at the precision written
            assert actual <= value + half_digit, f"{written}: the record has {actual:.4g}"
        elif quote.bound == "at least":          # "more than 2x"
            assert actual > value, f"{written}: the record has {actual:.4g}"
        else:
            assert abs(value - actual) <= slack, f"{written}: the record has {actual:.6g}"


# -- the safety net ---------------------------------------------------------------------------------

#: A sentence reports a measurement when it has a measuring verb and it, or its paragraph, is
#: about the H200 or a measurement.
_VERB = re.compile(r"\b(measured|ran|runs at|took|reached|reaches|gave|cost|ranged|found|"
                   r"reported|put)\b")
_ABOUT = re.compile(r"\bH200\b|\b[Mm]easured\b|Nsight Compute")
_LESSON_REF = re.compile(r"(?i)\b(lesson|notebook|section)\s*$")
_NUMBER = re.compile(r"(?<![\w.^/])\d[\d,]*(?:\.\d+)?(?![\w³²])")

#: Numbers in sentences that report a measurement which are not measurements: datasheet figures,
#: sizes, settings, model outputs.  (notebook, number, why).  Lesson numbers ("lesson 09") are
#: skipped on their own.
NOT_MEASURED = {
    ("02", "4,194,304"): "elements",
    ("03", "160"): "live values the kernel keeps per thread",
    ("05", "1,980"): "rated SM clock",
    ("05", "2"): "seconds",
    ("05", "700"): "board power limit",
    ("07", "32"): "banks",
    ("07", "4"): "bytes per bank",
    ("07", "128"): "FP32 lanes per SM",
    ("07", "2"): "FLOPs per FMA",
    ("07", "100"): "kernels in the modelled step",
    ("08", "10"): "an estimate, said so in the sentence",
    ("08", "1"): "the formula 1 − (largest free block ÷ total free)",
    ("09", "1,980"): "rated SM clock",
    ("09", "2"): "seconds",
    ("09", "100"): "per cent",
    ("09", "50"): "published MFU of large runs (mfu.REFERENCE_RUNS, each with its source)",
    ("10", "6"): "the exponent of 1e-6, the FP32 GEMM's relative error (1.7e-6 in the record; "
                 "tests/models/test_capstone.py checks the order)",
    ("10", "4"): "the exponent of 2e-4, the FP16 GEMM's relative error (2.1e-4 in the record)",
    ("10", "8"): "warps per SM / register-blocking patch (8 × 8)",
    ("10", "32"): "tile size",
    ("10", "128"): "tile size",
    ("10", "256"): "tile size",
}


def _covered(number_span, spans):
    return any(a <= number_span[0] and number_span[1] <= b for a, b in spans)


def _unchecked(number: str) -> tuple[list[str], set]:
    """Numbers of lesson ``number`` in sentences that report a measurement and that no quote
    covers, and the NOT_MEASURED entries that excused others."""
    text = _lesson_markdown(number)
    spans = []
    for q in QUOTES:
        if q.notebook == number:
            start = text.find(_squash(q.text))
            if start >= 0:
                spans.append((start, start + len(_squash(q.text))))
    unchecked, used = [], set()
    for paragraph in re.finditer(r"[^¶]+", text):
        about = bool(_ABOUT.search(paragraph.group(0)))
        for sentence in re.finditer(r"(?:[^.!?]|[.!?](?=\S))+", paragraph.group(0)):  # "1.50" whole
            s = sentence.group(0)
            if "`" in s or not _VERB.search(s) or not (about or _ABOUT.search(s)):
                continue
            offset = paragraph.start() + sentence.start()
            for m in _NUMBER.finditer(s):
                where = (offset + m.start(), offset + m.end())
                if _covered(where, spans) or _LESSON_REF.search(s[:m.start()]):
                    continue
                if (number, m.group(0)) in NOT_MEASURED:
                    used.add((number, m.group(0)))
                else:
                    unchecked.append(f"{m.group(0)!r} in: {' '.join(s.split())[:120]}")
    return unchecked, used


LESSONS = [f"{n:02d}" for n in range(0, 11)]


@pytest.mark.parametrize("number", LESSONS)
def test_every_measured_number_in_a_lesson_is_checked(number):
    unchecked, _ = _unchecked(number)
    assert not unchecked, "measured figures not in QUOTES:\n" + "\n".join(unchecked)


def test_every_exception_is_still_needed():
    used = set().union(*(_unchecked(number)[1] for number in LESSONS))
    assert set(NOT_MEASURED) == used, sorted(set(NOT_MEASURED) - used)
