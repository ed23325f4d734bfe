"""Write the adversarial submissions that tests/test_grade.py grades (chapter 05).

Run ``python tests/submissions/make_submissions.py`` after changing a notebook here; the
.ipynb files are kept in git so an instructor can open them and see what each one tries.
Every notebook answers the three sample questions of chapter 05 (05.ridge_h100,
05.axpy_bound, 05.kernel_time); the file name says what else it does.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

IMPORT = "from gpu_lessons.checks import check"
# 989.4 TFLOP/s / 3.35 TB/s from the H100 whitepaper: the dense FP16 ridge point.
RIDGE = "ridge_h100 = 989.4e12 / 3.35e12\ncheck('05.ridge_h100', ridge_h100)"
AXPY = "axpy_bound = 'memory-bound'\ncheck('05.axpy_bound', axpy_bound)"
KTIME = ("def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
         "    return max(flops / peak_flops, bytes_moved / bandwidth)\n"
         "check('05.kernel_time', kernel_time)")
GOOD = [IMPORT, RIDGE, AXPY, KTIME]
# Tests set GPU_LESSONS_TEST_PIDS to a folder; the kernel records its PID there, so a test can
# prove the grader killed it.
RECORD_PID = ("import os\n\n"
              "_d = os.environ.get('GPU_LESSONS_TEST_PIDS')\n"
              "if _d:\n"
              "    with open(os.path.join(_d, 'sigint_ignored.pid'), 'w') as f:\n"
              "        f.write(str(os.getpid()))")

NOTEBOOKS = {
    # A complete, correct submission: 5/5.
    "good_05.ipynb": GOOD,
    # The exercise as handed out: every answer still a stub -> "not attempted", no errors.
    "stub_05.ipynb": [
        IMPORT,
        "ridge_h100 = ...  # FLOP/byte\ncheck('05.ridge_h100', ridge_h100)",
        "axpy_bound = ...\ncheck('05.axpy_bound', axpy_bound)",
        "def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
        "    raise NotImplementedError  # your code here\n"
        "check('05.kernel_time', kernel_time)",
    ],
    # Cells that raise, call sys.exit() and print ~5 MB, then correct answers: all still count.
    "errors_05.ipynb": [
        "1 / 0",
        "import sys\n\nsys.exit('bye')",
        "for _ in range(50_000):\n    print('x' * 100)",
        *GOOD,
    ],
    # An endless loop (interruptible), then correct answers for two questions and a
    # kernel_time that never returns for compute-bound inputs.
    "loop_05.ipynb": [
        "while True:\n    pass",
        IMPORT, RIDGE, AXPY,
        "def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
        "    while flops / peak_flops > bytes_moved / bandwidth:\n"
        "        pass\n"
        "    return bytes_moved / bandwidth",
    ],
    # Answers, then a loop with SIGINT ignored: only the hard per-notebook kill stops it.
    "sigint_05.ipynb": [
        *GOOD,
        RECORD_PID,
        "import signal\n\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
    ],
    # The kernel process exits in the middle.
    "osexit_05.ipynb": [IMPORT, RIDGE, "import os\n\nos._exit(3)", AXPY, KTIME],
    # Wrong answers dressed up: check redefined, the package monkeypatched so the notebook's
    # own checks pass, an answer object whose == is always True, and a fake success banner.
    "tamper_05.ipynb": [
        "import gpu_lessons.checks as C\n"
        "import gpu_lessons.questions.ch05 as ch05\n"
        "from gpu_lessons import hardware\n\n"
        "hardware.GPU.ridge_point = lambda self, *a, **k: 1.0\n"
        "ch05._ridge_h100_fp16 = lambda: 1.0\n"
        "ch05._axpy_bound = lambda: 'compute-bound'\n"
        "ch05._kernel_time_reference = lambda flops, bytes_moved, peak_flops, bandwidth: 1.0\n"
        "C._close = lambda *a, **k: True\n"
        "C.check = check = lambda *a, **k: print('✓ correct')",
        "ridge_h100 = 1.0\nC.check('05.ridge_h100', ridge_h100)",
        "class Agreeable(str):\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    __hash__ = str.__hash__\n"
        "axpy_bound = Agreeable('compute-bound')\ncheck('05.axpy_bound', axpy_bound)",
        "def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
        "    return 1.0\n"
        "check('05.kernel_time', kernel_time)",
        "print('All tests passed! Score: 5/5')",
    ],
    # Correct answers that pass their checks and are then overwritten with wrong ones, and a
    # wrong answer fixed after its check failed: the final state is what counts.
    "edited_05.ipynb": [
        *GOOD,
        "ridge_h100 = 2 * ridge_h100",
        "def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
        "    return flops / peak_flops + bytes_moved / bandwidth",
        "axpy_bound = 'compute-bound'\ncheck('05.axpy_bound', axpy_bound)",
        "axpy_bound = 'memory-bound'",
    ],
}


def write_all(folder: Path = HERE) -> list[Path]:
    written = []
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=[new_markdown_cell(f"Test submission `{name}`"),
                                 *(new_code_cell(src) for src in cells)])
        nb.metadata["gpu_lessons"] = {"chapter": 5}
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        path = folder / name
        nbformat.write(nb, path)
        written.append(path)
    return written


def write_invalid(folder: Path) -> list[Path]:
    """Files that are not notebooks: a truncated download and JSON of the wrong shape.

    Written at test time into a scratch folder (not kept in git: linters and editors choke
    on them).
    """
    truncated, wrong_shape = folder / "truncated_05.ipynb", folder / "notanotebook_05.ipynb"
    truncated.write_text('{"cells": [{"cell_type": "code", "sou', "utf-8")
    wrong_shape.write_text('["just", "a", "list"]', "utf-8")
    return [truncated, wrong_shape]


if __name__ == "__main__":
    for p in write_all():
        print(p)
