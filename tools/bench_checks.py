"""Time what a learner waits for on a fresh kernel: importing the checks, then the first check
of each chapter (loading its questions and computing one reference answer).

    .venv/bin/python tools/bench_checks.py [--runs 7]

Each measurement runs in a fresh interpreter (imports are cached after the first), and the
fastest of ``--runs`` runs is printed (the least disturbed by other work on a shared
machine).  Results are recorded in docs/measured/checks_import.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
import gpu_lessons.checks as checks
t1 = time.perf_counter()
qs = checks.questions({chapter})
t2 = time.perf_counter()
q = next(q for q in qs if q.kind != "function")
answer = {{"number": 1.0, "design": (256, 64, "warps")}}.get(q.kind) or q.answer.options[0]
checks.evaluate(q.id, answer)
t3 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "load": t2 - t1, "first": t3 - t2}}))
"""


ALL = r"""
import json, time
t0 = time.perf_counter()
from gpu_lessons.questions import all_questions
all_questions()
print(json.dumps({"all": time.perf_counter() - t0}))
"""


def measure_all(runs: int) -> float:
    """Milliseconds to import the registry and list every chapter's questions (the grader's
    and the test suite's first step)."""
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", ALL], capture_output=True, text=True,
                             check=True).stdout
        times.append(json.loads(out)["all"])
    return min(times) * 1e3


def measure(chapter: int, runs: int) -> dict:
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", PROBE.format(chapter=chapter)],
                             capture_output=True, text=True, check=True).stdout
        samples.append(json.loads(out))
    return {k: min(s[k] for s in samples) * 1e3 for k in samples[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print("chapter  import checks  load questions  first check (ms, fastest of "
          f"{args.runs})")
    for chapter in range(1, 11):
        m = measure(chapter, args.runs)
        print(f"{chapter:>7}  {m['import']:>13.1f}  {m['load']:>14.1f}  {m['first']:>11.1f}")
    print(f"every chapter's questions listed: {measure_all(args.runs):.0f} ms")


if __name__ == "__main__":
    main()
