"""Measure how fast the grader grades: notebooks per minute, with and without the sandbox.

    .venv/bin/python tools/bench_grade.py                    # chapters 1 5 9, 4 copies each
    .venv/bin/python tools/bench_grade.py --chapters 3 7 --copies 6 --jobs 2 --json out.json
    .venv/bin/python tools/bench_grade.py --attacks          # the red-team breaches, timed

For each chapter, COPIES copies of its solution notebook (every answer right, so every probe
runs) are graded in one run with JOBS notebooks at a time: in bubblewrap sandboxes with a
control group each (the default), in sandboxes without control groups (``--no-cgroups``), and
with ``--no-sandbox``; the wall time of each run gives notebooks per minute.  ``--attacks``
instead grades the breach notebooks of ``tests/submissions/breaches/`` (and the files
``make_submissions.write_breach_files`` makes) beside an honest one, and prints each row and
the grader's own peak resident size; run it inside a memory-capped group to repeat the
review's container.  The runs
without a sandbox also give the CPU seconds one notebook costs (worker, kernel and puzzle
checks) and the largest process's resident size (a sandbox's processes are reaped inside its
PID namespace, so their accounts never reach this process).  It also times starting an empty
sandbox against starting a plain process, the sandbox's own cost.
Record the results in docs/measured/grading.md (with the machine's core count and load: the
figures scale with free cores, not with the machine's size).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def grade_copies(chapter: int, copies: int, jobs: int, mode: str) -> dict:
    from gpu_lessons.grading import grade

    sandboxed = mode != "plain"
    extra = {"cgroups": False} if mode == "sandbox" else {}

    solution = sorted((ROOT / "solutions").glob(f"{chapter:02d}_*.ipynb"))[0]
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as folder:
        for i in range(copies):
            shutil.copy(solution, Path(folder) / f"s{i:03d}_{solution.name}")
        cpu_before = _cpu()
        start = time.perf_counter()
        grades = grade(folder, chapter=chapter, jobs=jobs, sandbox=sandboxed, **extra)
        seconds = time.perf_counter() - start
        cpu = _cpu() - cpu_before
    full = sum(r.status == "ok" and r.total == r.max for r in grades.rows)
    # A sandbox's processes are reaped inside its PID namespace, so their CPU time and size
    # never reach this process's accounts: those two figures exist only without a sandbox.
    return {"chapter": chapter, "mode": mode, "sandbox": sandboxed, "notebooks": copies,
            "jobs": jobs,
            "seconds": round(seconds, 2), "per_minute": round(60 * copies / seconds, 1),
            "cpu_s_per_notebook": None if sandboxed else round(cpu / copies, 2),
            "full_marks": full, "largest_process_mib": None if sandboxed else round(
                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)}


def _cpu() -> float:
    """CPU seconds used by this process and every child it (and they) waited for: the
    workers, kernels and sandboxes.  Unlike wall time, this hardly depends on what else the
    machine is running, so it is the figure to scale to another machine."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def start_cost(repeats: int) -> dict:
    """Median seconds to start and finish ``python -I -c pass``: sandboxed and plain."""
    from gpu_lessons.grading import sandbox

    uid = sandbox.uid_range()[-1] if os.geteuid() == 0 else None
    found = {}
    for sandboxed in (True, False):
        times = []
        for _ in range(repeats):
            proc = sandbox.Process([sys.executable, "-I", "-c", "pass"], sandbox=sandboxed,
                                   uid=uid)
            start = time.perf_counter()
            proc.run(b"", 60)
            times.append(time.perf_counter() - start)
        found["sandboxed" if sandboxed else "plain"] = round(statistics.median(times), 3)
    return found


