"""NVRTC through ctypes: CUDA C to PTX (and a cubin) without a GPU."""

from __future__ import annotations

from dataclasses import dataclass

from .cuda_types import EXACT_OPTIONS

# -- compiling without a GPU ----------------------------------------------------------------------

_NVRTC = None


def nvrtc_library():
    """The NVRTC shared library (ctypes), from the ``nvidia-cuda-nvrtc-cu12`` wheel or the
    system's CUDA; ``None`` when there is none.  NVRTC compiles CUDA C to PTX without a GPU."""
    global _NVRTC
    if _NVRTC is not None:
        return _NVRTC or None
    import ctypes
    import glob
    import os
    import sys

    candidates = []
    for base in sys.path:
        candidates += sorted(glob.glob(os.path.join(base, "nvidia", "cuda_nvrtc", "lib",
                                                    "libnvrtc.so*")))
    candidates += ["libnvrtc.so", "libnvrtc.so.12", "libnvrtc.so.13"]
    for path in candidates:
        if "builtins" in path or ".alt." in path:
            continue
        try:
            _NVRTC = ctypes.CDLL(path)
            return _NVRTC
        except OSError:
            continue
    _NVRTC = False
    return None


@dataclass(frozen=True)
class Compiled:
    """NVRTC's answer: ``ok``, the PTX text and the compiler's log."""

    ok: bool
    ptx: str
    log: str
    arch: str


def compile_ptx(source: str, arch: str = "sm_90", options=EXACT_OPTIONS) -> Compiled:
    """Compile CUDA C ``source`` to PTX for ``arch`` with NVRTC (no GPU needed)."""
    import ctypes

    lib = nvrtc_library()
    if lib is None:
        raise RuntimeError("NVRTC is not installed (pip install nvidia-cuda-nvrtc-cu12)")
    prog = ctypes.c_void_p()
    src = str(source).encode()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"kernel.cu", 0, None, None)
    if rc != 0:
        raise RuntimeError(f"nvrtcCreateProgram failed with code {rc}")
    opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in options)]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    try:
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        ptx = ""
        if rc == 0:
            lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
            pbuf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetPTX(prog, pbuf)
            ptx = pbuf.value.decode(errors="replace")
        return Compiled(rc == 0, ptx, log, arch)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))

