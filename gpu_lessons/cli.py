"""The ``gpu-lessons`` command.  Every subcommand's arguments are parsed here."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-lessons", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("env", help="print the environment report (Python, packages, CPU, GPU)")
    sub.add_parser("gpus", help="list the GPU catalog")
    _grade_arguments(sub.add_parser("grade", help="grade a folder of submitted exercise "
                                    "notebooks, each in its own sandbox (CSV + JSON)"))
    _release_arguments(sub.add_parser(
        "release", help="write each student's exercise notebooks, with their own numbers "
                        "(per-student variants) and form-only checks"))
    args = parser.parse_args(argv)
    if args.command == "env":
        from .env import report

        print(report())
    elif args.command == "gpus":
        from ._format import bandwidth, flop_rate, text_table
        from .hardware import catalog

        def peak(g, p):
            return flop_rate(g.peak_tflops[p] * 1e12) if p in g.peak_tflops else "-"

        print(text_table(("GPU", "CC", "SMs", "DRAM", "FP32", "FP16 tensor (dense)"),
                         [(g.name, g.cc, g.sms, bandwidth(g.bandwidth), peak(g, "fp32"),
                           peak(g, "fp16")) for g in catalog().values()], align="numbers"))
    elif args.command == "grade":
        return _grade(args)
    elif args.command == "release":
        return _release(args)
    return 0


# -- gpu-lessons grade -----------------------------------------------------------------------

def _grade_arguments(parser) -> None:
    from .grading.options import GradeOptions

    parser.add_argument("submissions", help="folder of submitted .ipynb files (searched "
                        "recursively), or one notebook")
    GradeOptions.add_arguments(parser)  # the options grade() takes, declared once
    puzzles = parser.add_mutually_exclusive_group()
    puzzles.add_argument("--puzzle", action="append", default=[], metavar="ID[=NAME][:POINTS]",
                         help="grade these kernel puzzles instead of the chapter's: puzzle ID "
                              "from the kernel function NAME (default: ID_kernel), worth "
                              "POINTS (default 1); repeat for more")
    puzzles.add_argument("--no-puzzles", action="store_true",
                         help="grade the questions only, not the chapter's kernel puzzles")
    parser.add_argument("--secret-file", metavar="FILE", default=None,
                        help="the key the release drew each student's numbers and puzzle "
                             "variants with: grade every student against their own")
    parser.add_argument("--roster", metavar="CSV", default=None,
                        help="with --secret-file: refuse submissions from students not on it")
    parser.add_argument("--bank", metavar="DIR", default=None,
                        help="a folder of private question modules to grade too (as released)")


def _questions_for(args):
    """The function from student id to that student's questions, or None for the chapter's
    built-in questions with the lessons' own numbers."""
    if not args.secret_file:
        _refuse_a_release_without_its_key(args)
    if not (args.secret_file or args.roster or args.bank):
        return None
    if args.roster and not args.secret_file:
        raise ValueError("--roster needs --secret-file (the key the release used)")
    from .assignments import questions_for
    from .grading.submissions import chapter_from, collect

    chapter = args.chapter
    if chapter is None:
        chapter = chapter_from(collect(args.submissions)[1])
    if args.chapter is None:
        args.chapter = chapter
    return questions_for(args.secret_file, chapter, bank=args.bank, roster=args.roster)


def _seed(args):
    """The run's seed: ``--seed``, else None (the grader draws one for the run, or resumes
    with its journal's).  Never a fixed default, nor one derived from the key alone: a
    learner who knows a run's seed can compute the grader's inputs and hard-code their
    outputs, and a regrade draws new inputs."""
    return args.seed


def _refuse_a_release_without_its_key(args) -> None:
    """Released notebooks ask each student's own numbers: graded without the key they would be
    judged against the lessons' numbers, which the public solutions answer.  Refuse when most
    notebooks say they come from a release; warn when some do (one notebook's metadata must not
    be able to stop a whole run)."""
    from .grading.submissions import collect, released_count

    paths = collect(args.submissions)[1]
    n = released_count(paths)
    if not n:
        return
    what = (f"{n} of the {len(paths)} notebooks say they come from a release with per-student "
            f"numbers (metadata gpu_lessons.released)")
    if 2 * n > len(paths):
        raise ValueError(f"{what}: grade them with --secret-file, the key the release used "
                         f"(and --roster); without it each would be judged against the "
                         f"lessons' own numbers, which the public solutions answer")
    print(f"gpu-lessons grade: warning: {what}; without --secret-file they are graded against "
          f"the lessons' own numbers, not each student's", file=sys.stderr)


