"""Per-student puzzle variants: every public worked kernel fails every variant, judged as the
grader judges it (source text, a 64-bit key-derived seed), and a kernel written for the
variant — the worked algorithm, adapted by hand below — passes within the same budgets."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest

from gpu_lessons import puzzles
from gpu_lessons.grading.puzzle_eval import puzzle_seed
from gpu_lessons.puzzles import variants

ROOT = Path(__file__).resolve().parents[2]
SEED = puzzle_seed("variants-test", 4, "ann")


def _worked():
    spec = importlib.util.spec_from_file_location("puzzle_kernels",
                                                  ROOT / "solutions" / "puzzle_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WORKED = _worked()


def _source(puzzle_id: str) -> str:
    return inspect.getsource(getattr(WORKED, puzzles.find(puzzle_id).kernel_name))


def _choices(puzzle_id: str) -> dict:
    return {c: getattr(WORKED, c.upper()) for c in puzzles.find(puzzle_id).choices}


def _constants() -> dict:
    return {k: v for k, v in vars(WORKED).items() if type(v) in (int, float) and k.isupper()}


def test_every_puzzle_has_variants_that_change_its_spec():
    for p in puzzles.puzzles():
        found = variants.variants(p.id)
        assert len(found) >= 2, p.id
        specs = {puzzles.find(v.id).spec for v in found}
        assert len(specs) == len(found) and p.spec not in specs, p.id
        for v in found:
            q = puzzles.find(v.id)
            assert q.kernel_name == p.kernel_name and q.params == p.params
            assert q.budgets == p.budgets and q.sizes == p.sizes
            assert "Your variant" in q.describe() and q.spec in q.describe()


@pytest.mark.parametrize("puzzle_id", [p.id for p in puzzles.puzzles()])
def test_the_public_worked_kernel_fails_every_variant(puzzle_id):
    source = _source(puzzle_id)
    assert puzzles.evaluate(puzzle_id, source, seed=SEED, constants=_constants(),
                            **_choices(puzzle_id)).passed  # the lesson's own spec: it passes
    for v in variants.variants(puzzle_id):
        result = puzzles.evaluate(v.id, source, seed=SEED, constants=_constants(),
                                  **_choices(puzzle_id))
        assert not result.passed and not result.correct, (v.id, result.message)
        assert result.failure == "wrong", (v.id, result.message)


# The worked kernel adapted to one variant: (variant id, [(old text, new text), ...]).
ADAPTED = [
    ("map@times3", [("a[i] + 10", "a[i] * 3")]),
    ("zip@minus", [("a[i] + b[i]", "a[i] - b[i]")]),
    ("histogram_shared@reversed", [("t.atomic_add(bins, x[i], 1)",
                                    "t.atomic_add(bins, 15 - x[i], 1)")]),
    ("aos_to_soa@yzx", [("x[i] = tile[3 * tid] ", "x[i] = tile[3 * tid + 2] "),
                        ("y[i] = tile[3 * tid + 1]", "y[i] = tile[3 * tid]"),
                        ("z[i] = tile[3 * tid + 2]", "z[i] = tile[3 * tid + 1]")]),
    ("transpose@turn_right", [("a[(t.block_idx.y * 32 + ty) * n",
                               "a[(n - 1 - (t.block_idx.y * 32 + ty)) * n")]),
    ("matmul_tiled@a_squared", [("        sa[ty, tx] = a[row * n + k0 + tx]\n",
                                 "        v = a[row * n + k0 + tx]\n"
                                 "        sa[ty, tx] = v * v\n")]),
    ("reduce@squares", [("    sdata[tid] = x[t.block_idx.x * 256 + tid]\n",
                         "    v = x[t.block_idx.x * 256 + tid]\n    sdata[tid] = v * v\n")]),
    ("segmented_sum@affine", [("acc[...] = acc + x[i]", "acc[...] = acc + 2 * x[i] + 1")]),
]


@pytest.mark.parametrize("variant_id, edits", ADAPTED, ids=[v for v, _ in ADAPTED])
def test_a_kernel_written_for_the_variant_passes(variant_id, edits):
    base = variant_id.split("@")[0]
    source = _source(base)
    for old, new in edits:
        assert old in source, (variant_id, old)
        source = source.replace(old, new)
    result = puzzles.evaluate(variant_id, source, seed=SEED, constants=_constants(),
                              **_choices(base))
    assert result.passed, result.message
    assert not puzzles.evaluate(base, source, seed=SEED, constants=_constants(),
                                **_choices(base)).passed  # and it no longer fits the lesson's


def test_bad_variant_ids_are_refused_by_name():
    with pytest.raises(ValueError, match=r"no variant 'nope'.*times3"):
        puzzles.find("map@nope")
    with pytest.raises(ValueError, match="no puzzle"):
        puzzles.find("nope@times3")
    with pytest.raises(TypeError, match="puzzle_id"):
        variants.variants(3)
