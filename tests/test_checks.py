"""Tests for gpu_lessons.checks and the question registry (gpu_lessons.questions).

Reference numbers are the datasheet figures (NVIDIA H100 whitepaper v1.04 Table 3; V100
whitepaper Table 1), with the arithmetic written out next to each, not the package's output.
"""

from __future__ import annotations

import math
import re

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nbclient import NotebookClient

from gpu_lessons import checks
from gpu_lessons.checks import (
    CheckFailed,
    Choice,
    Function,
    Mistake,
    Number,
    Question,
    Vary,
    check,
    evaluate,
    expected_ids,
    find,
    judge,
    observe,
    passed,
    questions,
)
from gpu_lessons.questions import CHAPTERS, audit, chapter_number, templates, validate

# H100 SXM5, whitepaper v1.04 Table 3: dense FP16 tensor 989.4 TFLOP/s, HBM3 3.35 TB/s,
# FP32 66.9 TFLOP/s, TF32 494.7, FP8 1978.9; 132 SMs x 128 FP32 cores at 1980 MHz boost.
H100_FP16, H100_BW, H100_FP32 = 989.4e12, 3.35e12, 66.9e12
RIDGE = 494.7 / 3.35                       # 147.67 FLOP/byte: dense TF32, the default
FP32_TFLOPS = 132 * 128 * 1980e6 * 2 / 1e12  # 66.908 TFLOP/s (whitepaper: 66.9)
CAPPED_TFLOPS = 132 * 128 * 1782e6 * 2 / 1e12  # 60.218 TFLOP/s at 90 % of 1980 MHz


def _forms(x: float) -> set[str]:
    """Ways an expected number could be printed."""
    return {repr(x), f"{x:.1f}", f"{x:.2f}", f"{x:.3g}", f"{x:.4g}", f"{x:.5g}", f"{x:g}"}


def _kernel_time(flops, bytes_moved, peak_flops, bandwidth):
    """Roofline time written out here, independently of the package."""
    compute = flops / peak_flops
    memory = bytes_moved / bandwidth
    return compute if compute > memory else memory


def _peak_flops(sms, cores_per_sm, clock_mhz):
    return sms * cores_per_sm * clock_mhz * 1e6 * 2.0


# -- the registry ---------------------------------------------------------------------------

def test_expected_ids_of_the_sample_chapters():
    assert expected_ids(5)[:3] == ["05.ridge_h100", "05.axpy_bound", "05.kernel_time"]
    assert expected_ids("ch01")[:2] == ["01.fp32_peak_capped", "01.peak_flops"]
    assert [q.id for q in questions("05")] == expected_ids(5)
    assert all(len(expected_ids(n)) >= 4 for n in range(1, 11))  # every chapter: 4+ questions


@pytest.mark.parametrize("given_, number", [(5, 5), ("5", 5), ("05", 5), ("ch05", 5),
                                           ("lesson05", 5), ("05_roofline", 5), ("CH10", 10), (1, 1)])
def test_chapter_names_normalise(given_, number):
    assert chapter_number(given_) == number


@pytest.mark.parametrize("bad", [0, 11, "ch11", "lesson11", "roofline", "", None, True, 5.5])
def test_bad_chapter_is_refused_with_the_allowed_range(bad):
    with pytest.raises(ValueError, match=r"chapter must be one of 1\.\.10"):
        questions(bad)


def test_unknown_question_id_names_close_ones():
    with pytest.raises(ValueError, match=r"'05\.ridge_h10' is not a known question.*05\.ridge_h100"):
        check("05.ridge_h10", 295.0)
    with pytest.raises(TypeError, match="question_id must be a string"):
        check(5, 295.0)


def test_mistake_needs_exactly_one_of_value_or_when():
    with pytest.raises(ValueError, match="exactly one of value= or when="):
        Mistake("k", "message")
    with pytest.raises(ValueError, match="exactly one of value= or when="):
        Mistake("k", "message", value=1.0, when=lambda a, r: True)


ALL = [q for n in CHAPTERS for q in questions(n)]
TEMPLATES = [q for n in CHAPTERS for q in templates(n)]


@pytest.mark.parametrize("q", TEMPLATES, ids=lambda q: q.id)
def test_every_variant_of_every_question_is_well_posed(q):
    """Rules for every question and every one of its variants (the full product of choices,
    also where it is larger than the sample a private bank's check draws): the reference
    computes and is finite, no named mistake coincides with the right answer, the answer is
    not the same for all variants (see gpu_lessons.questions.audit); and the stub reads as
    "not attempted"."""
    assert q.points > 0 and q.prompt and q.title
    assert audit.problems(q, limit=max(q.variants, audit.FULL_PRODUCT_LIMIT)) == []
    bound = q.bind()
    namespace = {"check": check}
    exec(compile(bound.stub(), f"<stub {q.id}>", "exec"), namespace)  # prints "not attempted"
    assert evaluate(bound, namespace[q.name]).status == checks.NOT_ATTEMPTED