def _puzzles(args):
    """The puzzles to grade: None for the chapter's own, () for none, or those named."""
    if getattr(args, "no_puzzles", False):
        return ()
    if not args.puzzle:
        return None
    from .grading.plan import Puzzle

    found = []
    for spec in args.puzzle:
        head, _, points = spec.partition(":")
        ident, sep, name = head.partition("=")
        name = name if sep else f"{ident}_kernel"
        if not ident or not name.isidentifier():
            raise ValueError(f"--puzzle {spec!r}: expected ID, ID=NAME or ID=NAME:POINTS, "
                             f"e.g. transpose or transpose=my_kernel:2")
        try:
            value = float(points) if points else 1.0
        except ValueError:
            raise ValueError(f"--puzzle {spec!r}: POINTS must be a number") from None
        found.append(Puzzle(ident, name, value, _choices(ident)))
    return tuple(found)


def _choices(puzzle_id: str) -> tuple[str, ...]:
    """The launch choices the puzzle leaves to the learner (none if it is not known here)."""
    try:
        from .puzzles import find

        return tuple(find(puzzle_id).choices)
    except (ImportError, ValueError):
        return ()


def _grade(args) -> int:
    """Run ``gpu-lessons grade``: one line per submission as it finishes (on stdout), then
    the grades written once, after every sandbox is gone."""
    from dataclasses import asdict, replace

    from .grading.options import GradeOptions
    from .grading.results import Row
    from .grading.runner import NO_CGROUP_RISKS, NO_SANDBOX_RISKS, SandboxUnavailable, grade

    def show(row: Row):
        print(f"{row.status:<16} {row.total:>5g}/{row.max:<5g} {row.file}"
              + (f"  — {row.reason}" if row.reason else ""), flush=True)

    try:
        options = GradeOptions.from_args(args)
        if not options.sandbox:
            print(f"gpu-lessons grade: --no-sandbox: {NO_SANDBOX_RISKS}.", file=sys.stderr)
        elif not options.cgroups:
            print(f"gpu-lessons grade: --no-cgroups: {NO_CGROUP_RISKS}.", file=sys.stderr)
        if options.sandbox:  # the key, roster and bank must stay out of every sandbox
            from .grading.runner import check_private

            check_private({"--secret-file": args.secret_file, "--roster": args.roster,
                           "--bank": args.bank})
        questions_for = _questions_for(args)  # may set args.chapter from the notebooks
        puzzles = _puzzles(args)
        puzzles_for = None
        if args.secret_file and puzzles is None:  # a release: each student's own variants
            from .assignments import puzzles_for as _puzzles_for

            puzzles_for = _puzzles_for(args.secret_file, args.chapter, roster=args.roster)
        options = replace(options, chapter=args.chapter, seed=_seed(args))
        grades = grade(args.submissions, questions_for=questions_for, puzzles=puzzles,
                       puzzles_for=puzzles_for, progress=show, **asdict(options))
    except SandboxUnavailable as exc:
        print(f"gpu-lessons grade: {exc}", file=sys.stderr)
        return 3
    except (ValueError, TypeError, OSError) as exc:
        print(f"gpu-lessons grade: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gpu-lessons grade: interrupted; the rows graded so far are in {args.out}; run "
              f"the same command again to grade the rest (the journal keeps what is done)",
              file=sys.stderr)
        return 130
    n = len(grades.rows)
    extra = f" and {n} feedback files in {args.feedback}" if args.feedback else ""
    print(f"graded {n} notebook{'' if n == 1 else 's'}: wrote {args.out} and "
          f"{Path(args.out).with_suffix('.json')}{extra}; inputs drawn with --seed "
          f"{grades.seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


# -- gpu-lessons release ---------------------------------------------------------------------

def _release_arguments(parser) -> None:
    parser.add_argument("--roster", required=True, metavar="CSV",
                        help="the class list: a CSV with a 'student' (or 'id') column")
    parser.add_argument("--secret-file", required=True, metavar="FILE",
                        help="the key that draws each student's numbers (keep it; grading "
                             "needs it; at least 16 random bytes)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="a new folder: one sub-folder per student is written there")
    parser.add_argument("--chapters", default="1-10", metavar="LIST",
                        help="chapters to release, e.g. 5 or 1-3,6 (default: 1-10)")
    parser.add_argument("--bank", metavar="DIR",
                        help="a folder of private question modules to add (see "
                             "docs/instructors.md)")
    parser.add_argument("--name", metavar="NAME",
                        help="the assignment's name, written into each notebook (default: the "
                             "--out folder's name)")
    parser.add_argument("--exercises", metavar="DIR",
                        help="the exercise notebooks to release (default: the repository's "
                             "exercises/)")


def _chapter_list(text: str) -> list[int]:
    chapters = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise ValueError(f"--chapters {text!r}: use numbers and ranges like 5 or "
                             f"1-3,6") from None
        chapters += range(first, last + 1)
    return chapters


def _release(args) -> int:
    from .assignments import release

    try:
        written = release(args.roster, args.secret_file, args.out,
                          chapters=_chapter_list(args.chapters), bank=args.bank,
                          name=args.name, exercises=args.exercises)
    except (ValueError, TypeError) as exc:
        print(f"gpu-lessons release: {exc}", file=sys.stderr)
        return 2
    students = len({p.parent for p in written})
    print(f"released {len(written)} notebooks for {students} students into {args.out}")
    return 0
