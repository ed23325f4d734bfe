"""Run every lesson notebook with its GPU cells enabled, on a machine with a GPU and CuPy.

    python3 tools/device/run_notebooks.py OUT_DIR [NOTEBOOK ...]

Executes each notebook top to bottom in a fresh kernel (nbclient), records its wall time, and
collects the text output of every GPU cell (a code cell that follows a markdown cell saying
"GPU cell (optional)", or a puzzle's cell that calls ``run_on_gpu``) into
``OUT_DIR/gpu_cells.md``; the executed notebooks go into
``OUT_DIR/executed.tar.gz``.  ``docs/measured/h200.md`` quotes the results.
"""

from __future__ import annotations

import glob
import io
import json
import sys
import tarfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def text_of(outputs) -> str:
    parts = []
    for out in outputs:
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", ""))
        elif out.get("output_type") == "error":
            parts.append(f"ERROR {out.get('ename')}: {out.get('evalue')}")
    return "".join(parts).strip()


def _is_puzzle_gpu_cell(source: str) -> bool:
    """A puzzle's optional GPU cell (exercise and solution notebooks): it calls run_on_gpu."""
    return "run_on_gpu(" in source


def main(out_dir: str, paths: list[str]) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = paths or sorted(glob.glob("notebooks/*.ipynb"))
    report, summary, failed = ["# GPU cells, executed", ""], [], 0
    tar = tarfile.open(out / "executed.tar.gz", "w:gz")  # noqa: SIM115 - closed after the loop
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(Path(path).parent)}})
        began, status = time.monotonic(), "ok"
        try:
            client.execute()
        except CellExecutionError as exc:
            status, failed = f"failed: {str(exc).splitlines()[-1][:200]}", failed + 1
        seconds = time.monotonic() - began
        summary.append({"notebook": path, "seconds": round(seconds, 1), "status": status})
        print(f"{path}: {status} in {seconds:.1f} s", flush=True)
        report += [f"## {path} ({seconds:.1f} s, {status})", ""]
        gpu_next = False
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                gpu_next = "GPU cell (optional)" in cell.source
                continue
            if gpu_next or _is_puzzle_gpu_cell(cell.source):
                report += ["```python", cell.source, "```", "```text",
                           text_of(cell.get("outputs", []))[:4000], "```", ""]
        data = nbformat.writes(nb).encode()
        info = tarfile.TarInfo(Path(path).as_posix().replace("/", "__"))
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    tar.close()
    (out / "gpu_cells.md").write_text("\n".join(report), encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