def test_most_graded_points_vary_between_students():
    """The aim of variants: two students' answers differ for most points that are not
    already checked on random inputs."""
    graded = [q for q in TEMPLATES if not isinstance(q.answer, Function)]
    varied = [q for q in graded if q.variants > 1]
    assert sum(q.points for q in varied) >= 0.8 * sum(q.points for q in graded)


def test_variants_list_the_full_product_or_a_seeded_sample():
    q = find("05.ridge_h100")
    listed = list(audit.variants(q))
    assert len(listed) == q.variants == 6 and listed[0] == q.defaults()   # 2 GPUs x 3 precisions
    assert len({tuple(p.items()) for p in listed}) == 6
    big = next(t for t in TEMPLATES if t.variants > audit.FULL_PRODUCT_LIMIT)
    sample = list(audit.variants(big))
    assert len(sample) == audit.FULL_PRODUCT_LIMIT and sample[0] == big.defaults()
    assert sample == list(audit.variants(big))          # the same sample every time


_N = (Vary("n", (2, 3, 4), "a size"),)


def _toy(reference, *, mistakes=(), **kw):
    return Question(id="05.toy", name="toy", points=1, title="Toy", prompt="n = {n}",
                    vary=_N, answer=Number(reference=reference, units="x", mistakes=mistakes,
                                             **kw))


def test_the_audit_finds_ill_posed_variants():
    """The audit is not vacuous: each rule catches a question built to break it."""
    assert audit.problems(_toy(lambda n: n * 1.5)) == []
    assert "not a finite" in audit.problems(_toy(lambda n: math.inf if n == 3 else n))[0]
    assert "ZeroDivisionError" in audit.problems(_toy(lambda n: 1 / (n - 3)))[0]  # at n = 3
    assert "same answer" in audit.problems(_toy(lambda n: 7.0))[0]
    coincide = Mistake("double", "x2", value=lambda ref, n: 2 * ref if n != 4 else ref)
    found = audit.problems(_toy(lambda n: n * 1.5, mistakes=(coincide,)))
    assert len(found) == 1 and "{'n': 4}" in found[0] and "'double'" in found[0]
    assert "whole number" in audit.problems(_toy(lambda n: n / 2, integer=True, rtol=0))[0]
    n_a = Mistake("n_a", "does not apply to n = 2", value=lambda ref, n: None if n == 2 else 9.9)
    assert audit.problems(_toy(lambda n: n * 1.5, mistakes=(n_a,))) == []


def test_binding_fixes_the_parameters():
    q = find("05.ridge_h100")
    assert q.params == {"gpu": "h100", "precision": "tf32"}       # the registry's default
    pcie = q.bind({"gpu": "h100 pcie", "precision": "fp64"})
    assert pcie.params == {"gpu": "h100 pcie", "precision": "fp64"}
    assert "**H100 PCIe**" in pcie.prompt and "FP64" in pcie.prompt and "{" not in pcie.prompt
    assert pcie.answer.reference() == pytest.approx(25.6 / 2.0)      # datasheet: 25.6 TFLOP/s, 2 TB/s
    assert evaluate(pcie, 12.8).correct and not evaluate(q, 12.8).correct
    # a mistake message names the other H100 of the variant (SXM5: 33.5 TFLOP/s, 3.35 TB/s)
    r = evaluate(pcie, 33.5 / 3.35)
    assert r.mistake == "other_h100" and "H100 SXM5" in r.message
    assert pcie.bind({"gpu": "h100"}).params == {"gpu": "h100", "precision": "tf32"}  # from the template
    with pytest.raises(ValueError, match=r"precision='fp4' is not one of its choices"):
        q.bind({"precision": "fp4"})
    with pytest.raises(ValueError, match="no parameter named 'n'"):
        q.bind({"n": 3})


def test_prompts_take_the_right_article_for_each_gpu():
    q = find("07.tile_for_ridge")
    assert "of a **V100 SXM2**" in q.bind({"gpu": "v100"}).prompt
    assert "of an **H100 SXM5**" in q.bind({"gpu": "h100"}).prompt
    assert "of a **T4**" in q.bind({"gpu": "t4"}).prompt
    assert "of an **RTX 3090**" in q.bind({"gpu": "rtx 3090"}).prompt


