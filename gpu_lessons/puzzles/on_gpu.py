"""Run a puzzle's kernel on a real GPU (translated to CUDA C) and time it.

Not built yet: the translation from the simulator's kernel language to CUDA C
(``gpu_lessons.cuda``) is on its way.  Until then the call says so — on a machine without a
CUDA GPU it prints the course's one skip line, as every GPU cell does.
"""

from __future__ import annotations


def run_on_gpu(puzzle_id, kernel, *, size=None, repeats=20):
    """Time ``kernel`` on puzzle ``puzzle_id`` at ``size`` (default: the puzzle's
    ``gpu_size``) on this machine's GPU, ``repeats`` times."""
    from ..measure import skip_line

    line = skip_line()
    if line is not None:
        print(line)
        return None
    raise NotImplementedError("running puzzle kernels on a GPU is coming: the CUDA translation "
                              "of simulator kernels is not part of this build yet")
