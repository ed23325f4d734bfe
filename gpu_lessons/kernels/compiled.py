"""What the GPU runs, without a GPU: a learner's kernel compiled to machine code on the CPU.

:func:`compile` translates the kernel (:func:`~gpu_lessons.kernels.to_cuda`), compiles the CUDA C
with NVRTC to a *cubin* for one architecture (``sm_90``: the H100 and H200) and reads what the
compiler decided:

* **registers per thread**, **local memory** (the stack frame: register spills and arrays the
  compiler could not keep in registers) and the spill stores and loads, and the **static shared
  memory** per block, from ptxas's resource report (``--ptxas-options=-v``: ``Used 12
  registers``, ``0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads``).  These are
  the numbers ``cudaFuncGetAttributes`` reports on a GPU (``numRegs``, ``localSizeBytes``,
  ``sharedSizeBytes``) for the same cubin, and what the occupancy calculator takes;
* the **PTX** (the virtual ISA NVRTC writes) and the **SASS** (the machine instructions in the
  cubin, printed by ``nvdisasm`` from the ``nvidia-cuda-nvdisasm`` wheel), each line tied to the
  CUDA line it comes from (``-lineinfo``: the cubin's line table, PTX's ``.loc``) and so to the
  learner's Python line (:attr:`~gpu_lessons.kernels.CudaSource.python_lines`).

It compiles with the options the kernel :func:`~gpu_lessons.kernels.run_on_gpu` launches is
compiled with: ``-fmad=false`` (unless ``exact=False``) and ``-ftz=true``, which CuPy's
``RawKernel`` adds to every compile (:data:`CUPY_OPTIONS`; ``ftz=False`` leaves it out), plus
``-lineinfo``, which adds the line table and leaves the instructions as they are.  So the
registers and SASS are those of the kernel ``run_on_gpu`` launches when the GPU's NVRTC is the
same version: registers and instruction choice change between compiler versions
(``docs/measured/h200.md``, "Registers and SASS of the worked kernels", records them against an
H200 for NVRTC 13.0).

>>> from gpu_lessons.kernels import compile
>>> import numpy as np
>>> def scale(t, x, out, n):
...     i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
...     t.return_if(i >= n)
...     out[i] = x[i] * 2.0
>>> ck = compile(scale, np.ones(256, np.float32), np.zeros(256, np.float32), 256)  # doctest: +SKIP
>>> ck.registers_per_thread, ck.local_bytes                                          # doctest: +SKIP
(10, 0)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .._format import Readout, Row
from . import nvrtc
from .cuda_c import to_cuda
from .lang import validate

#: Options CuPy's ``RawKernel`` adds to every NVRTC compile (``cupy/cuda/compiler.py``,
#: ``_compile_with_cache_cuda``): subnormal floats flushed to zero.
CUPY_OPTIONS = ("-ftz=true",)
#: ptxas -v: the resource lines of one entry function.
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?"
                   r"(?:, \d+ bytes cumulative stack size)?(?:, (\d+) bytes smem)?")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
#: nvdisasm: an instruction (``/*0070*/   LDC.64 R2, c[0x0][0x210] ;``), a line-table note
#: (``//## File "kernel.cu", line 15`` with ``inlined at "kernel.cu", line 30`` for an inlined
#: helper) and a branch label (``.L_x_0:``).
_SASS_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*$")
_SASS_LINE = re.compile(r'//## File "[^"]*", line (\d+)')
_SASS_INLINED = re.compile(r'inlined at "[^"]*", line (\d+)')
_SASS_LABEL = re.compile(r"^(\.L_\w+):\s*$")
#: PTX: ``.loc 1 15 5`` (file 1, line 15), possibly ``..., inlined_at 1 30 3``.
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(.*)$")
_PTX_INLINED = re.compile(r"inlined_at\s+\d+\s+(\d+)")


@dataclass(frozen=True)
class AsmLine:
    """One line of PTX or SASS: its text, the CUDA C line it comes from and the learner's Python
    line (``None`` where the compiler gives none: set-up code, padding, labels); ``address``: the
    SASS instruction's byte offset in the kernel (``None`` for PTX and for labels)."""

    text: str
    cuda_line: int | None
    python_line: int | None
    address: int | None = None