def test_a_template_that_does_not_render_is_refused():
    broken = Question(id="05.toy", name="toy", points=1, prompt="struct {float x;} on {gpu}",
                      vary=(Vary("gpu", ("a", "b"), "gpu"),),
                      answer=Number(reference=lambda gpu: 1.0, units="x"))
    with pytest.raises(ValueError, match=r"05\.toy: its prompt.*literal brace"):
        validate((broken,), "toy")
    with pytest.raises(ValueError, match="choices repeat"):
        Vary("n", (1, 1), "n")
    fn = Question(id="05.toy", name="toy", points=1, prompt="p", vary=(Vary("n", (1, 2), "n"),),
                  answer=Function(reference=lambda x: x, inputs=lambda rng: {"x": 1},
                                  signature="toy(x)"))
    with pytest.raises(ValueError, match="does not vary"):
        validate((fn,), "toy")


# -- number questions -----------------------------------------------------------------------

def test_ridge_point_accepts_the_datasheet_ratio_within_one_percent():
    assert evaluate("05.ridge_h100", RIDGE).correct
    assert evaluate("05.ridge_h100", 148).correct          # rounded by hand
    assert evaluate("05.ridge_h100", RIDGE * 1.009).correct
    assert not evaluate("05.ridge_h100", RIDGE * 1.02).correct
    assert not evaluate("05.ridge_h100", RIDGE * 0.98).correct


def test_fp32_peak_at_a_capped_clock_from_cores():
    # 132 SMs x 128 lanes x 1782 MHz (90 % of the 1980 MHz boost) x 2 FLOPs = 60.2 TFLOP/s
    assert evaluate("01.fp32_peak_capped", CAPPED_TFLOPS).correct
    assert evaluate("01.fp32_peak_capped", 60.2).points == 1
    assert evaluate("01.fp32_peak_capped", 66.9).mistake == "boost_clock"   # the datasheet peak


def test_the_percent_and_fraction_slips_are_the_answer_over_or_times_100():
    """The shared mistakes: a percent answered as a fraction is the right one / 100, a fraction
    answered in percent is it x 100, whatever parameters the question passes."""
    from gpu_lessons.questions._common import fraction_as_percent, percent_as_fraction

    as_fraction, as_percent = percent_as_fraction(), fraction_as_percent()
    assert (as_fraction.key, as_fraction.value(42.0), as_fraction.value(42.0, gpu="h100")) == (
        "fraction", 0.42, 0.42)
    assert (as_percent.key, as_percent.value(0.25), as_percent.value(0.25, iters=3)) == (
        "percent", 25.0, 25.0)
    assert as_percent.message == "return a fraction between 0 and 1, not a percentage."
    assert fraction_as_percent("give a fraction.").message == "give a fraction."
    ref = find("10.float4_dram_fraction").answer.reference()
    r = evaluate("10.float4_dram_fraction", ref / 100)
    assert (r.status, r.mistake) == (checks.WRONG, "fraction")
    assert "the answer is wanted in percent" in r.message


@pytest.mark.parametrize("answer, key", [
    (2 * 494.7 / 3.35, "sparse_peak"),     # 2:4 sparse TF32 peak 989.4 TFLOP/s: 295.3
    (989.4 / 3.35, "sparse_peak"),         # the dense FP16 ridge, twice as fast, is the same 2x
    (494.7 / 2 / 3.35, "half"),            # the peak counted in multiply-adds: 73.8
    (66.9 / 3.35, "fp32_peak"),            # FP32 CUDA cores: 19.97
    (494.7 / 4.8, "h200_bandwidth"),       # H200's 4.8 TB/s: 103.1
    (378 / 2.0, "other_h100"),             # H100 PCIe: 378 TFLOP/s TF32, 2.0 TB/s: 189
    (494.7e12 / (3350 * 2**30), "gib"),    # bandwidth read as GiB/s: 137.5
    (3.35 / 494.7, "inverted"),            # bytes per FLOP: 0.006772
    (494.7 / 3350, "units"),               # TFLOP/s over GB/s: 0.1477
    (-RIDGE, "sign"),
])
def test_ridge_point_named_mistakes(answer, key):
    r = evaluate("05.ridge_h100", answer)
    assert (r.status, r.mistake, r.points) == (checks.WRONG, key, 0.0)
    with pytest.raises(CheckFailed) as info:
        check("05.ridge_h100", answer)
    assert isinstance(info.value, AssertionError)
    assert str(info.value) == r.message and r.message.startswith("✗ 05.ridge_h100: ")


def test_sparse_peak_message_says_so():
    assert "sparse" in evaluate("05.ridge_h100", 295.3).message


