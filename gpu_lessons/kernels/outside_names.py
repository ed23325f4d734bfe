"""The outside names a kernel uses (``TILE = 32`` beside it): their values, plain numbers only."""

from __future__ import annotations

import ast
import builtins
import contextlib
import math

import numpy as np

from .._validate import is_number
from .constructs import BUILTINS
from .errors import USE, KernelLanguageError


def resolve(checker, kernel, constants, line_offset) -> dict:
    """Values of the outside names the kernel uses: plain numbers only."""
    values = {}
    closure = {}
    if kernel is not None and getattr(kernel, "__closure__", None):
        for name, cell in zip(kernel.__code__.co_freevars, kernel.__closure__, strict=True):
            with contextlib.suppress(ValueError):  # an empty cell has no value
                closure[name] = cell.cell_contents
    globs = getattr(kernel, "__globals__", {}) if kernel is not None else {}
    for name, node in checker.free.items():
        if name in closure:
            value = closure[name]
        elif name in constants:
            value = constants[name]
        elif name in globs:
            value = globs[name]
        else:
            line = node.lineno + line_offset
            hint = ("" if kernel is not None else
                    " (pass the values of outside constants in constants={...})")
            if hasattr(builtins, name):
                raise KernelLanguageError(
                    f"line {line}: `{name}` is not part of the kernel language; {USE}",
                    construct="builtin", lineno=line)
            raise KernelLanguageError(
                f"line {line}: `{name}` is not defined: it is not a parameter, a local "
                f"variable or a constant{hint}", construct="name", lineno=line)
        if not is_number(value):
            line = node.lineno + line_offset
            raise KernelLanguageError(
                f"line {line}: `{name}` refers to a {type(value).__name__} outside the kernel; "
                f"outside names must be plain numbers (e.g. TILE = 32) - pass arrays as "
                f"arguments and write helpers inline", construct="name", lineno=line)
        values[name] = value
    if kernel is not None:
        for name in BUILTINS:
            if name in globs and globs[name] is not getattr(builtins, name):
                used = any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(checker.fn))
                if used:
                    raise KernelLanguageError(
                        f"`{name}` is redefined outside the kernel, so the kernel would not call "
                        f"Python's {name}; rename the outside definition", construct="builtin")
        if checker.uses_np and globs.get("np", np) is not np and "np" not in closure:
            raise KernelLanguageError(
                "`np` outside the kernel is not NumPy; kernels use `import numpy as np`",
                construct="np")
        if checker.uses_math and globs.get("math", math) is not math and "math" not in closure:
            raise KernelLanguageError(
                "`math` outside the kernel is not Python's math module; kernels use "
                "`import math`", construct="math")
    return values
