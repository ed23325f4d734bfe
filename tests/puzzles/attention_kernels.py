"""Kernels for the attention puzzles' tests, each the worked kernel with one change (the
source edited, so that they stay in step with it): correct kernels that break one budget, and
one without the online softmax's rescale, which is wrong."""

import importlib.util
import inspect
from pathlib import Path

from gpu_lessons.puzzles import kernel_from_source

_spec = importlib.util.spec_from_file_location(
    "puzzle_kernels", Path(__file__).resolve().parents[2] / "solutions" / "puzzle_kernels.py")
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)
FLASH = inspect.getsource(_ref.flash_attention_kernel)


def _edited(name, *edits):
    src = FLASH.replace("def flash_attention_kernel", f"def {name}")
    for old, new in edits:
        assert src.count(old) >= 1, old
        src = src.replace(old, new, 1)
    return kernel_from_source(src)


#: The earlier tiles' sums and accumulators are never scaled down when the maximum grows.
flash_without_rescale = _edited(
    "flash_without_rescale",
    ("a0 = np.exp2(m0 - x0)", "a0 = t.local(1.0, np.float32)"),
    ("a1 = np.exp2(m1 - x1)", "a1 = t.local(1.0, np.float32)"))

#: Each lane writes its scores into its own part of o and reads them back: correct (o is
#: overwritten at the end), and the score matrix goes through global memory.
flash_scores_through_global = _edited(
    "flash_scores_through_global",
    ("        x0 = t.local(-np.inf, np.float32)\n",
     "        r = head + (q0 + wm + t.lane // 4) * 128 + 2 * (t.lane % 4)\n"
     "        for nt in range(8):\n"
     "            for i in range(2):\n"
     "                o[r + 8 * nt + i] = s[4 * nt + i]\n"
     "                o[r + 1024 + 8 * nt + i] = s[4 * nt + 2 + i]\n"
     "                s[4 * nt + i] = o[r + 8 * nt + i]\n"
     "                s[4 * nt + 2 + i] = o[r + 1024 + 8 * nt + i]\n"
     "        x0 = t.local(-np.inf, np.float32)\n"))

#: K's rows 256 bytes apart: the 8 rows of each ldmatrix matrix fall in one bank group.
flash_k_unpadded = _edited("flash_k_unpadded", ("sk = t.shared((64, 136)", "sk = t.shared((64, 128)"))

#: Every score product twice, once into a register nobody reads.
flash_scores_twice = _edited(
    "flash_scores_twice",
    ("    c = t.local((4,), np.float32)\n",
     "    c = t.local((4,), np.float32)\n    junk = t.local((4,), np.float32)\n"),
    ("                    t.mma(c, fa, fb, c)\n",
     "                    t.mma(junk, fa, fb, c)\n                    t.mma(c, fa, fb, c)\n"))

#: A second barrier after each tile of V.
flash_two_barriers_after_v = _edited(
    "flash_two_barriers_after_v",
    ("        t.sync()                                   # everyone is done with sv\n",
     "        t.sync()                                   # everyone is done with sv\n"
     "        t.sync()\n"))

#: K's tiles copied 4 halves (8 bytes) at a time: twice the copies.
flash_k_in_8_byte_copies = _edited(
    "flash_k_in_8_byte_copies",
    ("                t.copy_async(sk, (f // 16, f % 16 * 8), k,\n"
     "                             head + (j + 64 + f // 16) * 128 + f % 16 * 8, 8)\n",
     "                for w in range(2):\n"
     "                    t.copy_async(sk, (f // 16, f % 16 * 8 + 4 * w), k,\n"
     "                                 head + (j + 64 + f // 16) * 128 + f % 16 * 8 + 4 * w, 4)\n"))
