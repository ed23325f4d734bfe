"""NVRTC through ctypes: CUDA C to PTX (and a cubin) without a GPU."""

from __future__ import annotations

from dataclasses import dataclass

from .cuda_types import EXACT_OPTIONS

# -- compiling without a GPU ----------------------------------------------------------------------

_NVRTC = None
_ALL: list | None = None

#: Where NVRTC's wheels put the library: ``nvidia-cuda-nvrtc-cu12`` (CUDA 12) and
#: ``nvidia-cuda-nvrtc`` (CUDA 13 and later).
_WHEEL_DIRS = (("nvidia", "cuda_nvrtc", "lib"), ("nvidia", "cu13", "lib"))


def _load(path: str):
    """``ctypes.CDLL(path)``, after loading the builtins library beside it: NVRTC opens
    ``libnvrtc-builtins.so.X.Y`` by name at its first compile, and a wheel's directory is not on
    the loader's search path (an already loaded library of that name is found)."""
    import contextlib
    import ctypes
    import glob
    import os

    folder = os.path.dirname(path)
    if folder:
        for builtins in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so.*"))):
            if ".alt." not in builtins:
                with contextlib.suppress(OSError):
                    ctypes.CDLL(builtins)
    return ctypes.CDLL(path)


def _candidates() -> list[str]:
    import glob
    import os
    import sys

    candidates = []
    for parts in _WHEEL_DIRS:
        for base in sys.path:
            candidates += sorted(glob.glob(os.path.join(base, *parts, "libnvrtc.so*")))
    candidates += ["libnvrtc.so", "libnvrtc.so.12", "libnvrtc.so.13"]
    return [c for c in candidates if "builtins" not in c and ".alt." not in c]


def nvrtc_library():
    """The NVRTC shared library (ctypes), from the ``nvidia-cuda-nvrtc-cu12`` wheel, the
    ``nvidia-cuda-nvrtc`` (CUDA 13) wheel or the system's CUDA, in that order; ``None`` when there
    is none.  NVRTC compiles CUDA C to PTX without a GPU."""
    global _NVRTC
    if _NVRTC is not None:
        return _NVRTC or None
    for path in _candidates():
        try:
            _NVRTC = _load(path)
            return _NVRTC
        except OSError:
            continue
    _NVRTC = False
    return None


def version(lib) -> tuple[int, int]:
    """``(major, minor)`` of an NVRTC library (``nvrtcVersion``)."""
    import ctypes

    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def newest_library():
    """The newest NVRTC installed (``None`` when there is none): ``compile_cubin`` uses it, since
    a cubin is only as good as the compiler that made it.  With both wheels of the test extra
    installed that is the CUDA 13 one, the version CuPy's ``cupy-cuda13x`` compiles with."""
    global _ALL
    if _ALL is None:
        found, seen = [], set()
        for path in _candidates():
            try:
                lib = _load(path)
            except OSError:
                continue
            v = version(lib)
            if v not in seen:
                seen.add(v)
                found.append((v, lib))
        _ALL = sorted(found, key=lambda f: f[0])
    return _ALL[-1][1] if _ALL else None


def supported_archs(lib) -> tuple[int, ...]:
    """The ``sm_XX`` numbers this NVRTC compiles for (``nvrtcGetSupportedArchs``)."""
    import ctypes

    n = ctypes.c_int()
    lib.nvrtcGetNumSupportedArchs(ctypes.byref(n))
    arr = (ctypes.c_int * n.value)()
    lib.nvrtcGetSupportedArchs(arr)
    return tuple(arr)


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



@dataclass(frozen=True)
class Cubin:
    """NVRTC's cubin (machine code for one ``sm_XX``) for a source: ``ok``, the cubin's bytes,
    the PTX it was assembled from, the compiler's log (with ``--ptxas-options=-v``, ptxas's
    resource report), the options and NVRTC's ``(major, minor)`` version."""

    ok: bool
    cubin: bytes
    ptx: str
    log: str
    arch: str
    options: tuple
    version: tuple


def compile_cubin(source: str, arch: str = "sm_90", options=EXACT_OPTIONS) -> Cubin:
    """Compile CUDA C ``source`` to a cubin for ``arch`` (``"sm_90"``: a real architecture, not
    ``compute_90``) with the newest NVRTC installed (:func:`newest_library`); no GPU needed."""
    import ctypes

    lib = newest_library()
    if lib is None:
        raise RuntimeError("NVRTC is not installed (pip install nvidia-cuda-nvrtc)")
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), str(source).encode(), b"kernel.cu", 0, None,
                                None)
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
        ptx, cubin = "", b""
        if rc == 0:
            lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
            pbuf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetPTX(prog, pbuf)
            ptx = pbuf.value.decode(errors="replace")
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
            cbuf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetCUBIN(prog, cbuf)
            cubin = cbuf.raw[:size.value]
        return Cubin(rc == 0, cubin, ptx, log, arch, tuple(options), version(lib))
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
