"""The learner's kernel as an object: the stub test, the language check, its errors.

Kernels arrive as functions (defined in a notebook cell) or as source text (the grader reads
them out of a submitted notebook).  Either way :mod:`gpu_lessons.kernels.lang` checks them
before they run — the rules ``to_cuda`` applies — and source text is compiled by
:func:`gpu_lessons.kernels.lang.compile_kernel` in a namespace holding only NumPy, the plain
numbers the caller passes and the language's builtins.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap

from ..kernels import lang as kernel_lang
from ..kernels.simt import KernelError


def kernel_from_source(source: str, constants: dict | None = None):
    """The function defined by ``source`` (one ``def`` in the kernel language).

    ``constants``: the plain numbers the kernel reads as globals (``{"TILE": 32}``).
    Raises :class:`gpu_lessons.kernels.lang.KernelLanguageError` (a ``ValueError``) for
    anything outside the language, naming the construct and the line.
    """
    return kernel_lang.compile_kernel(source, dict(constants or {}))


def split_cell(source: str) -> tuple[str, dict]:
    """A notebook cell's text -> (the kernel's ``def`` alone, the plain numbers assigned at
    the top of the cell, such as ``BLOCK = 256``).  ``NAME = ...`` gives ``Ellipsis``: a
    choice not made yet.  Anything else at the top level is left in the source, for the
    kernel language to refuse."""
    text = textwrap.dedent(source)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text, {}
    lines = text.splitlines(True)
    numbers, drop = {}, set()
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if value is Ellipsis or (isinstance(value, int | float)
                                     and not isinstance(value, bool)):
                numbers[node.targets[0].id] = value
                drop.update(range(node.lineno - 1, node.end_lineno))
    # blank the dropped lines rather than delete them: error messages keep the cell's lines
    kept = "".join("\n" if i in drop else line for i, line in enumerate(lines))
    return kept, numbers


def _source_of(kernel) -> str | None:
    if isinstance(kernel, str):
        return kernel
    try:
        return textwrap.dedent(inspect.getsource(kernel))
    except (OSError, TypeError):
        return None


def is_stub(kernel) -> bool:
    """True for the exercise's stub: a function whose body only raises NotImplementedError."""
    source = _source_of(kernel)
    if source is None:
        return False
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return False
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(defs) != 1:
        return False
    body = [s for s in defs[0].body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
            and not isinstance(s, ast.Pass)]
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return False
    exc = body[0].exc
    if isinstance(exc, ast.Call):
        exc = exc.func
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def language_problem(kernel):
    """``(message, line)`` when the kernel leaves the kernel language, else its validated
    :class:`~gpu_lessons.kernels.lang.Kernel` (what the other questions read)."""
    if not callable(kernel):
        return (f"expected a kernel function def kernel(t, ...), got {type(kernel).__name__}",
                None)
    try:
        return kernel_lang.validate(kernel)
    except kernel_lang.KernelLanguageError as exc:
        return str(exc), exc.lineno
    except (TypeError, ValueError) as exc:  # no source to read, constants that are not numbers
        return str(exc), None


def explain_error(exc: BaseException) -> tuple[str, int | None]:
    """One line for an error raised while the kernel ran, and the learner's line."""
    if isinstance(exc, KernelError):
        original, line = exc.original, exc.lineno
    else:
        original, line = exc, None
    text = str(original).strip()
    if "max_instructions" in text:
        return ("the kernel issued more warp instructions than this puzzle can need (an "
                "endless t.while_ loop, or far more work than the spec asks for)", line)
    kind = type(original).__name__
    if kind == "SimtError":
        return text, line
    return (f"{kind}: {text}" if text else kind), line


def line_of(text: str) -> int | None:
    m = re.search(r"\bline (\d+)\b", text)
    return int(m.group(1)) if m else None
