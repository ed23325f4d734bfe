"""What the compiler makes of a kernel's translation, without a GPU: registers per thread, and
how many shared-memory instructions its SASS spends per element it moves.

Both come from the kernel toolchain's :func:`gpu_lessons.kernels.compile`: NVRTC's cubin for
``sm_90`` (the register count the CUDA runtime reports as ``cudaFuncAttributes.numRegs``) and
its SASS, disassembled by nvdisasm.
"""

from __future__ import annotations

#: SASS shared-memory access -> elements of 4 bytes it moves (``LDS.128``: four floats)
_WIDTH = {"": 1, "U8": 1, "S8": 1, "U16": 1, "S16": 1, "32": 1, "64": 2, "128": 4}


def shared_widths(sass) -> dict[str, float]:
    """``{"ld": r, "st": r}``: shared-memory load and store instructions per 4-byte element
    moved, over the SASS listing ``sass`` (:class:`gpu_lessons.kernels.compiled.AsmLine`
    lines).  The compiler merges neighbouring scalar accesses of a row into ``LDS.64`` or
    ``LDS.128`` (a tiled product's ``sa[ty, k]`` over an unrolled ``k``), which the simulator,
    counting one access per Python operation, cannot see: ``r`` < 1 then.  1 where the kernel
    has none."""
    out = {}
    for op, key in (("LDS", "ld"), ("STS", "st")):
        instr = elems = 0
        for line in sass:
            words = line.text.split()
            if words and words[0].startswith("@"):
                words = words[1:]
            if not words:
                continue
            head, _, suffix = words[0].partition(".")
            if head != op:
                continue
            widths = [_WIDTH[w] for w in suffix.split(".") if w in _WIDTH]
            instr += 1
            elems += max(widths, default=1)
        out[key] = instr / elems if elems else 1.0
    return out


#: (CUDA translation, exact) -> facts: the same source compiles to the same SASS
_SEEN: dict = {}


def facts(kernel, args, *, exact: bool = True) -> tuple[int, dict[str, float]]:
    """``(registers per thread, shared_widths)`` of ``kernel``'s translation at ``args``,
    compiled for sm_90 as ``run_on_gpu`` builds it (``exact``: ``-fmad=false``).  Raises
    RuntimeError without NVRTC; without ``nvdisasm`` the widths are 1.  A translation
    compiled before is not compiled again."""
    from ..kernels import compile as toolchain_compile
    from ..kernels.cuda_c import to_cuda

    try:
        key = (str(to_cuda(kernel, *args)), bool(exact))
    except Exception:  # no translation: the toolchain's own error below says why
        key = None
    if key in _SEEN:
        return _SEEN[key][0], dict(_SEEN[key][1])
    ck = toolchain_compile(kernel, *args, arch="sm_90", exact=exact)
    out = int(ck.registers), shared_widths(ck.sass or ())
    if key is not None:
        if len(_SEEN) >= 256:
            _SEEN.clear()
        _SEEN[key] = out
    return out


def registers(kernel, args, *, exact: bool = True) -> int:
    """Registers per thread of ``kernel``'s translation at ``args`` (sm_90)."""
    return facts(kernel, args, exact=exact)[0]