@dataclass(frozen=True, repr=False)
class CompiledKernel(Readout):
    """A kernel as NVRTC compiled it for ``arch`` (see the module docstring).

    ``registers_per_thread``, ``local_bytes`` (stack frame per thread), ``spill_store_bytes``,
    ``spill_load_bytes``, ``static_shared_bytes`` (per block; dynamic shared memory is chosen at
    launch), ``barriers``: ptxas's report.  ``cuda``: the :class:`~gpu_lessons.kernels.CudaSource`;
    ``python``: the learner's lines as ``(number, text)``; ``ptx`` (text) and ``ptx_lines``,
    ``sass``: :class:`AsmLine` tuples (``sass`` is empty, with a note, when ``nvdisasm`` is not
    installed); ``nvrtc``: NVRTC's version (``"13.0"``); ``disassembler``: nvdisasm's.
    """

    kernel: str
    arch: str
    nvrtc: str
    options: tuple
    registers_per_thread: int
    local_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    static_shared_bytes: int
    barriers: int
    cuda: object = field(repr=False)
    python: tuple = field(repr=False)
    ptx: str = field(repr=False)
    ptx_lines: tuple = field(repr=False)
    sass: tuple = field(repr=False)
    disassembler: str = ""
    notes: tuple = ()
    cubin: bytes = field(default=b"", repr=False)
    log: str = field(default="", repr=False)

    @property
    def registers(self) -> int:
        """Registers per thread (:attr:`registers_per_thread`)."""
        return self.registers_per_thread

    @property
    def spills(self) -> bool:
        """True when ptxas stored registers to local memory (device memory, cached in L1/L2)."""
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0

    @property
    def instructions(self) -> tuple[str, ...]:
        """The SASS instructions' text, in order (no addresses, labels or padding ``NOP``s after
        the kernel's last ``EXIT``/``BRA``): what two compilations compare by."""
        return sass_instructions(self.sass)

    def sass_text(self) -> str:
        """The SASS as text, one instruction a line with its address and Python line."""
        out = []
        for s in self.sass:
            where = f"  // line {s.python_line}" if s.python_line is not None else ""
            out.append(s.text if s.address is None else f"/*{s.address:04x}*/ {s.text}{where}")
        return "\n".join(out)

    def lines_for(self, python_line: int) -> dict[str, tuple[int, ...]]:
        """Indices (0-based) of the CUDA, PTX and SASS lines that come from ``python_line``."""
        return {"cuda": tuple(i for i, p in enumerate(self.cuda.python_lines) if p == python_line),
                "ptx": tuple(i for i, s in enumerate(self.ptx_lines) if s.python_line == python_line),
                "sass": tuple(i for i, s in enumerate(self.sass) if s.python_line == python_line)}

    def sass_per_python_line(self) -> dict[int, int]:
        """SASS instructions per Python line (lines the compiler gave instructions to)."""
        out: dict[int, int] = {}
        for s in self.sass:
            if s.address is not None and s.python_line is not None:
                out[s.python_line] = out.get(s.python_line, 0) + 1
        return out

    def occupancy(self, threads_per_block: int, *, dynamic_shared_bytes: int = 0,
                  carveout=None, cc: str | None = None):
        """:func:`gpu_lessons.occupancy.occupancy` with this kernel's registers and static shared
        memory (plus ``dynamic_shared_bytes``), on the compute capability of ``arch`` unless
        ``cc`` names another."""
        from .. import occupancy as _occupancy

        return _occupancy.occupancy(cc or arch_cc(self.arch), threads_per_block=threads_per_block,
                                    registers_per_thread=self.registers_per_thread,
                                    shared_mem_per_block=self.static_shared_bytes
                                    + dynamic_shared_bytes, carveout=carveout)

    def readout_title(self) -> str:
        return f"{self.kernel} compiled for {self.arch}"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("registers per thread", self.registers_per_thread),
                Row("local memory per thread (stack frame)", self.local_bytes, "B"),
                Row("register spills: stored", self.spill_store_bytes, "B"),
                Row("register spills: loaded", self.spill_load_bytes, "B"),
                Row("static shared memory per block", self.static_shared_bytes, "B"),
                Row("SASS instructions", len(self.instructions) if self.sass else "–"),
                Row("compiler", f"NVRTC {self.nvrtc}, {self.arch}, {' '.join(self.options)}"),
                *(Row("note", n) for n in self.notes))


