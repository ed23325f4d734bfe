"""Property test: the translated C computes what the simulator computes, bit for bit.

Hypothesis writes kernels whose expressions mix the built-ins (``t.thread_idx.x``,
``t.block_idx.x``, ``t.block_dim.x``, ``t.lane``; unsigned in CUDA), negative Python ints, a
negative int argument, float32 and int32 array values, float literals, ``+ - * / // %``,
comparisons, ``and``/``or``/``not``, chained comparisons, ``a if c else b``, ``min``/``max``/
``abs`` and a shuffle (offsets past 31 and negative ones included: the hardware uses their low
5 bits).  Each kernel is written twice from the same tree: in plain Python, and in the older
forms the simulator has always run (``&``, ``|``, ``~``, ``t.where``, ``np.minimum``, a shuffle
offset already reduced to its low 5 bits), which the language defines to mean the same.  The
plain kernel's CUDA C, run on the CPU (tests/kernels/cuda_cpu.py), must give the simulator's
bits for the older form; and, once the simulator runs plain Python itself, for the plain form.
An example is a batch of four kernels, compiled in one g++ run (cached by source hash);
there are eight (32 kernels), drawn the same way in CI.
"""

import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_lessons import kernels
from gpu_lessons.kernels.lang import compile_kernel

cpu = pytest.importorskip("cuda_cpu", reason="tests/kernels/cuda_cpu.py is the CPU harness")
needs_gxx = pytest.mark.skipif(not cpu.available(), reason="g++ is needed to run CUDA C on the CPU")

GRID, BLOCK, OUTS = 2, 64, 3
BATCH = 4   # kernels per example, compiled in one g++ run
N = -3   # the int argument: negative, so unsigned arithmetic with it would go wrong
EXAMPLES = settings(max_examples=8, suppress_health_check=[HealthCheck.too_slow,
                                                            HealthCheck.data_too_large])


class X:
    """An expression written both ways: ``plain`` Python and the ``old`` forms; ``kind`` is
    "int", "float" or "bool"; ``lanes``: it holds a value per lane."""

    def __init__(self, plain, old, kind, lanes):
        self.plain, self.old, self.kind, self.lanes = plain, old, kind, lanes


def _same(text, kind, lanes):
    return X(text, text, kind, lanes)


LANE_INTS = ["t.thread_idx.x", "t.lane", "kk[i]", "i"]
UNIFORM_INTS = ["t.block_idx.x", "t.block_dim.x", "n"]
FLOATS = [-2.5, -1.0, -0.5, 0.25, 1.5, 3.0]


def _leaf(draw, extra):
    choice = draw(st.integers(0, 5 if extra else 4))
    if choice == 0:
        return _same(draw(st.sampled_from(LANE_INTS)), "int", True)
    if choice == 1:
        return _same(draw(st.sampled_from(UNIFORM_INTS)), "int", False)
    if choice == 2:
        return _same(f"({draw(st.integers(-9, 9))})", "int", False)
    if choice == 3:
        return _same("x[i]", "float", True)
    if choice == 4:
        return _same(f"({draw(st.sampled_from(FLOATS))})", "float", False)
    return draw(st.sampled_from(extra))


def _kind(*es):
    return "float" if any(e.kind == "float" for e in es) else "int"