@pytest.mark.parametrize("answer, key", [
    (132 * 128 * 1.782e9 * 1 / 1e12, "fma"),           # one FLOP per clock: 30.1
    (132 * 128 * 1.98e9 * 2 / 1e12, "boost_clock"),    # the boost clock: 66.9
    (989.4, "tensor_peak"), (494.7, "tensor_peak"), (1978.9, "tensor_peak"),
    (132 * 1.782e9 * 2 / 1e12, "per_sm_lanes"),        # lanes per SM left out: 0.47
    (60.2e12, "units"), (60.2e3, "units"),
])
def test_fp32_peak_named_mistakes(answer, key):
    r = evaluate("01.fp32_peak_capped", answer)
    assert (r.status, r.mistake) == (checks.WRONG, key)


def test_unexplained_number_says_too_high_or_too_low_and_adds_the_hint():
    high, low = evaluate("05.ridge_h100", 400.0), evaluate("05.ridge_h100", 50.0)
    assert "too high" in high.message and "too low" in low.message
    assert high.mistake is None and find("05.ridge_h100").hint in high.message


@pytest.mark.parametrize("answer", ["295", "memory-bound", [295.3], {"a": 1}, None, True,
                                    float("nan"), float("inf"), 3 + 4j, print])
def test_number_question_rejects_non_numbers_without_crashing(answer):
    r = evaluate("05.ridge_h100", answer)
    assert r.status == checks.WRONG and "FLOP/byte" in r.message


def test_numpy_scalars_and_zero_d_arrays_are_numbers():
    import numpy as np

    assert evaluate("05.ridge_h100", np.float32(RIDGE)).correct
    assert evaluate("05.ridge_h100", np.array(RIDGE)).correct
    assert evaluate("05.ridge_h100", np.int64(148)).correct


def test_an_object_with_a_doctored_eq_gets_no_credit():
    class Agreeable(float):
        def __eq__(self, other):
            return True

        __hash__ = float.__hash__

    assert not evaluate("05.ridge_h100", Agreeable(1.0)).correct


# -- not attempted / pass / fail output ------------------------------------------------------

def test_ellipsis_is_not_attempted_and_does_not_raise(capsys):
    check("05.ridge_h100", ...)
    check("05.axpy_bound", ...)
    check("05.kernel_time", ...)
    out = capsys.readouterr().out
    assert out.count("not attempted") == 3
    r = evaluate("05.ridge_h100", ...)
    assert (r.status, r.points, r.max_points) == (checks.NOT_ATTEMPTED, 0.0, 2.0)


def test_stub_function_raising_not_implemented_is_not_attempted(capsys):
    def kernel_time(flops, bytes_moved, peak_flops, bandwidth):
        raise NotImplementedError

    check("05.kernel_time", kernel_time)
    assert "not attempted" in capsys.readouterr().out


def test_strict_mode_fails_an_unanswered_question():
    with pytest.raises(CheckFailed, match="not attempted"):
        check("05.ridge_h100", ..., strict=True)


def test_pass_prints_one_line_with_points(capsys):
    check("05.ridge_h100", RIDGE)
    assert capsys.readouterr().out == "✓ 05.ridge_h100: correct (2 points)\n"
    check("05.axpy_bound", "memory-bound")
    assert capsys.readouterr().out == "✓ 05.axpy_bound: correct (1 point)\n"


def test_passed_is_a_silent_boolean(capsys):
    assert passed("05.ridge_h100", RIDGE) is True
    assert passed("05.ridge_h100", 295.3) is False
    assert passed("05.ridge_h100", ...) is False
    assert capsys.readouterr().out == ""


def test_failure_renders_as_one_line_in_ipython():
    with pytest.raises(CheckFailed) as info:
        check("05.ridge_h100", 295.3)
    lines = info.value._render_traceback_()
    assert len(lines) == 1 and "sparse" in lines[0] and "\n" not in lines[0]


def test_checks_in_a_real_kernel():
    """In Jupyter: a stub prints and does not raise; a wrong answer shows one line."""
    cells = ["from gpu_lessons.checks import check",
             "check('05.ridge_h100', ...)",
             "check('05.ridge_h100', 295.3)",
             "check('05.ridge_h100', 494.7 / 3.35)"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=30, kernel_name="python3", allow_errors=True).execute()
    stub, wrong, right = nb.cells[1].outputs, nb.cells[2].outputs, nb.cells[3].outputs
    assert stub[0]["output_type"] == "stream" and "not attempted" in stub[0]["text"]
    (error,) = wrong
    assert error["output_type"] == "error" and error["ename"] == "CheckFailed"
    assert len(error["traceback"]) == 1 and "sparse" in error["traceback"][0]
    assert right[0]["text"].startswith("✓ 05.ridge_h100")


