"""The grading run's options, declared once: :func:`gpu_lessons.grading.grade` takes them as
keywords and ``gpu-lessons grade`` makes its command-line options from the same fields (the
flag, the help text and the type are each field's metadata).  Bad values are refused here,
naming the option, before anything runs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from .. import _validate
from .submissions import DEFAULT_ID_PATTERN


def _opt(flag: str, help: str, **argparse) -> dict:
    return {"flag": flag, "help": help, "argparse": argparse}


@dataclass(frozen=True)
class GradeOptions:
    """How one grading run runs (what it grades comes from the chapter, the questions and the
    puzzles, given separately)."""

    chapter: int | str | None = field(default=None, metadata=_opt(
        "--chapter", "chapter whose questions to grade, e.g. 5 or 05 (default: the one most "
        "notebooks' metadata names)"))
    out: str | None = field(default=None, metadata=_opt(
        "--out", "CSV to write once grading is done; the JSON goes beside it, and a journal "
        "of finished rows while it runs (default: grades.csv)", default="grades.csv"))
    feedback: str | None = field(default=None, metadata=_opt(
        "--feedback", "also write one Markdown feedback file per student into DIR",
        metavar="DIR"))
    jobs: int | None = field(default=None, metadata=_opt(
        "--jobs", "notebooks graded at once (default: CPU cores)", type=int))
    cell_timeout: float = field(default=60, metadata=_opt(
        "--cell-timeout", "seconds a cell may run before it is interrupted (default: 60)",
        type=float))
    timeout: float = field(default=600, metadata=_opt(
        "--timeout", "seconds a notebook may run before its sandbox is killed (default: 600)",
        type=float))
    seed: int | str | None = field(default=None, metadata=_opt(
        "--seed", "seed for the inputs function answers and puzzle kernels are tried on "
        "(default: drawn afresh for each run, or the journal's when resuming; the JSON records "
        "it, pass it again to regrade on the same inputs)"))
    kernel: str = field(default="python3", metadata=_opt(
        "--kernel", "Jupyter kernel (default: python3)"))
    id_pattern: str = field(default=DEFAULT_ID_PATTERN, metadata=_opt(
        "--id-pattern", "regex on the path under SUBMISSIONS; its first non-empty group is "
        "the student id"))
    memory_mib: int | None = field(default=None, metadata=_opt(
        "--memory", "address space each sandboxed process may use (default: 4096)",
        type=int, metavar="MIB"))
    ram_mib: int | None = field(default=None, metadata=_opt(
        "--ram", "memory each sandbox may hold in all, memfd and tmpfs pages included (its "
        "control group's cap; default: 1536, cut to fit the grader's own cap over --jobs)",
        type=int, metavar="MIB"))
    sandbox: bool = field(default=True, metadata=_opt(
        "--no-sandbox", "run notebooks without a sandbox (only for notebooks you trust: see "
        "docs/instructors.md)", action="store_false"))
    cgroups: bool = field(default=True, metadata=_opt(
        "--no-cgroups", "sandbox notebooks without a control group each, where none can be "
        "made (memfd and tmpfs memory is then not capped: see docs/instructors.md)",
        action="store_false"))
    journal: bool = field(default=True, metadata=_opt(
        "--no-journal", "do not journal rows as they finish (a killed run then loses them); "
        "by default OUT.journal lets the same command resume", action="store_false"))

    def __post_init__(self):
        if self.jobs is not None:
            _validate.integer("jobs", self.jobs, low=1)
        _validate.positive("cell_timeout", self.cell_timeout)
        _validate.positive("timeout", self.timeout)
        for name in ("memory_mib", "ram_mib"):
            value = getattr(self, name)
            if value is not None:
                _validate.integer(name, value, low=64)
        for name in ("sandbox", "cgroups", "journal"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not isinstance(self.kernel, str) or not self.kernel:
            raise TypeError(f"kernel must be a kernel name, got {self.kernel!r}")
        try:
            re.compile(self.id_pattern)
        except (re.error, TypeError) as exc:
            raise ValueError(f"id_pattern={self.id_pattern!r} is not a valid regular "
                             f"expression: {exc}") from None

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def add_arguments(cls, parser) -> None:
        """The command line's options, one per field."""
        for f in fields(cls):
            meta = f.metadata
            kwargs = dict(meta["argparse"])
            kwargs.setdefault("default", f.default)
            parser.add_argument(meta["flag"], dest=f.name, help=meta["help"], **kwargs)

    @classmethod
    def from_args(cls, args) -> GradeOptions:
        return cls(**{name: getattr(args, name) for name in cls.names()})

    def limits(self):
        """The sandbox limits these options ask for (None: the defaults)."""
        from .sandbox import Limits

        sizes = {k: v for k, v in (("memory_mib", self.memory_mib),
                                   ("ram_mib", self.ram_mib)) if v}
        return Limits(**sizes) if sizes else None
