"""The learner's kernel as an object: its source, the language check, its errors.

Kernels arrive as functions (defined in a notebook cell) or as source text (the grader reads
them out of a submitted notebook).  Source text is compiled here with NumPy as ``np``, a
handful of builtins and the plain numbers the caller passes, nothing else.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import linecache
import numbers
import re
import textwrap
import traceback

import numpy as np

#: Builtins a kernel compiled from source text may use (the kernel language allows no other).
SAFE_BUILTINS = {name: getattr(builtins, name)
                 for name in ("range", "min", "max", "abs", "int", "float", "len", "bool",
                              "NotImplementedError")}

_SOURCES = 0


def kernel_from_source(source: str, name: str | None = None, constants=None):
    """Compile the function ``name`` (default: the only function) defined in ``source``.

    ``constants``: plain numbers the kernel may read as globals (``{"TILE": 32}``).  The
    source is registered with :mod:`linecache`, so error messages and ``inspect.getsource``
    see the learner's own lines.
    """
    global _SOURCES
    if not isinstance(source, str):
        raise TypeError(f"source must be a str of Python source, got {type(source).__name__}")
    tree = ast.parse(source)
    defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    if name is None:
        if len(defs) != 1:
            raise ValueError(f"source defines {len(defs)} functions ({', '.join(defs) or 'none'});"
                             f" pass name= to say which is the kernel")
        name = defs[0]
    elif name not in defs:
        raise ValueError(f"source defines no function {name!r} (it defines: "
                         f"{', '.join(defs) or 'none'})")
    env = {"np": np, "__builtins__": dict(SAFE_BUILTINS), "__name__": "puzzle_kernel"}
    for key, value in dict(constants or {}).items():
        if (not isinstance(key, str) or not key.isidentifier() or key.startswith("_")
                or isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise TypeError(f"constants must map names to plain numbers, got {key!r}: "
                            f"{type(value).__name__}")
        env[key] = value
    _SOURCES += 1
    filename = f"<puzzle kernel {_SOURCES}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), env)
    return env[name]


def source_of(kernel) -> str | None:
    try:
        return textwrap.dedent(inspect.getsource(kernel))
    except (OSError, TypeError):
        return None


def is_stub(kernel) -> bool:
    """True for the exercise's stub: a body that only raises NotImplementedError."""
    source = source_of(kernel)
    if source is None:
        return False
    try:
        fn = ast.parse(source).body[0]
    except (SyntaxError, IndexError):
        return False
    if not isinstance(fn, ast.FunctionDef):
        return False
    body = [s for s in fn.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
            and not isinstance(s, ast.Pass)]
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return False
    exc = body[0].exc
    if isinstance(exc, ast.Call):
        exc = exc.func
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def language_problem(kernel) -> tuple[str, int | None] | None:
    """``(message, line)`` when the kernel leaves the kernel language, else None.

    The rules are ``gpu_lessons.kernel_lang``'s, the same ones ``to_cuda`` applies.
    """
    if not callable(kernel):
        return (f"expected a kernel function, got {type(kernel).__name__}", None)
    try:
        from .. import kernel_lang
    except ImportError:  # the kernel language checker is not part of this build yet
        return None
    try:
        kernel_lang.validate(kernel)
    except kernel_lang.KernelLanguageError as exc:
        return (str(exc), getattr(exc, "lineno", None))
    return None


def signature_problem(kernel, params: tuple[str, ...]) -> str | None:
    try:
        sig = inspect.signature(kernel)
    except (TypeError, ValueError):
        return "the kernel's signature cannot be read"
    names = [p.name for p in sig.parameters.values()]
    wanted = len(params) + 1
    if len(names) != wanted or any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                                   for p in sig.parameters.values()):
        return (f"the kernel takes ({', '.join(names)}); this puzzle calls it as "
                f"kernel(t, {', '.join(params)})")
    return None


def explain_error(exc: BaseException, kernel) -> tuple[str, int | None]:
    """One line for an error raised while the kernel ran, and the learner's line."""
    line = _kernel_line(exc, kernel)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if name == "SimtError" and "max_instructions" in text:
        return ("the kernel issued more warp instructions than the puzzle can need (an "
                "endless t.while_ loop, or far more work than the spec asks for)", line)
    if name in ("IndexError", "SimtError") and text.startswith("line "):
        return text, line_of(text) or line
    return (f"{name}: {text}" if text else name), line


def _kernel_line(exc: BaseException, kernel) -> int | None:
    code = getattr(kernel, "__code__", None)
    if code is None:
        return None
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == code.co_filename:
            line = lineno
    return line


def line_of(text: str) -> int | None:
    m = re.search(r"\bline (\d+)\b", text)
    return int(m.group(1)) if m else None