def test_tolerance_messages_say_the_tolerance_properly():
    # 04.row_pitch accepts 0.5 %: the message must not round that to "0 %"
    r = evaluate("04.row_pitch", 4.75 * 3.7)
    assert "not within 0.5 % of the expected value" in r.message
    # an exact count (rtol = 0) says so instead of quoting a tolerance
    r = evaluate("06.max_registers", 200)
    assert "not the expected count" in r.message
    for q in ALL:
        if isinstance(q.answer, Number):
            ref = q.answer.reference()
            message = evaluate(q, round(ref * 3.7) + 1 if q.answer.integer else ref * 3.7).message
            assert not re.search(r"within 0 ?%", message), message


def test_counts_reject_answers_that_are_not_whole_numbers():
    # H100, 128-thread blocks, 40 warps: 16,384 / 10 = 1,638 -> 1,536 registers per warp = 48
    r = evaluate("06.max_registers", 48.5)
    assert r.status == checks.WRONG and r.mistake == "not_integer"
    assert "expected a whole number of registers per thread, got 48.5" in r.message
    assert evaluate("06.max_registers", 48.0).correct and evaluate("06.max_registers", 48).correct
    import numpy as np

    assert evaluate("06.max_registers", np.int32(48)).correct
    counts = [q for q in ALL if isinstance(q.answer, Number) and q.answer.integer]
    assert {"02.resident_threads", "04.aos_sectors", "06.max_registers",
            "10.staged_buffer"} <= {q.id for q in counts}


def test_a_design_is_judged_against_the_occupancy_calculator():
    q = find("06.occupancy_design")  # H100; 96 registers, 40 at least; 2,048 B per warp; 50 %
    # 256 threads, 64 registers: 2,048 registers per warp, 8 warps per sub-partition of 16,384:
    # 32 warps = 4 blocks of 8 = 50 %, registers bind (shared: 8 x 2 KiB + 1 KiB = 17 KiB per
    # block, 13 blocks; warps: 8 blocks; blocks: 32)
    assert evaluate(q, (256, 64, "registers")).correct
    assert evaluate(q, [256, 64, "Registers"]).correct          # a list, any spelling
    assert evaluate(q, (256, 64, "warps")).mistake == "limiter"
    # 96 registers: 3,072 per warp, 5 per sub-partition = 20 warps -> 2 blocks = 16 warps, 25 %
    r = evaluate(q, (256, 96, "registers"))
    assert r.mistake == "occupancy" and "16 warps per SM resident: 25 %" in r.message
    assert evaluate(q, (256, 32, "registers")).mistake == "registers_range"
    assert evaluate(q, (100, 64, "registers")).mistake == "block_size"
    assert "threads_per_block must be a whole number" in evaluate(q, (256.5, 64, "warps")).message
    assert "limiter must be one of" in evaluate(q, (256, 64, "bandwidth")).message
    assert "expected a tuple (threads_per_block" in evaluate(q, 256).message


