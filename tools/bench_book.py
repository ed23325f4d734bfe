"""Time the book's build: from nothing, with nothing changed, after editing one lesson.

    .venv/bin/python tools/bench_book.py [--repeats 3] [--lesson notebooks/05_roofline.ipynb]
                                         [--json FILE]

Each repeat copies the repository's files (tracked and new, not ignored) into a temporary
folder, so the working tree, its ``build/`` and its cache are never touched, and times there
the command ``python3 course.py book`` runs (``course.book_command``):

1. **full**: no site, no cache: every lesson executed, every page written;
2. **unchanged**: the same command again;
3. **prose edit**: a sentence added to one lesson's first Markdown cell: that page re-read, its
   outputs taken from the cache (the log must say so, and execute nothing);
4. **code edit**: a comment added to that lesson's first code cell: that one notebook executed
   again (the log must say exactly one "Executing notebook").

Reports wall time and the CPU time of the build's processes (Sphinx and the notebook kernels),
which a busy machine stretches less, with the 1-minute load average before each run.  The
kernels import ``gpu_lessons`` from the environment running this script.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("full", "unchanged", "prose edit", "code edit")


def copy_repository(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def load_course(root: Path):
    spec = importlib.util.spec_from_file_location("course_copy", root / "course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_build(course) -> dict:
    load = os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    proc = subprocess.run(course.book_command(sys.executable, course.BOOK_OUT), cwd=course.ROOT,
                          env=course.book_env(), capture_output=True, text=True)
    wall = time.perf_counter() - began
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        sys.exit(f"book build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    log = proc.stdout + proc.stderr
    return {"wall_s": round(wall, 1),
            "cpu_s": round(cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime, 1),
            "load_1min": round(load, 2),
            "executed": len(re.findall(r"Executing notebook", log)),
            "from_cache": len(re.findall(r"Using cached notebook", log))}


def edit(path: Path, cell_type: str, text: str) -> None:
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == cell_type)
    cell.source += text
    nbformat.write(nb, path)


def one_repeat(lesson: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-book-") as tmp:
        root = Path(tmp)
        copy_repository(root)
        course = load_course(root)
        runs = {"full": timed_build(course), "unchanged": timed_build(course)}
        edit(root / lesson, "markdown", "\n\nOne more sentence for the benchmark.")
        runs["prose edit"] = timed_build(course)
        edit(root / lesson, "code", "\n# one more comment for the benchmark")
        runs["code edit"] = timed_build(course)
    lessons = len(list((ROOT / "notebooks").glob("*.ipynb")))
    checks = {"full": runs["full"]["executed"] == lessons,
              "unchanged": runs["unchanged"]["executed"] == 0,
              "prose edit": runs["prose edit"]["executed"] == 0
              and runs["prose edit"]["from_cache"] == 1,
              "code edit": runs["code edit"]["executed"] == 1}
    for step, ok in checks.items():
        if not ok:
            sys.exit(f"{step}: unexpected executions: {runs[step]}")
    return runs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lesson", default="notebooks/05_roofline.ipynb")
    parser.add_argument("--json", type=Path, help="also write every run here")
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} CPUs; lesson edited: {args.lesson}", flush=True)
    repeats = []
    for i in range(args.repeats):
        runs = one_repeat(args.lesson)
        repeats.append(runs)
        print(f"repeat {i + 1}: " + "; ".join(
            f"{step} {r['wall_s']} s wall, {r['cpu_s']} s CPU, load {r['load_1min']}"
            for step, r in runs.items()), flush=True)
    print(f"\n{'step':<12} {'wall s (min / median / max)':>30} {'CPU s (median)':>15} "
          f"{'load (min-max)':>15}")
    for step in STEPS:
        walls = [r[step]["wall_s"] for r in repeats]
        cpus = [r[step]["cpu_s"] for r in repeats]
        loads = [r[step]["load_1min"] for r in repeats]
        print(f"{step:<12} {min(walls):>12.1f} / {statistics.median(walls):6.1f} / "
              f"{max(walls):6.1f} {statistics.median(cpus):>15.1f} "
              f"{min(loads):>9.1f}-{max(loads):.1f}")
    if args.json:
        args.json.write_text(json.dumps({"cpus": os.cpu_count(), "lesson": args.lesson,
                                         "repeats": repeats}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
