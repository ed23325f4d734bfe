"""Predict-then-observe: guesses are recorded and checked, answers come from the models and
agree with hand derivations, and every prediction a lesson makes is registered and revealed."""

import json
import re
from pathlib import Path

import pytest

from gpu_lessons import predict as P

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh_session():
    P._GUESSES.clear()
    yield
    P._GUESSES.clear()


# Hand derivations, from datasheet figures and the formulas the lessons teach (not from the code).
HAND = {
    # H100 SXM5 whitepaper v1.04 Table 3: 989.4 TFLOP/s dense FP16 tensor, 66.9 FP32
    "00.tensor_vs_fp32": 989.4 / 66.9,
    # one SM: 128 lanes x 1.98 GHz x 2; one core: 2 FMA units x 16 lanes x 2 x 3.0 GHz
    "01.sm_vs_core": (128 * 1.98e9 * 2) / (2 * 16 * 2 * 3.0e9),
    # 1000 passes x 64 floats x 4 B written through vs 64 x 4 B written back once
    "03.local_write_ratio": 1000 * 64 * 4 / (64 * 4),
    # 32 lanes x 16 B = 512 B = 16 sectors of 32 B, one touched float in each
    "04.stride4_sectors": 16,
    # intensity N/3 = A100 ridge 312e12 / 2.039e12 -> N = ceil(3 x 153.02) = 460
    "05.gemm_ridge_n": 460,
    # I = 4 + 1 = 5 instructions per round, T = I - 1 + 400 = 404 cycles: T / I
    "06.knee_ilp1": 404 / 5,
    # FP16 tiled 4096^3: intensity = N / (2*ceil(N/T) + 1); >= 295.34 needs ceil(N/T) <= 6,
    # i.e. T >= 4096/6 = 682.7 -> 683
    "07.fp16_tile": 683,
    # (6.05 us launch, the H200 record's median back-to-back launch - 2 us fixed) / 0.05 us per item
    "08.launch_batch": (6.05 - 2.0) / 0.05,
}


@pytest.mark.parametrize("pid,expected", HAND.items())
def test_numeric_answers_match_hand_derivations(pid, expected):
    assert P.answer(pid) == pytest.approx(expected, rel=2e-3)


def test_choice_answers():
    # 132 SMs x 65,536 registers x 4 B = 33 MiB < 50 MiB of L2 (H100 whitepaper Table 3)
    assert P.answer("03.registers_or_l2") == "L2"
    # 40 x 32 = 1,280 registers per warp; 16,384 // 1,280 = 12 warps per sub-partition, 48 per
    # SM < 64 warp slots; 4 KiB x 6 blocks fits easily in 228 KiB: registers bind
    assert P.answer("06.first_limit") == "registers"


def test_divergence_ratio_is_close_to_two():
    # both paths of equal length run one after the other: the branch part doubles, the shared
    # prologue does not, so the ratio sits just below 2 for long paths
    assert 1.9 < P.answer("02.parity_over_warp") < 2.0


def test_half_mfu_tokens_from_six_n():
    # 6N estimate with N = 6.74e9 parameters (Llama 2 7B) plus attention: the exact count lies
    # within 20 % of 0.5 x 8 x 312e12 / (6 x 6.74e9)
    six_n = 0.5 * 8 * 312e12 / (6 * 6.74e9)
    assert P.answer("09.half_mfu_tokens") == pytest.approx(six_n, rel=0.2)


def test_predict_records_and_reveal_compares(capsys):
    P.predict("00.tensor_vs_fp32", 4)
    assert "Recorded your guess" in capsys.readouterr().out
    r = P.reveal("00.tensor_vs_fp32")
    assert r.guess == 4.0 and "1/3.7" in r.verdict


def test_close_guess_and_right_choice():
    P.predict("06.knee_ilp1", 80)
    assert P.reveal("06.knee_ilp1").verdict.startswith("close")
    P.predict("06.first_limit", "  Registers ")
    assert P.reveal("06.first_limit").verdict == "right"
    P.predict("03.registers_or_l2", "registers")
    assert "not quite" in P.reveal("03.registers_or_l2").verdict


def test_no_guess(capsys):
    P.predict("06.first_limit", ...)
    assert "No guess recorded" in capsys.readouterr().out
    r = P.reveal("06.first_limit")
    assert r.guess is None and "no guess" in r.verdict


def test_a_later_ellipsis_forgets_the_guess():
    P.predict("06.knee_ilp1", 10)
    P.predict("06.knee_ilp1")
    assert P.reveal("06.knee_ilp1").guess is None


@pytest.mark.parametrize("pid,guess,exc,words", [
    ("06.knee_ilp1", "ten", TypeError, "must be a number"),
    ("06.knee_ilp1", True, TypeError, "must be a number"),
    ("06.knee_ilp1", float("nan"), ValueError, "finite"),
    ("06.first_limit", "the registers", ValueError, "'registers'"),
    ("06.first_limit", 3, TypeError, "must be one of"),
])
def test_bad_guesses_name_the_problem(pid, guess, exc, words):
    with pytest.raises(exc, match=words):
        P.predict(pid, guess)


def test_unknown_id_lists_the_known_ones():
    with pytest.raises(ValueError, match=re.escape("06.first_limit")):
        P.reveal("06.first_limt")
    with pytest.raises(TypeError, match="prediction id"):
        P.predict(6, 1)
def _code_cells(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def test_lessons_predict_then_reveal_registered_ids():
    """Every predict() in a lesson names a registered id and is revealed later in the same
    notebook; lessons 01-09 each make at least one real prediction."""
    call = re.compile(r"""\b(predict|reveal)\(\s*["']([^"']+)["']""")
    with_prediction = set()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        order = [m.groups() for cell in _code_cells(path) for m in call.finditer(cell)]
        predicted = [pid for kind, pid in order if kind == "predict"]
        for pid in predicted:
            assert pid in P.PREDICTIONS, f"{path.name}: {pid} is not registered"
            first = order.index(("predict", pid))
            assert ("reveal", pid) in order[first:], f"{path.name}: {pid} is never revealed"
        if predicted:
            with_prediction.add(path.name[:2])
    assert {f"{n:02d}" for n in range(1, 10)} <= with_prediction