def _pooled(threads_per_block, registers_per_thread, shared_mem_per_block, *, round_warps):
    """A learner's occupancy function that draws registers from one pool of 65,536."""
    warps = -(-threads_per_block // 32)
    per_warp = registers_per_thread * 32
    if round_warps:
        per_warp = -(-per_warp // 256) * 256
    limits = [64 // warps, 32, 65536 // (per_warp * warps)]
    if shared_mem_per_block:
        limits.append(233_472 // (-(-(shared_mem_per_block + 1024) // 128) * 128))
    return min(limits) * warps / 64


def test_pooled_registers_are_named_in_the_occupancy_function():
    """The mistake the lesson teaches most: registers as one pool, thread by thread (40
    registers give 51 warps instead of 48), or rounded per warp but still pooled."""
    r = evaluate("06.occupancy_cc90", lambda **kw: _pooled(**kw, round_warps=False))
    assert r.mistake == "pooled_registers" and "sub-partitions" in r.message
    r = evaluate("06.occupancy_cc90", lambda **kw: _pooled(**kw, round_warps=True))
    assert r.mistake == "no_sub_partitions"


def test_the_shortcut_forward_flop_formula_is_named():
    """4·s·h² + 2·s²·h (multiply-adds) for attention and 8·s·h·i for the MLP, per layer."""
    def shortcut(batch, seq_len, d_model, n_layers, d_ff, vocab_size):
        b, s, h = batch, seq_len, d_model
        return n_layers * b * (4 * s * h * h + 2 * s * s * h + 8 * s * h * d_ff) \
            + 2 * b * s * h * vocab_size

    r = evaluate("09.forward_flops", shortcut)
    assert r.mistake == "shortcut_formula"
    assert "8·s·h² + 4·s²·h" in r.message and "4·s·h·d_ff FLOPs, not 8" in r.message


# -- choice questions ------------------------------------------------------------------------

def test_axpy_is_memory_bound_whatever_the_spelling():
    # 2 FLOPs / 12 bytes = 0.167 FLOP/byte, far below 66.9 / 3.35 = 20 FLOP/byte.
    assert H100_FP32 / H100_BW > 2 / 12
    for spelling in ("memory-bound", "Memory bound", "MEMORY_BOUND", " memory-bound "):
        assert evaluate("05.axpy_bound", spelling).correct


@pytest.mark.parametrize("answer, key", [("compute-bound", "compute"),
                                         ("latency bound", "latency")])
def test_axpy_named_mistakes(answer, key):
    assert evaluate("05.axpy_bound", answer).mistake == key


def test_unknown_option_lists_the_options():
    r = evaluate("05.axpy_bound", "io-bound")
    assert r.status == checks.WRONG and "'compute-bound'" in r.message


# -- function questions ----------------------------------------------------------------------

def test_kernel_time_reference_against_hand_derived_cases():
    ref = find("05.kernel_time").answer.reference
    # 2 TFLOP and 1 GB on an H100 at FP16: 2e12 / 989.4e12 = 2.0214 ms > 1e9 / 3.35e12 = 0.30 ms
    assert ref(2e12, 1e9, H100_FP16, H100_BW) == pytest.approx(2.0214e-3, rel=1e-4)
    # FP32 axpy over 1e8 elements: 2e8 FLOPs, 1.2e9 bytes -> memory: 1.2e9 / 3.35e12 = 358.2 µs
    assert ref(2e8, 1.2e9, H100_FP32, H100_BW) == pytest.approx(358.2e-6, rel=1e-4)


def test_peak_flops_reference_against_the_v100_whitepaper():
    ref = find("01.peak_flops").answer.reference
    # V100: 80 SMs x 64 cores x 1530 MHz x 2 = 15.67 TFLOP/s (whitepaper: 15.7)
    assert ref(80, 64, 1530) == pytest.approx(15.7e12, rel=0.005)


def test_correct_functions_pass(capsys):
    check("05.kernel_time", _kernel_time)
    check("01.peak_flops", _peak_flops)
    out = capsys.readouterr().out
    assert "✓ 05.kernel_time: correct on all" in out and "✓ 01.peak_flops" in out


def _fails_with(qid, fn):
    r = evaluate(qid, fn)
    assert r.status == checks.WRONG, r.message
    return r


@pytest.mark.parametrize("fn, key", [
    (lambda flops, bytes_moved, peak_flops, bandwidth:
     flops / peak_flops + bytes_moved / bandwidth, "sum"),
    (lambda flops, bytes_moved, peak_flops, bandwidth:
     min(flops / peak_flops, bytes_moved / bandwidth), "min"),
    (lambda flops, bytes_moved, peak_flops, bandwidth: bytes_moved / bandwidth, "memory_only"),
    (lambda flops, bytes_moved, peak_flops, bandwidth: flops / peak_flops, "compute_only"),
    (lambda **kw: 1e6 * _kernel_time(**kw), "microseconds"),
    (lambda **kw: 1e3 * _kernel_time(**kw), "milliseconds"),
    (lambda **kw: None, "no_return"),
])
def test_kernel_time_named_mistakes(fn, key):
    assert _fails_with("05.kernel_time", fn).mistake == key


@pytest.mark.parametrize("fn, key", [
    (lambda sms, cores_per_sm, clock_mhz: sms * cores_per_sm * clock_mhz * 1e6, "fma"),
    (lambda sms, cores_per_sm, clock_mhz: sms * cores_per_sm * clock_mhz * 2, "mhz"),
    (lambda **kw: _peak_flops(**kw) / 1e12, "tflops"),
])
def test_peak_flops_named_mistakes(fn, key):
    assert _fails_with("01.peak_flops", fn).mistake == key


def test_first_failing_input_is_reported():
    q = find("05.kernel_time")
    cases = q.answer.make_cases(q.id)

    def wrong_when_big(flops, bytes_moved, peak_flops, bandwidth):
        if bytes_moved > 5e10:  # only the largest transfers: a few percent of the inputs
            return bytes_moved / bandwidth
        return _kernel_time(flops, bytes_moved, peak_flops, bandwidth)

    first = next(c for c in cases if not math.isclose(wrong_when_big(**c), _kernel_time(**c),
                                                      rel_tol=1e-9))
    r = _fails_with("05.kernel_time", wrong_when_big)
    assert f"bytes_moved={first['bytes_moved']!r}" in r.message
    assert f"flops={first['flops']!r}" in r.message


@pytest.mark.parametrize("qid, fn", [
    # wrong only for GPUs with more than 190 SMs (5% of the random inputs)
    ("01.peak_flops", lambda sms, cores_per_sm, clock_mhz:
     _peak_flops(min(sms, 190), cores_per_sm, clock_mhz)),
    # wrong only for a single-SM part (an edge case)
    ("01.peak_flops", lambda sms, cores_per_sm, clock_mhz:
     _peak_flops(sms, cores_per_sm, clock_mhz) if sms > 1 else 0.0),
    # wrong only when the clock has a fractional MHz (int() truncation)
    ("01.peak_flops", lambda sms, cores_per_sm, clock_mhz:
     _peak_flops(sms, cores_per_sm, int(clock_mhz))),
    # wrong only for a kernel that moves no bytes
    ("05.kernel_time", lambda flops, bytes_moved, peak_flops, bandwidth:
     _kernel_time(flops, bytes_moved, peak_flops, bandwidth) if bytes_moved else 0.0),
    # wrong only on the B200 (8 TB/s), one GPU of twelve
    ("05.kernel_time", lambda flops, bytes_moved, peak_flops, bandwidth:
     _kernel_time(flops, bytes_moved, peak_flops, min(bandwidth, 5e12))),
    # crashes only for very high intensity
    ("05.kernel_time", lambda flops, bytes_moved, peak_flops, bandwidth:
     _kernel_time(flops, bytes_moved, peak_flops, bandwidth)
     if flops < 3000 * bytes_moved else 1 / 0),
])
def test_function_wrong_on_a_rare_input_is_caught(qid, fn):
    _fails_with(qid, fn)


def test_function_that_raises_reports_the_exception():
    def by_intensity(flops, bytes_moved, peak_flops, bandwidth):
        intensity = flops / bytes_moved  # ZeroDivisionError for a kernel that moves no bytes
        return max(intensity * bytes_moved / peak_flops, bytes_moved / bandwidth)

    r = _fails_with("05.kernel_time", by_intensity)
    assert "ZeroDivisionError" in r.message and "bytes_moved=0.0" in r.message


def test_not_a_function_for_a_function_question():
    assert "expected a function" in _fails_with("05.kernel_time", 3.0).message


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_any_grading_seed_passes_a_correct_function(seed):
    q = find("05.kernel_time")
    cases = q.answer.make_cases(q.id, seed=seed)
    outputs = checks.probe(_kernel_time, cases)
    assert judge(q, {"kind": "function", "outputs": outputs}, cases).correct


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rel=st.floats(1e-6, 10.0))
def test_any_grading_seed_fails_a_systematically_off_function(seed, rel):
    q = find("05.kernel_time")
    cases = q.answer.make_cases(q.id, seed=seed)
    outputs = checks.probe(lambda **kw: _kernel_time(**kw) * (1 + rel), cases)
    assert not judge(q, {"kind": "function", "outputs": outputs}, cases).correct


def test_grading_seed_changes_the_random_inputs_but_not_the_edge_cases():
    spec = find("05.kernel_time").answer
    a, b = spec.make_cases("05.kernel_time"), spec.make_cases("05.kernel_time", seed="grade:0")
    assert a == spec.make_cases("05.kernel_time")  # reproducible for the learner
    assert a[:3] == b[:3] and a[3:] != b[3:]


# -- feedback never gives the answer away ----------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(u=st.one_of(st.floats(-0.9, -0.012), st.floats(0.012, 50.0)),
       qid=st.sampled_from(["05.ridge_h100", "01.fp32_peak_capped"]))
def test_wrong_numbers_never_print_the_expected_value(u, qid):
    expected = RIDGE if qid == "05.ridge_h100" else CAPPED_TFLOPS
    r = evaluate(qid, expected * (1 + u))
    assert r.status == checks.WRONG
    assert not any(form in r.message for form in _forms(expected)), r.message


def test_named_mistakes_and_unit_slips_never_print_the_expected_value():
    for qid, expected in (("05.ridge_h100", RIDGE), ("01.fp32_peak_capped", CAPPED_TFLOPS)):
        spec = find(qid).answer
        tries = [m.value(expected) if callable(m.value) else m.value
                 for m in spec.mistakes if m.value is not None]
        tries += [expected * 10.0**p for p in (-12, -9, -6, -3, 3, 6, 9, 12)]
        tries += [989.4, 494.7, 1978.9, -expected, 0.0, 1.0]
        for answer in tries:
            r = evaluate(qid, answer)
            assert r.status == checks.WRONG
            assert not any(form in r.message for form in _forms(expected)), r.message


def test_wrong_choices_never_name_the_right_one():
    for answer in ("compute-bound", "latency-bound"):
        message = evaluate("05.axpy_bound", answer).message.lower()
        assert not re.search(r"memory[\s_\-]?bound", message), message


@settings(max_examples=60, deadline=None)
@given(rel=st.floats(1e-6, 5.0), kind=st.sampled_from(["scale", "sum", "min", "const"]))
def test_wrong_functions_never_print_the_expected_output(rel, kind):
    q = find("05.kernel_time")

    def learner(flops, bytes_moved, peak_flops, bandwidth):
        t = _kernel_time(flops, bytes_moved, peak_flops, bandwidth)
        return {"scale": t * (1 + rel), "sum": flops / peak_flops + bytes_moved / bandwidth,
                "min": min(flops / peak_flops, bytes_moved / bandwidth), "const": rel}[kind]

    r = evaluate(q.id, learner)
    assert r.status == checks.WRONG
    # What is left after removing the echoed input and the learner's own return value:
    rest = re.sub(r"kernel_time\([^)]*\)", "", r.message)
    rest = re.sub(r"returned \S+", "", rest)
    for case in q.answer.make_cases(q.id):
        e = _kernel_time(**case)
        assert repr(e) not in rest and f"{e:.6g}" not in rest, r.message


# -- observe: answers as plain data ----------------------------------------------------------

@given(st.one_of(st.integers(-10**12, 10**12), st.floats(allow_nan=False),
                 st.text(max_size=50), st.booleans()))
def test_observe_keeps_plain_values(value):
    obs = observe(value)
    kind = {bool: "bool", int: "number", float: "number", str: "str"}[type(value)]
    assert obs["kind"] == kind and obs["value"] == value


def test_observe_strips_subclasses():
    class Loud(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    obs = observe(Loud("compute-bound"))
    assert type(obs["value"]) is str and obs["value"] != "memory-bound"
    assert observe(...) == {"kind": "ellipsis"}
    assert observe([1, 2.5])["kind"] == "seq"
    assert observe(object())["kind"] == "other"


# -- every variant keeps the guarantees ------------------------------------------------------

def _forms_of(x: float) -> set[str]:
    """Ways a reference could be printed; small whole numbers (below 100) are prose."""
    if float(x).is_integer() and abs(x) < 100:
        return set()
    forms = {repr(x), f"{x:.3g}", f"{x:.4g}", f"{x:.5g}", f"{x:g}", f"{x:,.0f}", f"{x:.2f}"}
    return {f for f in forms if len(f.replace(".", "").replace(",", "").strip("0")) >= 2}


@pytest.mark.parametrize("q", [q for q in TEMPLATES if q.variants > 1], ids=lambda q: q.id)
def test_named_mistakes_of_other_variants_are_named_and_never_print_the_answer(q):
    """The guarantees of the lesson's own numbers, for eight variants of every question: each
    named mistake is reported by its name (or an earlier one that gives the same answer),
    and no feedback prints the expected value."""
    for params in list(audit.variants(q))[1:9]:
        bound = q.bind(params)
        spec = bound.answer
        keys = [m.key for m in spec.mistakes]
        if isinstance(spec, Number):
            ref = spec.reference()
            for m in spec.mistakes:
                if m.value is None:
                    continue
                alt = m.value(ref) if callable(m.value) else m.value
                if alt is None:
                    continue
                r = evaluate(bound, alt)
                assert r.status == checks.WRONG, (params, m.key)
                assert r.mistake in [*keys[:keys.index(m.key) + 1], "units", "sign"], \
                    (params, m.key, r.mistake)
                assert not any(re.search(rf"(?<![\w.,]){re.escape(f)}(?![\w])", r.message)
                               for f in _forms_of(ref)), (params, r.message)
        elif isinstance(spec, Choice):
            right = spec.reference()
            for m in spec.mistakes:
                wrong = m.value() if callable(m.value) else m.value
                if wrong is None:
                    continue
                r = evaluate(bound, wrong)
                assert r.mistake == m.key, (params, m.key, r.mistake)
                assert repr(right) not in r.message, (params, r.message)
        else:
            for m in spec.mistakes:
                assert evaluate(bound, m.value()).mistake == m.key, (params, m.key)
