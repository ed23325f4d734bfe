"""The error a kernel outside the kernel language gets, and the sentence every refusal ends with."""

from __future__ import annotations

USE = ("kernels may use their arguments, t, np, numbers and local variables "
        "(docs/kernel_language.md lists the language)")


class KernelLanguageError(ValueError):
    """A kernel uses something outside the kernel language.

    ``construct``: what was refused (e.g. ``"import"``, ``"attribute"``); ``lineno``: the line in
    the learner's cell or file (``None`` when the whole kernel is at fault).
    """

    def __init__(self, message: str, *, construct: str, lineno: int | None = None):
        super().__init__(message)
        self.construct = construct
        self.lineno = lineno