def attacks(jobs: int) -> dict:
    """Grade the breach notebooks beside an honest one; rows, seconds, the grader's RSS."""
    import importlib.util

    from gpu_lessons.grading import grade

    subs = ROOT / "tests" / "submissions"
    spec = importlib.util.spec_from_file_location("make_submissions",
                                                  subs / "make_submissions.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    with tempfile.TemporaryDirectory(prefix="bench-attacks-") as folder:
        shutil.copy(subs / "good_05.ipynb", Path(folder) / "good_05.ipynb")
        for path in (subs / "breaches").glob("*.ipynb"):
            shutil.copy(path, Path(folder) / path.name)
        make.write_breach_files(Path(folder))
        start = time.perf_counter()
        grades = grade(folder, jobs=jobs, puzzles=(), cell_timeout=30, timeout=120)
        seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for r in grades.rows:
        print(f"{r.file:<32} {r.status:<17} {r.total:g}/{r.max:g}  {r.reason[:110]}")
    print(f"{len(grades.rows)} rows in {seconds:.1f} s; grader peak RSS {rss:.0f} MiB")
    return {"rows": [[r.file, r.status, r.total, r.reason] for r in grades.rows],
            "seconds": round(seconds, 1), "grader_maxrss_mib": round(rss)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapters", type=int, nargs="+", default=[1, 5, 9])
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--attacks", action="store_true",
                        help="grade the breach notebooks instead (see the docstring)")
    args = parser.parse_args(argv)
    from gpu_lessons.grading import sandbox

    if args.attacks:
        found = attacks(args.jobs)
        if args.json:
            Path(args.json).write_text(json.dumps(found, indent=1))
        return 0
    why = sandbox.unavailable()
    modes = ["plain"] if why else ["contained", "sandbox", "plain"]
    if not why and sandbox.containment_unavailable():
        modes.remove("contained")
    if why:
        print(f"(no sandbox here: {why}; timing --no-sandbox only)")
    results = {"machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                           "load_before": os.getloadavg()},
               "start": start_cost(10) if not why else None, "runs": []}
    print(f"{'chapter':>7} {'mode':>9} {'notebooks':>9} {'jobs':>4} {'seconds':>8} "
          f"{'per minute':>10} {'CPU s each':>10} {'full marks':>10}")
    for chapter in args.chapters:
        for mode in modes:
            r = grade_copies(chapter, args.copies, args.jobs, mode)
            results["runs"].append(r)
            cpu = "-" if r["cpu_s_per_notebook"] is None else f"{r['cpu_s_per_notebook']:.2f}"
            print(f"{r['chapter']:>7} {mode:>9} {r['notebooks']:>9} "
                  f"{r['jobs']:>4} {r['seconds']:>8.1f} {r['per_minute']:>10.1f} "
                  f"{cpu:>10} {r['full_marks']:>10}", flush=True)
    results["machine"]["load_after"] = os.getloadavg()
    if results["start"]:
        s = results["start"]
        print(f"empty process: {s['sandboxed'] * 1000:.0f} ms in a sandbox, "
              f"{s['plain'] * 1000:.0f} ms plain")
    for mode in modes:
        runs = [r for r in results["runs"] if r["mode"] == mode]
        n = sum(r["notebooks"] for r in runs)
        total = n / sum(r["seconds"] for r in runs) * 60
        results[f"overall_{mode}_per_minute"] = round(total, 1)
        line = f"overall, {mode}: {total:.1f} notebooks per minute on {args.jobs} jobs"
        if mode == "plain":
            cpu = sum(r["cpu_s_per_notebook"] * r["notebooks"] for r in runs) / n
            results["plain_cpu_s_per_notebook"] = round(cpu, 2)
            line += f", {cpu:.2f} CPU s per notebook"
        print(line)
    sizes = [r["largest_process_mib"] for r in results["runs"] if r["largest_process_mib"]]
    if sizes:
        print(f"largest process (resident, without the sandbox): {max(sizes)} MiB")
    print(f"load average before {results['machine']['load_before']}, "
          f"after {results['machine']['load_after']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
