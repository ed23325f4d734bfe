"""Errors of the SIMT simulator, reported at the learner's line rather than inside the simulator.

Anything a kernel raises while it runs -- an out-of-range index, a Python ``if`` on lane
values, a typo (``NameError``), a division by zero in Python arithmetic, a
:class:`SimtError` -- reaches the caller of :func:`gpu_lessons.kernels.run` as one
:class:`KernelError` whose message starts with the kernel's file (or notebook cell) and
line, then the source text of that line, then what went wrong::

    Cell In[4], line 6, in shift: out[tid] = sh[tid + 1]
    IndexError: lane 31 of warp 0 in block (0, 0, 0) (thread (31, 0, 0)) reads sh[32], ...

The original exception is kept as ``__cause__`` and ``.original``; ``.lineno``, ``.line``
and ``.filename`` say where, ``.frames`` lists every frame of the learner's code on the
way (a ``t.while_`` condition is a lambda of its own).  The class of a ``KernelError`` also
derives from the original exception's class where Python allows it, so
``except IndexError`` and ``pytest.raises(TypeError)`` still catch what they caught before.
In IPython and Jupyter, ``_render_traceback_`` replaces the 30-line traceback through the
simulator with those few lines (the way :class:`gpu_lessons.checks.CheckFailed` does).

Source text comes from :mod:`linecache`, which also holds the source of Jupyter cells.
"""

from __future__ import annotations

import linecache
import os
import sys


class SimtError(RuntimeError):
    """A kernel did something the SIMT model (or CUDA) does not allow; the message says what."""


class KernelError(SimtError):
    """An exception raised inside a kernel, pointing at the learner's source line.

    ``original``: the exception the kernel raised; ``filename``, ``lineno``, ``line``: where
    (``line`` is the stripped source text, ``""`` if unavailable); ``frames``: the learner's
    frames outermost first, as ``(where, lineno, function, source text)``.
    """

    def __init__(self, message: str, *, original: BaseException, filename: str,
                 lineno: int, line: str, frames: tuple):
        super().__init__(message)
        self.original = original
        self.filename = filename
        self.lineno = lineno
        self.line = line
        self.frames = frames

    def __str__(self) -> str:  # not KeyError's quoting when the original was a KeyError
        return str(self.args[0]) if self.args else ""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of the traceback: the learner's frames and the error."""
        lines = []
        if len(self.frames) > 1:
            lines.append("In the kernel:")
            for where, lineno, func, text in self.frames:
                lines.append(f"  {where}, line {lineno}, in {func}")
                if text:
                    lines.append(f"    {text}")
        lines.append(f"\x1b[31m{self}\x1b[0m")
        return lines


_CLASSES: dict[type, type] = {SimtError: KernelError}


def _error_class(kind: type) -> type:
    """``KernelError`` also deriving from ``kind`` (so ``except kind`` still catches it)."""
    cls = _CLASSES.get(kind)
    if cls is None:
        cls = KernelError
        if not issubclass(kind, KernelError):
            try:
                cls = type(f"Kernel{kind.__name__}", (KernelError, kind),
                           {"__module__": __name__, "__doc__": KernelError.__doc__})
            except TypeError:  # a built-in whose layout cannot be combined with ours
                cls = KernelError
        _CLASSES[kind] = cls
    return cls


def _where(filename: str) -> str:
    """A file name a learner recognises: ``Cell In[4]`` for a notebook cell, else the
    file's base name."""
    shell = sys.modules.get("IPython")
    if shell is not None:
        try:
            ip = shell.get_ipython()
            number = ip.compile._filename_map.get(filename) if ip is not None else None
        except AttributeError:  # an IPython without the map: fall back to the file name
            number = None
        if number is not None:
            return f"Cell In[{number}]"
    return os.path.basename(filename) or filename


def kernel_error(exc: BaseException, kernel) -> KernelError | None:
    """``exc`` (raised while ``kernel`` ran) as a :class:`KernelError` at the learner's
    innermost line, or ``None`` when no frame of the learner's file is in its traceback."""
    code = getattr(kernel, "__code__", None)
    if code is None or isinstance(exc, KernelError):
        return None
    filename = code.co_filename
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        f = tb.tb_frame
        if f.f_code.co_filename == filename:
            text = linecache.getline(filename, tb.tb_lineno, f.f_globals).strip()
            frames.append((_where(filename), tb.tb_lineno, f.f_code.co_name, text))
        tb = tb.tb_next
    if not frames:
        return None
    where, lineno, func, text = frames[-1]
    message = str(exc)
    kind = "SimtError" if isinstance(exc, SimtError) else type(exc).__name__
    head = f"{where}, line {lineno}, in {func}" + (f": {text}" if text else "")
    cls = _error_class(type(exc))
    err = cls.__new__(cls)
    KernelError.__init__(err, f"{head}\n{kind}: {message}", original=exc,
                         filename=filename, lineno=lineno, line=text, frames=tuple(frames))
    return err
