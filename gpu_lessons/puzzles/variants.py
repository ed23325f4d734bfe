"""Per-student variants of the kernel puzzles, for graded work.

The worked kernels are public (``solutions/puzzle_kernels.py``), so a puzzle graded as the
lesson states it rewards pasting them.  In a release each graded puzzle is a **variant**
whose spec differs from the lesson's so that the public kernel computes the wrong output:
another operator or constant (``out = 10 - a`` for ``out = a + 10``), a transformed input
(the sum of ``x * x`` for the sum of ``x``; a product with ``a * a``), another layout (a
transpose that also turns the matrix: ``a.reshape(n, n)[::-1].T``), a permuted structure
(``aos_to_soa`` with its fields in another order), a histogram of other bins.  The
signature, the launch, the sizes and the budgets stay the lesson's, so a kernel written for
the variant — the same algorithm, adapted — passes within the same budgets, and the lesson's
teaching carries over unchanged.

A variant's id is ``"<puzzle>@<key>"`` (``"transpose@turn_right"``):
``gpu_lessons.puzzles.find``, ``evaluate``, ``check`` and ``show`` take it like a plain id,
and the kernel keeps the plain puzzle's name (``transpose_kernel``).  Which variant a
student gets is drawn from the release's secret like the questions' numbers
(``gpu_lessons.assignments.draw_puzzle``).  What this protects: the public kernels
and the lesson's own spec earn no graded mark (``tests/puzzles/test_puzzle_variants.py`` runs every
public kernel against every variant).  What it does not: a student who understands the
public kernel can adapt it to their variant in minutes — that is the skill the puzzle asks
for; and the variant is visible in the student's own notebook.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._core import Puzzle


@dataclass(frozen=True)
class Variant:
    """One variant of a puzzle: its spec is the lesson's with each ``(old, new)`` of
    ``edits`` replaced (every occurrence); ``what`` says in words how it differs."""

    puzzle: str
    key: str
    what: str
    edits: tuple[tuple[str, str], ...]

    @property
    def id(self) -> str:
        return f"{self.puzzle}@{self.key}"

    def spec(self, base_spec: str) -> str:
        text = base_spec
        for old, new in self.edits:
            if old not in text:
                raise ValueError(f"variant {self.id}: {old!r} is not in the spec {base_spec!r}")
            text = text.replace(old, new)
        if text == base_spec:
            raise ValueError(f"variant {self.id} does not change the spec")
        return text


@dataclass(frozen=True)
class VariantPuzzle(Puzzle):
    """A puzzle with a variant's spec; the kernel keeps the plain puzzle's name."""

    base: str = ""
    variant: str = ""
    what: str = ""

    @property
    def kernel_name(self) -> str:
        return f"{self.base}_kernel"

    def describe(self) -> str:
        return (f"**Your variant ({self.variant}, graded).** {self.what} The spec below is "
                f"yours; it differs from the lesson's.\n\n" + super().describe())


def _family(ids, *variants):
    return {pid: tuple(Variant(pid, key, what, tuple(edits)) for key, what, edits in variants)
            for pid in ids}


VARIANTS: dict[str, tuple[Variant, ...]] = {
    **_family(("map", "guard", "map_2d", "blocks"),
              ("times3", "Multiply by 3 instead of adding 10.", [("a + 10", "a * 3")]),
              ("from10", "Subtract from 10 instead of adding 10.", [("a + 10", "10 - a")]),
              ("plus17", "Add 17 instead of 10.", [("a + 10", "a + 17")])),
    **_family(("zip",),
              ("minus", "Subtract b instead of adding it.", [("a + b", "a - b")]),
              ("times", "Multiply instead of adding.", [("a + b", "a * b")]),
              ("twice_a", "Add b to twice a.", [("a + b", "2 * a + b")])),
    **_family(("broadcast",),
              ("minus", "Subtract instead of adding.", [("a[:, None] + b", "a[:, None] - b")]),
              ("times", "Multiply instead of adding.", [("a[:, None] + b", "a[:, None] * b")])),
    **_family(("blocks_2d",),
              ("times3", "Multiply by 3 instead of 2.", [("a * 2", "a * 3")]),
              ("from2", "Subtract from 2 instead of doubling.", [("a * 2", "2 - a")])),
    **_family(("split_work",),
              ("swapped_ops", "Other operations on each array.",
               [("a * 2, b + 1", "a + 2, b * 3")]),
              ("negated", "Other operations on each array.",
               [("a * 2, b + 1", "1 - a, 2 * b")])),
    **_family(("stencil",),
              ("difference", "The right neighbour is subtracted.",
               [("+ np.r_[x[1:], 0]", "- np.r_[x[1:], 0]")]),
              ("weighted", "The centre counts twice.", [("out = x +", "out = 2 * x +")])),
    **_family(("dot",),
              ("squares", "The dot product of a with b * b.", [("a @ b", "a @ (b * b)")]),
              ("distance", "The squared distance between a and b.",
               [("a @ b", "(a - b) @ (a - b)")])),
    **_family(("histogram_global", "histogram_shared"),
              ("reversed", "Bin 15 - x instead of x.", [("bincount(x,", "bincount(15 - x,")]),
              ("rotated", "Bin (x + 5) % 16 instead of x.",
               [("bincount(x,", "bincount((x + 5) % 16,")])),
    **_family(("aos_to_soa",),
              ("yzx", "The structure's fields are stored y, z, x.",
               [("aos[0::3], aos[1::3], aos[2::3]", "aos[2::3], aos[0::3], aos[1::3]")]),
              ("zxy", "The structure's fields are stored z, x, y.",
               [("aos[0::3], aos[1::3], aos[2::3]", "aos[1::3], aos[2::3], aos[0::3]")])),
    **_family(("transpose_naive", "transpose_tiled", "transpose"),
              ("turn_right", "Transpose the matrix with its rows in reverse order (a quarter "
               "turn clockwise).", [("a.reshape(n, n).T", "a.reshape(n, n)[::-1].T")]),
              ("turn_left", "Transpose the matrix with its columns in reverse order (a "
               "quarter turn anticlockwise).",
               [("a.reshape(n, n).T", "a.reshape(n, n)[:, ::-1].T")]),
              ("anti", "Transpose across the other diagonal.",
               [("a.reshape(n, n).T", "a.reshape(n, n)[::-1, ::-1].T")])),
    **_family(("matmul_naive", "matmul_tiled", "matmul_register"),
              ("a_squared", "Multiply a * a (element by element) by b.",
               [("a.reshape(n, n) @", "(a * a).reshape(n, n) @")]),
              ("one_minus_b", "Multiply a by 1 - b.",
               [("@ b.reshape(n, n)", "@ (1 - b).reshape(n, n)")])),
    **_family(("sgemm_1d_blocktile", "sgemm_2d_blocktile", "sgemm_vectorized",
               "sgemm_double_buffered", "sgemm_warptile"),
              ("a_squared", "Multiply a * a (element by element) by b.",
               [("a.reshape(m, k) @", "(a * a).reshape(m, k) @")]),
              ("one_minus_b", "Multiply a by 1 - b.",
               [("@ b.reshape(k, n)", "@ (1 - b).reshape(k, n)")])),
    **_family(("mma_tile",),
              ("a_transposed", "Multiply the transpose of a by b.",
               [("a.astype(np.float32) @", "a.astype(np.float32).T @")]),
              ("b_upside_down", "Multiply a by b with its rows in reverse order.",
               [("@ b.astype(np.float32)", "@ b.astype(np.float32)[::-1]")])),
    **_family(("hgemm_mma",),
              ("a_squared", "Multiply a * a (element by element) by b.",
               [("a.reshape(m, k).astype(np.float32) @",
                 "(a.astype(np.float32) ** 2).reshape(m, k) @")]),
              ("one_minus_b", "Multiply a by 1 - b.",
               [("@ b.reshape(k, n).astype(np.float32)",
                 "@ (1 - b.astype(np.float32)).reshape(k, n)")])),
    **_family(("flash_attention",),
              ("hot", "Attention at half the temperature: the scores times 2 / √128.",
               [("/ np.sqrt(128)", "* 2 / np.sqrt(128)")]),
              ("v_squared", "Average v * v (element by element) instead of v.",
               [("@ V)", "@ (V * V))")])),
    **_family(("decode_attention",),
              ("hot", "Attention at half the temperature: the scores times 2 / √128.",
               [("/ np.sqrt(128)", "* 2 / np.sqrt(128)")]),
              ("v_squared", "Average v * v (element by element) instead of v.",
               [("@ V)", "@ (V * V))")])),
    **_family(("ilp",),
              ("times3", "Multiply by 3 and subtract 1.", [("x * 2 + 1", "x * 3 - 1")]),
              ("from1", "Subtract twice x from 1.", [("x * 2 + 1", "1 - x * 2")])),
    **_family(("grid_stride",),
              ("times3", "Multiply by 3 and subtract 1.", [("2 * x + 1", "3 * x - 1")]),
              ("from1", "Subtract twice x from 1.", [("2 * x + 1", "1 - 2 * x")])),
    **_family(("occupancy",),
              ("double", "Every tap weighs 2.", [("np.ones(9, np.float32)",
                                                  "np.full(9, 2, np.float32)")]),
              ("half", "Every tap weighs 0.5.", [("np.ones(9, np.float32)",
                                                  "np.full(9, 0.5, np.float32)")])),
    **_family(("reduce_tree", "reduce_warp_uniform", "reduce", "reduce_shuffle"),
              ("squares", "Sum the squares of the values.",
               [("x.reshape(", "(x * x).reshape(")]),
              ("affine", "Sum 3 * x + 1.", [("x.reshape(", "(3 * x + 1).reshape(")])),
    **_family(("scan_hillis_steele", "scan_blelloch"),
              ("squares", "Scan the squares of the values.",
               [("x.reshape(", "(x * x).reshape(")]),
              ("affine", "Scan 3 * x + 1.", [("x.reshape(", "(3 * x + 1).reshape(")])),
    **_family(("segmented_sum",),
              ("squares", "Sum the squares of each segment's values.",
               [("np.cumsum(x,", "np.cumsum(x * x,")]),
              ("affine", "Sum 2 * x + 1 over each segment.",
               [("np.cumsum(x,", "np.cumsum(2 * x + 1,")])),
    **_family(("softmax",),
              ("hot", "The softmax of 2 * x (a lower temperature).",
               [("X = x.reshape(", "X = (2 * x).reshape(")]),
              ("negated", "The softmax of -x.", [("X = x.reshape(", "X = (-x).reshape(")])),
}


def variants(puzzle_id: str) -> tuple[Variant, ...]:
    """The variants of a puzzle (``()`` for one without: it is practice in a release)."""
    if not isinstance(puzzle_id, str):
        raise TypeError(f"puzzle_id must be a str, got {type(puzzle_id).__name__}")
    return VARIANTS.get(puzzle_id, ())


def variant_puzzle(base: Puzzle, key: str) -> VariantPuzzle:
    """The puzzle ``base`` with the spec of its variant ``key``; ValueError naming the keys
    when it has no such variant."""
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {type(key).__name__}")
    found = {v.key: v for v in variants(base.id)}
    if key not in found:
        raise ValueError(f"puzzle {base.id!r} has no variant {key!r}; its variants are: "
                         f"{', '.join(found) or 'none'}")
    v = found[key]
    fields = {f: getattr(base, f) for f in base.__dataclass_fields__}
    return VariantPuzzle(**{**fields, "id": v.id, "spec": v.spec(base.spec)}, base=base.id,
                         variant=key, what=v.what)
