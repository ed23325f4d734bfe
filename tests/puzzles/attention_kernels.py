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
DECODE = inspect.getsource(_ref.decode_attention_kernel)


def _edited(name, *edits, base=None):
    src = base or FLASH
    src = src.replace(src[4:src.index("(")], name, 1)
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


#: An honest variant: exp of natural-log scores, the running maximum in those units.
honest_flash_natural_exp = _edited(
    "honest_flash_natural_exp",
    ("scale = 1.4426950408889634 / 128 ** 0.5", "scale = 1 / 128 ** 0.5"),
    ("a0 = np.exp2(m0 - x0)", "a0 = np.exp(m0 - x0)"),
    ("a1 = np.exp2(m1 - x1)", "a1 = np.exp(m1 - x1)"),
    ("s[4 * nt + i] = np.exp2(s[4 * nt + i] - m0)", "s[4 * nt + i] = np.exp(s[4 * nt + i] - m0)"),
    ("s[4 * nt + 2 + i] = np.exp2(s[4 * nt + 2 + i] - m1)",
     "s[4 * nt + 2 + i] = np.exp(s[4 * nt + 2 + i] - m1)"))

#: An honest variant of decoding: natural exp, as above.
honest_decode_natural_exp = _edited(
    "honest_decode_natural_exp",
    ("scale = 1.4426950408889634 / 128 ** 0.5", "scale = 1 / 128 ** 0.5"),
    ("a = np.exp2(m - mn)", "a = np.exp(m - mn)"),
    ("p = np.exp2(x - mn)", "p = np.exp(x - mn)"),
    ("w = np.exp2(stat[0, g] - top)", "w = np.exp(stat[0, g] - top)"), base=DECODE)

#: K's rows 256 bytes apart: the two rows a warp reads fall on the same 8 banks.
decode_k_unpadded = _edited("decode_k_unpadded", ("sk = t.shared((2, 32, 144)", "sk = t.shared((2, 32, 128)"),
                            base=DECODE)

#: V's later tiles copied 4 halves (8 bytes) at a time: twice the copies, 8 sectors a request.
decode_v_in_8_byte_copies = _edited(
    "decode_v_in_8_byte_copies",
    ("                t.copy_async(sv, (1 - s, f // 16, f % 16 * 8), v, head + (j + 32) * 128 + f * 8, 8)\n",
     "                for w in range(2):\n"
     "                    t.copy_async(sv, (1 - s, f // 16, f % 16 * 8 + 4 * w), v,\n"
     "                                 head + (j + 32) * 128 + f * 8 + 4 * w, 4)\n"), base=DECODE)

#: A barrier before each tile's scores as well.
decode_two_barriers = _edited(
    "decode_two_barriers",
    ("        if j == 0:\n", "        t.sync()\n        if j == 0:\n"), base=DECODE)