def _number(draw, depth, extra, lane=False):
    """A numeric expression; ``lane``: it must hold a value per lane."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        for _ in range(8):
            e = _leaf(draw, extra)
            if e.lanes or not lane:
                return e
        return _same("t.thread_idx.x", "int", True)
    d = depth - 1
    form = draw(st.sampled_from(["add", "mul", "div", "neg", "abs", "minmax", "truth", "pick"]))
    if form == "add":
        a, b = _number(draw, d, extra, lane), _number(draw, d, extra)
        op = draw(st.sampled_from(["+", "-"]))
        return X(f"({a.plain} {op} {b.plain})", f"({a.old} {op} {b.old})", _kind(a, b),
                 a.lanes or b.lanes)
    if form == "mul":   # by a small number only: no 32-bit overflow (undefined in C)
        a, m = _number(draw, d, extra, lane), draw(st.sampled_from(["-5", "-2", "3", "0.75"]))
        return X(f"({a.plain} * {m})", f"({a.old} * {m})",
                 "float" if a.kind == "float" or "." in m else "int", a.lanes)
    if form == "div":
        a = _number(draw, d, extra, lane)
        op = draw(st.sampled_from(["//", "%", "/"]))
        m = draw(st.sampled_from(["3", "-4", "7", "0.5", "-1.5"]))
        return X(f"({a.plain} {op} {m})", f"({a.old} {op} {m})",
                 "float" if a.kind == "float" or "." in m or op == "/" else "int", a.lanes)
    if form == "neg":
        a = _number(draw, d, extra, lane)
        return X(f"(-{a.plain})", f"(-{a.old})", a.kind, a.lanes)
    if form == "abs":
        a = _number(draw, d, extra, lane)
        return X(f"abs({a.plain})", f"abs({a.old})", a.kind, a.lanes)
    if form == "minmax":
        fn = draw(st.sampled_from(["min", "max"]))
        args = [_number(draw, d, extra, True)] + [_number(draw, d, extra)
                                                  for _ in range(draw(st.integers(1, 2)))]
        old = args[0].old
        for e in args[1:]:
            old = f"np.{'minimum' if fn == 'min' else 'maximum'}({old}, {e.old})"
        return X(f"{fn}({', '.join(e.plain for e in args)})", old, _kind(*args), True)
    if form == "truth":
        c = _condition(draw, d, extra, lane)
        return X(f"(({c.plain}) * 1)", f"(({c.old}) * 1)", "int", c.lanes)
    c = _condition(draw, d, extra, True)
    a, b = _number(draw, d, extra), _number(draw, d, extra)
    return X(f"({a.plain} if {c.plain} else {b.plain})", f"t.where({c.old}, {a.old}, {b.old})",
             _kind(a, b), True)


def _condition(draw, depth, extra, lane=False):
    ops = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
    d = max(depth - 1, 0)
    form = draw(st.sampled_from(["cmp", "chain", "andor", "not"] if depth else ["cmp", "chain"]))
    if form == "cmp":
        a, op, b = _number(draw, d, extra, lane), draw(ops), _number(draw, d, extra)
        return X(f"{a.plain} {op} {b.plain}", f"({a.old} {op} {b.old})", "bool",
                 a.lanes or b.lanes)
    if form == "chain":
        a, b, c = _number(draw, d, extra, lane), _number(draw, d, extra), _number(draw, d, extra)
        o1, o2 = draw(ops), draw(ops)
        return X(f"{a.plain} {o1} {b.plain} {o2} {c.plain}",
                 f"(({a.old} {o1} {b.old}) & ({b.old} {o2} {c.old}))", "bool",
                 a.lanes or b.lanes or c.lanes)
    if form == "andor":
        a, b = _condition(draw, d, extra, lane), _condition(draw, d, extra)
        word = draw(st.sampled_from(["and", "or"]))
        return X(f"({a.plain} {word} {b.plain})",
                 f"({a.old} {'&' if word == 'and' else '|'} {b.old})", "bool", a.lanes or b.lanes)
    a = _condition(draw, d, extra, True)
    return X(f"(not {a.plain})", f"(~{a.old})", "bool", True)


SHUFFLES = {"shfl_down": lambda d: d & 31, "shfl_up": lambda d: d & 31,
            "shfl_xor": lambda d: d & 31, "shfl_idx": lambda d: d % 32}


@st.composite
def kernels_(draw):
    """The two sources of one kernel: (plain, old)."""
    first = _number(draw, 2, None)
    fn = draw(st.sampled_from(sorted(SHUFFLES)))
    offset = draw(st.sampled_from([0, 1, 3, 16, 31, 33, -1]))
    extra = [X("v", "v", first.kind, first.lanes), X("w", "w", first.kind, True)]
    outs = [_number(draw, 3, extra) for _ in range(OUTS)]
    head = "def k(t, x, kk, out, n):\n    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x\n"

    def body(which, shfl_offset):
        lines = [f"v = {getattr(first, which)}", f"w = t.{fn}(v, {shfl_offset})"]
        lines += [f"out[{OUTS} * i + {k}] = {getattr(e, which)}" for k, e in enumerate(outs)]
        return head + textwrap.indent("\n".join(lines), "    ") + "\n"
    return body("plain", offset), body("old", SHUFFLES[fn](offset))


def _inputs():
    rng = np.random.default_rng(5)
    size = GRID * BLOCK
    x = (np.round(rng.uniform(-4, 4, size) * 8) / 8).astype(np.float32)
    kk = rng.integers(-50, 51, size).astype(np.int32)
    return x, kk, np.zeros(OUTS * size, np.float64), N


def _cpu(plain_texts):
    """Each kernel's translation run on the CPU: one g++ build for the batch."""
    sources = [kernels.to_cuda(compile_kernel(text), *_inputs()) for text in plain_texts]
    outs = []
    for src, launcher in zip(sources, cpu.build(sources), strict=True):
        x, kk, out, n = _inputs()
        cpu.run_cpu(src, GRID, BLOCK, x, kk, out, n, launcher=launcher)
        outs.append(out)
    return outs, sources


def _simulated(text):
    x, kk, out, n = _inputs()
    kernels.run(compile_kernel(text), GRID, BLOCK, x, kk, out, n)
    return out


def _same_bits(a, b):
    return np.array_equal(a.view(np.uint64), b.view(np.uint64))


BATCHES = st.lists(kernels_(), min_size=BATCH, max_size=BATCH)


@needs_gxx
@EXAMPLES
@given(BATCHES)
def test_translation_gives_the_simulators_bits(batch):
    got, sources = _cpu([plain for plain, _ in batch])
    for (plain, old), c, src in zip(batch, got, sources, strict=True):
        want = _simulated(old)
        assert _same_bits(c, want), f"{plain}\n{src}\nC   {c}\nsim {want}"


@needs_gxx
@settings(EXAMPLES)
@given(BATCHES)
def test_simulator_runs_plain_python_as_the_translation_does(batch):
    got, sources = _cpu([plain for plain, _ in batch])
    for (plain, _), c, src in zip(batch, got, sources, strict=True):
        want = _simulated(plain)
        assert _same_bits(c, want), f"{plain}\n{src}\nC   {c}\nsim {want}"
