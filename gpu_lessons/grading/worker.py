"""The process that runs one submission's notebook in a Jupyter kernel (inside its sandbox).

``python -I -m gpu_lessons.grading.worker RESULT_FD`` reads its plan (JSON) on stdin: the
notebook's code cells (the grader already parsed the file and dropped outputs and metadata),
the probe cells to run after them, the per-cell time limit and the kernel name.  It runs the
cells with nbclient in a fresh kernel whose working folder is the sandbox's work folder:

* a cell that raises does not stop the notebook (``allow_errors``), so answers further down
  still count;
* a cell that runs past the cell time limit is interrupted (SIGINT) and the next cell runs;
  the grader's hard per-notebook kill is the second layer, for a kernel that ignores SIGINT;
* after each probe cell it reads the answers the probe wrote to its folder (and those it
  printed after the run's nonce) and passes them on.

It reports on ``RESULT_FD``, one JSON object a line: ``{"event": "kernel"}`` once the kernel
runs, ``{"event": "cell", "index": n}`` as cell n starts (1-based, probes after the code
cells), ``{"event": "error", "index": n, "ename": ...}``, ``{"event": "answer", "id": ...,
"observation": ...}`` and finally ``{"event": "end", "status": "ok"}`` (or ``"crashed"`` with
``"dead_kernel": true`` or an ``"error"`` text).  The kernel runs as the same user in the
same sandbox and could write these lines too, so the grader treats every one of them as
untrusted: they can only ever describe this one submission.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

#: Largest probe file read back (a probe's answers for one question).
MAX_PROBE_FILE = 16 * 2**20
#: Largest answer passed on: the grader refuses result lines over 1 MiB as tampering.
MAX_ANSWER = 512 * 2**10


class Reporter:
    """Writes events to the result descriptor; each answer id is reported once."""

    def __init__(self, fd: int):
        self._out = os.fdopen(fd, "w", encoding="utf-8", closefd=True)
        self._lock = threading.Lock()
        self.answered: set[str] = set()

    def event(self, **fields) -> None:
        with self._lock:
            try:
                self._out.write(json.dumps(fields, ensure_ascii=True) + "\n")
                self._out.flush()
            except (OSError, ValueError):
                pass  # the grader is gone or killed us; nothing to report to

    def answer(self, qid: str, observation) -> None:
        if qid in self.answered or not isinstance(observation, dict):
            return
        self.answered.add(qid)
        size = len(json.dumps(observation))
        if size > MAX_ANSWER:  # an honest but huge answer (a giant array): judged as such
            observation = {"kind": "other", "type": "answer too large to grade",
                           "repr": f"{size:,} bytes of data"}
        self.event(event="answer", id=qid, observation=observation)


def run(plan: dict, report: Reporter, work: Path) -> None:
    import asyncio

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    cells = [nbformat.v4.new_code_cell(src) for src in plan["cells"]]
    first_probe = len(cells)
    probes = plan["probes"]
    cells += [nbformat.v4.new_code_cell(p["source"]) for p in probes]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": plan["kernel"], "display_name": plan["kernel"],
                                 "language": "python"}
    nonce, folder = plan["nonce"], work / plan["probe_folder"]
    folder.mkdir(parents=True, exist_ok=True)

    def collect(ids) -> None:
        for qid in ids:
            _take_payload(_read_small(folder / f"{qid}.json"), nonce, {qid}, report)

    class Client(NotebookClient):
        """Keeps none of the submission's output (MBs of prints cost nothing) and picks the
        probes' answers out of their output as it arrives."""

        def output(self, outs, msg, display_id, cell_index):
            if cell_index < first_probe:
                return None
            content = msg.get("content", {})
            text = content.get("text")
            if text is None:
                plain = (content.get("data") or {}).get("text/plain")
                text = _literal_str(plain) if isinstance(plain, str) else None
            if isinstance(text, str) and nonce in text:
                _take_payload(text, nonce, set(probes[cell_index - first_probe]["ids"]), report)
            return None

    def on_notebook_start(**_):
        report.event(event="kernel")

    def on_cell_start(cell=None, cell_index=None, **_):
        report.event(event="cell", index=cell_index + 1)

    def on_cell_executed(cell=None, cell_index=None, execute_reply=None, **_):
        content = (execute_reply or {}).get("content", {})
        if content.get("status") == "error":
            report.event(event="error", index=cell_index + 1,
                         ename=str(content.get("ename", "error"))[:80])
        if cell_index >= first_probe:
            collect(probes[cell_index - first_probe]["ids"])

    # iopub_timeout is short: answers come back through files, and nothing else of a cell's
    # output is kept, so there is no reason to wait for a flood of prints to drain.
    client = Client(nb, timeout=plan["cell_timeout"], kernel_name=plan["kernel"],
                    allow_errors=True, interrupt_on_timeout=True, shutdown_kernel="immediate",
                    record_timing=False, startup_timeout=120, iopub_timeout=1,
                    resources={"metadata": {"path": str(work)}},
                    on_notebook_start=on_notebook_start, on_cell_start=on_cell_start,
                    on_cell_executed=on_cell_executed)
    end = {"status": "ok"}
    try:
        client.execute(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except DeadKernelError:
        end = {"status": "crashed", "dead_kernel": True}
    except (Exception, asyncio.CancelledError) as exc:
        end = {"status": "crashed", "error": f"{type(exc).__name__}: {exc}"[:300]}
    collect(item for p in probes for item in p["ids"])  # answers a dead kernel left behind
    report.event(event="end", **end)


def _read_small(path: Path) -> str:
    """A probe file's text, or "" (missing, too large, not UTF-8)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PROBE_FILE + 1)
    except OSError:
        return ""
    return "" if len(data) > MAX_PROBE_FILE else data.decode("utf-8", "replace")


def _literal_str(text: str) -> str | None:
    import ast

    if len(text) > MAX_PROBE_FILE:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    return value if isinstance(value, str) else None


def _take_payload(text: str, nonce: str, wanted: set, report: Reporter) -> None:
    """Report each ``nonce``-prefixed answer in ``text`` whose id is in ``wanted``."""
    for line in text.splitlines():
        if not line.startswith(nonce):
            continue
        try:
            payload = json.loads(line[len(nonce):])
        except (ValueError, RecursionError):
            continue
        if (isinstance(payload, dict) and payload.get("id") in wanted
                and isinstance(payload.get("observation"), dict)):
            report.answer(payload["id"], payload["observation"])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m gpu_lessons.grading.worker RESULT_FD  (plan as JSON on stdin; "
              "started by the grader)", file=sys.stderr)
        return 2
    report = Reporter(int(argv[0]))
    try:
        plan = json.loads(sys.stdin.buffer.read())
        work = Path(os.environ.get("GPU_LESSONS_WORK") or os.getcwd())
        run(plan, report, work)
    except Exception as exc:  # report it; the grader turns this into a "crashed" row
        report.event(event="end", status="crashed",
                     error=f"the grader's worker failed: {type(exc).__name__}: {exc}"[:300])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
