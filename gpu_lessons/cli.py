"""The ``gpu-lessons`` command."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-lessons", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("env", help="print the environment report (Python, packages, CPU, GPU)")
    sub.add_parser("gpus", help="list the GPU catalog")
    from .grade import add_arguments

    add_arguments(sub.add_parser("grade", help="grade a folder of submitted exercise notebooks "
                                 "(CSV + JSON)"))
    _release_arguments(sub.add_parser(
        "release", help="write each student's exercise notebooks, with their own numbers "
                        "(per-student variants) and form-only checks"))
    args = parser.parse_args(argv)
    if args.command == "env":
        from .env import report

        print(report())
    elif args.command == "gpus":
        from .hardware import catalog

        for g in catalog().values():
            print(f"{g.name:<16} CC {g.cc:<5} {g.sms:>4} SMs  {g.bandwidth_gbs:>6,.0f} GB/s  "
                  f"FP32 {g.peak_tflops['fp32']:>5.1f} TFLOP/s  "
                  f"FP16 tensor {g.peak_tflops.get('fp16', float('nan')):>7.1f} TFLOP/s (dense)")
    elif args.command == "grade":
        from .grade import run

        return run(args)
    elif args.command == "release":
        return _release(args)
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