def arch_cc(arch: str) -> str:
    """``"sm_90"`` → ``"9.0"``, ``"sm_120"`` → ``"12.0"``."""
    digits = arch.removeprefix("sm_")
    return f"{digits[:-1]}.{digits[-1]}"


def sass_instructions(sass) -> tuple[str, ...]:
    """The instructions of :class:`AsmLine` SASS, without the ``NOP`` padding after the last
    ``EXIT`` or ``BRA`` (the padding rounds the code up to 128 bytes and says nothing)."""
    out = [" ".join(s.text.split()) for s in sass if s.address is not None]
    while out and out[-1] == "NOP":
        out.pop()
    return tuple(out)


def _check_arch(arch, lib) -> str:
    if not isinstance(arch, str):
        raise TypeError(f"arch must be a string like 'sm_90', got {type(arch).__name__} {arch!r}")
    supported = nvrtc.supported_archs(lib)
    m = re.fullmatch(r"sm_(\d+)", arch)
    if m is None or int(m.group(1)) not in supported:
        allowed = ", ".join(f"sm_{a}" for a in supported)
        raise ValueError(f"arch={arch!r} is not an architecture this NVRTC compiles for: "
                         f"choose one of {allowed}")
    return arch


def ptxas_resources(log: str, kernel: str) -> dict:
    """Registers, barriers, static shared memory, stack frame and spill bytes of entry function
    ``kernel`` from a ``ptxas -v`` log."""
    lines = log.splitlines()
    try:
        start = next(i for i, line in enumerate(lines)
                     if "Compiling entry function" in line and f"'{kernel}'" in line)
    except StopIteration:
        raise ValueError(f"no ptxas report for {kernel!r} in the compiler's log:\n{log}") from None
    block = "\n".join(lines[start:start + 6])
    used, frame = _USED.search(block), _FRAME.search(block)
    if used is None or frame is None:
        raise ValueError(f"no ptxas report for {kernel!r} in:\n{block}")
    return {"registers_per_thread": int(used.group(1)), "barriers": int(used.group(2) or 0),
            "static_shared_bytes": int(used.group(3) or 0), "local_bytes": int(frame.group(1)),
            "spill_store_bytes": int(frame.group(2)), "spill_load_bytes": int(frame.group(3))}


def nvdisasm_path() -> str | None:
    """The ``nvdisasm`` program: the ``nvidia-cuda-nvdisasm`` wheel's, else one on ``PATH``."""
    import glob
    import os
    import shutil
    import sys

    for base in sys.path:
        for path in sorted(glob.glob(os.path.join(base, "nvidia", "cu*", "bin", "nvdisasm"))):
            if os.access(path, os.X_OK):
                return path
    return shutil.which("nvdisasm")


def nvdisasm_version(path: str) -> str:
    """``"13.2.86"``, from ``nvdisasm --version``."""
    import subprocess

    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"V(\d+\.\d+\.\d+)", out)
    return m.group(1) if m else out.strip().splitlines()[-1] if out.strip() else "?"


def disassemble(cubin: bytes, path: str | None = None) -> str:
    """``nvdisasm -c -gi`` of a cubin: the code sections, with the line table (inlined helpers
    named with the line they were called from)."""
    import os
    import subprocess
    import tempfile

    path = path or nvdisasm_path()
    if path is None:
        raise RuntimeError("nvdisasm is not installed (pip install nvidia-cuda-nvdisasm)")
    with tempfile.TemporaryDirectory() as tmp:
        file = os.path.join(tmp, "kernel.cubin")
        with open(file, "wb") as f:
            f.write(cubin)
        done = subprocess.run([path, "-c", "-gi", file], capture_output=True, text=True,
                              check=False)
    if done.returncode != 0:
        raise RuntimeError(f"nvdisasm failed: {done.stderr.strip()[:400]}")
    return done.stdout


def parse_sass(text: str, python_lines=()) -> tuple[AsmLine, ...]:
    """nvdisasm's output as :class:`AsmLine` s; ``python_lines``: the CUDA source's
    :attr:`~gpu_lessons.kernels.CudaSource.python_lines`, to map CUDA lines to Python lines."""
    out, cuda_line = [], None
    for raw in text.splitlines():
        m = _SASS_LINE.search(raw)
        if m is not None:
            inlined = _SASS_INLINED.findall(raw)
            cuda_line = int(inlined[-1] if inlined else m.group(1))
            continue
        m = _SASS_INSTR.match(raw)
        if m is not None:
            out.append(AsmLine(m.group(2), cuda_line, _python_of(cuda_line, python_lines),
                               int(m.group(1), 16)))
            continue
        m = _SASS_LABEL.match(raw.strip())
        if m is not None and out:
            out.append(AsmLine(m.group(1) + ":", None, None))
    return tuple(out)


