"""One kernel four ways, side by side: the learner's Python, the CUDA C it becomes, the PTX NVRTC
writes and the SASS the GPU runs (what Compiler Explorer shows for CUDA, joined to the learner's
own Python).  Pick a Python line and every column marks the lines that come from it.

The model is :func:`gpu_lessons.kernels.compile`; this view only lays out what it returns
(``CompiledKernel.lines_for``, ``sass_per_python_line``).
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from ._base import LAYOUT, STYLE, Explorer

_MARK = "#FFE9A8"   # the chosen line's rows
_COLUMN = ("<div style='flex:1;min-width:0'><b>{title}</b><div style='font-family:monospace;"
           "font-size:11px;white-space:pre;overflow:auto;max-height:460px;border:1px solid "
           "#ddd;padding:2px'>{rows}</div></div>")


def _rows(lines, marked) -> str:
    out = []
    for i, text in enumerate(lines):
        style = f" style='background:{_MARK}'" if i in marked else ""
        out.append(f"<div{style}>{html.escape(text) or '&nbsp;'}</div>")
    return "".join(out)


class CompiledExplorer(Explorer):
    """Python | CUDA C | PTX | SASS of one :class:`~gpu_lessons.kernels.CompiledKernel`."""

    title = "What the GPU runs: Python, CUDA C, PTX and SASS"

    def __init__(self, compiled):
        self.ck = compiled
        counts = compiled.sass_per_python_line()
        options = [(f"line {n}: {text.strip()[:60]}"
                    + (f"  ({counts[n]} SASS)" if n in counts else ""), n)
                   for n, text in compiled.python if text.strip()]
        first = max(counts, key=counts.get) if counts else options[0][1]
        line = widgets.Dropdown(options=options, value=first, description="Python line",
                                style=STYLE, layout=LAYOUT)
        notes = html.escape("; ".join(f"{r.label}: {r.text}" for r in compiled.readout_rows()))
        super().__init__({"line": line}, [], notes=notes)

    def _update(self) -> None:
        ck, n = self.ck, self.controls["line"].value
        marks = ck.lines_for(n)
        py = [f"{k:>4}  {text}" for k, text in ck.python]
        py_marked = {i for i, (k, _) in enumerate(ck.python) if k == n}
        sass = [s.text if s.address is None else f"/*{s.address:04x}*/ {s.text}" for s in ck.sass]
        columns = [("Python", py, py_marked),
                   ("CUDA C", str(ck.cuda).split("\n"), set(marks["cuda"])),
                   (f"PTX ({ck.arch})", [p.text for p in ck.ptx_lines], set(marks["ptx"])),
                   (f"SASS ({ck.disassembler or 'not installed'})", sass, set(marks["sass"]))]
        self.readout.value = ("<div style='display:flex;gap:6px'>"
                              + "".join(_COLUMN.format(title=html.escape(t), rows=_rows(lines, m))
                                        for t, lines, m in columns) + "</div>")
        self.warning.value = "".join(f"<small>{html.escape(x)}</small>" for x in ck.notes)


def compiled_explorer(kernel, *args, arch: str = "sm_90") -> CompiledExplorer | None:
    """Compile ``kernel`` for ``args`` (:func:`gpu_lessons.kernels.compile`) and show it four
    ways; ``kernel`` may also be a :class:`~gpu_lessons.kernels.CompiledKernel` already made.
    Without NVRTC it prints one line saying so and returns ``None``."""
    from ..kernels import CompiledKernel, compile, nvrtc

    if not isinstance(kernel, CompiledKernel) and nvrtc.newest_library() is None:
        print("NVRTC is not installed, so there is no machine code to show "
              "(pip install nvidia-cuda-nvrtc nvidia-cuda-nvdisasm)")
        return None
    ck = kernel if isinstance(kernel, CompiledKernel) else compile(kernel, *args, arch=arch)
    return CompiledExplorer(ck)
