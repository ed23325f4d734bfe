"""What the compiler makes of a kernel's translation, without a GPU: registers per thread.

The translation (:func:`gpu_lessons.kernels.to_cuda`) is compiled for ``sm_90`` by NVRTC to a
cubin, and the register count is read from the cubin's ``.nv.info`` attributes
(``EIATTR_REGCOUNT``), the figure ``cuobjdump -res-usage`` prints and the CUDA runtime reports
as ``cudaFuncAttributes.numRegs``.  This is the seam for the kernel toolchain's
``compile(kernel, *args, arch=...)``: where that exists, :func:`registers` uses it.
"""

from __future__ import annotations

import ctypes
import struct
from functools import lru_cache

EIATTR_REGCOUNT = 0x2F
EIFMT_SVAL = 4


def cubin(source: str, arch: str = "sm_90", options=()) -> bytes:
    """NVRTC's cubin for CUDA C ``source`` (raises RuntimeError without NVRTC or on an
    error)."""
    from ..kernels.nvrtc import nvrtc_library

    lib = nvrtc_library()
    if lib is None:
        raise RuntimeError("NVRTC is not installed (pip install nvidia-cuda-nvrtc-cu12)")
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None,
                              None):
        raise RuntimeError("nvrtcCreateProgram failed")
    opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in options)]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    try:
        if lib.nvrtcCompileProgram(prog, len(opts), arr):
            raise RuntimeError("NVRTC could not compile the kernel")
        size = ctypes.c_size_t()
        if lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)):
            raise RuntimeError("this NVRTC cannot produce a cubin")
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetCUBIN(prog, buf)
        return buf.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def cubin_registers(data: bytes) -> dict[int, int]:
    """Symbol index -> registers, from every ``.nv.info`` section of an ELF cubin."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)]
    names_off = sections[shstrndx][4]
    out = {}
    for name, _, _, _, off, size, *_ in sections:
        label = data[names_off + name:data.index(b"\0", names_off + name)]
        if not label.startswith(b".nv.info"):
            continue
        p = off
        while p + 4 <= off + size:
            fmt, attr, length = data[p], data[p + 1], struct.unpack_from("<H", data, p + 2)[0]
            if fmt != EIFMT_SVAL:
                p += 4
                continue
            if attr == EIATTR_REGCOUNT and length >= 8:
                sym, regs = struct.unpack_from("<II", data, p + 4)
                out[sym] = regs
            p += 4 + length
    return out


@lru_cache(maxsize=256)
def _registers_of_source(source: str, exact: bool) -> int:
    from ..kernels.cuda_types import EXACT_OPTIONS

    regs = cubin_registers(cubin(source, options=EXACT_OPTIONS if exact else ()))
    if not regs:
        raise RuntimeError("the cubin names no register count")
    return max(regs.values())


def registers(kernel, args, *, exact: bool = True) -> int:
    """Registers per thread of ``kernel``'s translation at ``args`` (sm_90)."""
    try:
        from ..kernels import compile as toolchain_compile  # the kernel toolchain, if present
    except ImportError:
        toolchain_compile = None
    if toolchain_compile is not None:
        ck = toolchain_compile(kernel, *args, arch="sm_90")
        return int(ck.registers)
    from ..kernels import to_cuda

    return _registers_of_source(str(to_cuda(kernel, *args)), bool(exact))