def parse_ptx(ptx: str, python_lines=()) -> tuple[AsmLine, ...]:
    """PTX lines tied to CUDA lines by the ``.loc`` directive before them (file 1 is the
    kernel's source); the ``.loc`` lines themselves and debug sections are left out."""
    out, cuda_line = [], None
    for raw in ptx.splitlines():
        m = _PTX_LOC.match(raw)
        if m is not None:
            inlined = _PTX_INLINED.search(m.group(3))
            cuda_line = int(inlined.group(1)) if inlined else int(m.group(2)) or None
            continue
        if raw.lstrip().startswith(".section") or raw.lstrip().startswith(".file"):
            if raw.lstrip().startswith(".section"):
                break   # the DWARF sections at the end
            continue
        line = cuda_line if raw.strip() and not raw.strip().startswith("//") else None
        out.append(AsmLine(raw.rstrip(), line, _python_of(line, python_lines)))
    return tuple(out)


def _python_of(cuda_line, python_lines):
    if cuda_line is None or not 1 <= cuda_line <= len(python_lines):
        return None
    return python_lines[cuda_line - 1]


def compile(kernel, *args, arch: str = "sm_90", exact: bool = True,
            ftz: bool = True) -> CompiledKernel:
    """Compile ``kernel`` for ``args`` to ``arch`` machine code with NVRTC, on the CPU.

    ``kernel`` and ``args`` as for :func:`~gpu_lessons.kernels.to_cuda` (arrays give element
    types and shapes; the values are not used); ``arch``: ``"sm_90"`` (Hopper: H100, H200) or
    another real architecture NVRTC knows (``"sm_80"``: A100); ``exact``: compile with
    ``-fmad=false`` as :func:`~gpu_lessons.kernels.run_on_gpu` does by default; ``ftz``: add
    CuPy's ``-ftz=true`` (:data:`CUPY_OPTIONS`), as every ``run_on_gpu`` compile has.  Returns a
    :class:`CompiledKernel`.  Raises ``RuntimeError`` when NVRTC is not installed (``pip install
    nvidia-cuda-nvrtc``); without ``nvdisasm`` the result has no SASS and says so in ``notes``.
    """
    for name, value in (("exact", exact), ("ftz", ftz)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")
    lib = nvrtc.newest_library()
    if lib is None:
        raise RuntimeError("NVRTC is not installed (pip install nvidia-cuda-nvrtc): compile() "
                           "needs it to turn CUDA C into machine code")
    arch = _check_arch(arch, lib)
    source = to_cuda(kernel, *args)
    options = (*(source.options if exact else ()), *(CUPY_OPTIONS if ftz else ()), "-lineinfo",
               "--ptxas-options=-v")
    result = nvrtc.compile_cubin(str(source), arch, options)
    if not result.ok:   # the translation is CUDA C that NVRTC compiles: a failure is a bug
        raise RuntimeError(f"NVRTC could not compile the translation of {source.kernel_name}:\n"
                           f"{result.log}")
    res = ptxas_resources(result.log, source.kernel_name)
    notes, sass, disassembler = [], (), ""
    tool = nvdisasm_path()
    if tool is None:
        notes.append("no SASS: nvdisasm is not installed (pip install nvidia-cuda-nvdisasm)")
    else:
        sass = parse_sass(disassemble(result.cubin, tool), source.python_lines)
        disassembler = f"nvdisasm {nvdisasm_version(tool)}"
    k = validate(kernel)
    python = tuple((i + 1 + k.line_offset, line) for i, line in enumerate(k.lines)
                   if i + 1 >= k.tree.lineno)
    return CompiledKernel(source.kernel_name, arch, ".".join(map(str, result.version)),
                          options, cuda=source, python=python, ptx=result.ptx,
                          ptx_lines=parse_ptx(result.ptx, source.python_lines), sass=sass,
                          disassembler=disassembler, notes=tuple(notes), cubin=result.cubin,
                          log=result.log, **res)
