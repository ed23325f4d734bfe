"""``gpu_lessons.kernels.compile``: a kernel's cubin from NVRTC on the CPU, its resources, PTX
and SASS, each line tied to the CUDA line and the learner's Python line; the puzzles' occupancy
from the compiled register count; the side-by-side view.  The H200's agreement is
tests/kernels/test_registers_h200.py."""

import numpy as np
import pytest

from gpu_lessons.kernels import CompiledKernel, compile, compiled, nvrtc, to_cuda

needs_nvrtc = pytest.mark.skipif(nvrtc.newest_library() is None,
                                 reason="NVRTC is not installed (the test extra brings it)")
needs_nvdisasm = pytest.mark.skipif(compiled.nvdisasm_path() is None,
                                    reason="nvdisasm is not installed (the test extra brings it)")


def leaky(t, x, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    v = x[i]
    with t.if_(v > 0):
        out[i] = v
    with t.else_():
        out[i] = v * 0.01


def tiled(t, x, out, n):
    tile = t.shared(128, np.float32)
    i = t.block_idx.x * 128 + t.thread_idx.x
    tile[t.thread_idx.x] = x[i]
    t.sync()
    out[i] = tile[127 - t.thread_idx.x]


def _args(n=256):
    return np.ones(n, np.float32), np.zeros(n, np.float32), n


def test_python_lines_name_the_learner_line_of_every_translated_line():
    import inspect

    src = to_cuda(leaky, *_args())
    lines = str(src).split("\n")
    assert len(src.python_lines) == len(lines) - 1      # the text ends with a newline
    first = inspect.getsourcelines(leaky)[1]
    with open(inspect.getsourcefile(leaky)) as f:
        file_lines = f.read().splitlines()
    for text, py in zip(lines, src.python_lines, strict=False):
        if py is None:
            assert "//" not in text or text.startswith("//") or text.strip() in ("{", "}")
            continue
        assert first <= py < first + 8
        if "  // " in text:   # the comment repeats the Python line it names
            assert text.split("  // ", 1)[1].strip() == file_lines[py - 1].strip()
    assert src.python_lines[lines.index(next(t for t in lines if "__global__" in t))] == first


def test_a_repeated_python_line_maps_to_each_occurrence_in_turn():
    def twice(t, x, out):
        i = t.thread_idx.x
        t.sync()
        out[i] = x[i]
        t.sync()
        out[i] = out[i] + x[i]

    src = to_cuda(twice, np.ones(32, np.float32), np.zeros(32, np.float32))
    syncs = [py for text, py in zip(str(src).split("\n"), src.python_lines, strict=False)
             if "__syncthreads" in text]
    assert len(syncs) == 2 and syncs[0] + 2 == syncs[1]


@needs_nvrtc
def test_compile_reports_resources_and_ptx():
    ck = compile(tiled, *_args())
    assert isinstance(ck, CompiledKernel) and ck.kernel == "tiled" and ck.arch == "sm_90"
    assert 4 <= ck.registers_per_thread == ck.registers <= 32
    assert ck.static_shared_bytes == 128 * 4 and ck.barriers == 1
    assert ck.local_bytes == ck.spill_store_bytes == ck.spill_load_bytes == 0 and not ck.spills
    assert ".target sm_90" in ck.ptx and "bar.sync" in ck.ptx
    assert ck.options[:2] == ("-fmad=false", "-ftz=true") and "-lineinfo" in ck.options
    assert ck.nvrtc.count(".") == 1 and ck.cubin[:4] == b"\x7fELF"
    # PTX lines carry the CUDA line and the Python line of the store after the barrier
    store = next(p for p in ck.ptx_lines if "st.global" in p.text)
    assert "out[i] = tile[127" in str(ck.cuda).split("\n")[store.cuda_line - 1]
    assert dict(ck.python)[store.python_line].strip().startswith("out[i] = tile[127")


@needs_nvrtc
@needs_nvdisasm
def test_sass_is_tied_to_python_lines():
    ck = compile(tiled, *_args())
    ins = ck.instructions
    assert "EXIT" in ins and any(i.startswith("BAR.SYNC") for i in ins)
    assert ins[-1] != "NOP"
    py = dict(ck.python)
    bar = next(s for s in ck.sass if s.text.startswith("BAR.SYNC"))
    assert py[bar.python_line].strip() == "t.sync()"
    lds = next(s for s in ck.sass if s.text.startswith("LDS"))
    assert py[lds.python_line].strip().startswith("out[i] = tile[127")
    per_line = ck.sass_per_python_line()
    assert sum(per_line.values()) <= len(ins) and per_line[bar.python_line] >= 1
    marks = ck.lines_for(bar.python_line)
    assert marks["sass"] and marks["cuda"] and "__syncthreads" in \
        str(ck.cuda).split("\n")[marks["cuda"][0]]
    assert "BAR.SYNC" in ck.sass_text() and ck.disassembler.startswith("nvdisasm ")


@needs_nvrtc
def test_options_follow_exact_and_ftz():
    assert compile(leaky, *_args(), exact=False, ftz=False).options[:1] == ("-lineinfo",)
    assert compile(leaky, *_args(), ftz=False).options[:2] == ("-fmad=false", "-lineinfo")


@needs_nvrtc
def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match=r"arch='compute_90'.*sm_90"):
        compile(leaky, *_args(), arch="compute_90")
    with pytest.raises(ValueError, match="arch='sm_1'"):
        compile(leaky, *_args(), arch="sm_1")
    with pytest.raises(TypeError, match="arch must be a string"):
        compile(leaky, *_args(), arch=90)
    with pytest.raises(TypeError, match="exact must be True or False"):
        compile(leaky, *_args(), exact=1)


def test_without_nvrtc_compile_says_what_to_install(monkeypatch):
    monkeypatch.setattr(nvrtc, "newest_library", lambda: None)
    with pytest.raises(RuntimeError, match="pip install nvidia-cuda-nvrtc"):
        compile(leaky, *_args())


@needs_nvrtc
def test_without_nvdisasm_there_is_no_sass_and_a_note(monkeypatch):
    monkeypatch.setattr(compiled, "nvdisasm_path", lambda: None)
    ck = compile(leaky, *_args())
    assert ck.sass == () and ck.instructions == () and ck.registers_per_thread > 0
    assert "nvidia-cuda-nvdisasm" in ck.notes[0]


@needs_nvrtc
def test_registers_feed_the_occupancy_calculator():
    from gpu_lessons.occupancy import occupancy

    ck = compile(tiled, *_args())
    want = occupancy("9.0", threads_per_block=128, registers_per_thread=ck.registers_per_thread,
                     shared_mem_per_block=512 + 1024)
    got = ck.occupancy(128, dynamic_shared_bytes=1024)
    assert (got.blocks_per_sm, got.occupancy) == (want.blocks_per_sm, want.occupancy)
    assert compiled.arch_cc("sm_90") == "9.0" and compiled.arch_cc("sm_120") == "12.0"


def test_ptxas_report_is_read_for_the_named_kernel():
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
           "ptxas info    : Function properties for k\n"
           "ptxas         .     96 bytes stack frame, 100 bytes spill stores, 120 bytes spill loads\n"
           "ptxas info    : Used 32 registers, used 1 barriers, 4224 bytes smem\n")
    assert compiled.ptxas_resources(log, "k") == {
        "registers_per_thread": 32, "barriers": 1, "static_shared_bytes": 4224,
        "local_bytes": 96, "spill_store_bytes": 100, "spill_load_bytes": 120}
    with pytest.raises(ValueError, match="no ptxas report for 'other'"):
        compiled.ptxas_resources(log, "other")
    # a kernel whose spills leave a stack: ptxas names its size before the shared memory (the
    # H200's driver reported the 16,640 B of sgemm_warptile that this line once lost)
    spilled = log.replace("used 1 barriers, 4224 bytes smem",
                          "used 1 barriers, 40 bytes cumulative stack size, 16640 bytes smem")
    assert compiled.ptxas_resources(spilled, "k")["static_shared_bytes"] == 16640


def test_sass_parser_reads_lines_inlining_and_labels():
    text = ('\t//## File "/x/kernel.cu", line 3\n'
            "        /*0000*/                   LDC R1, c[0x0][0x28] ;\n"
            '\t//## File "/x/kernel.cu", line 9 inlined at "/x/kernel.cu", line 4\n'
            "        /*0010*/              @P0 BRA `(.L_x_0) ;\n"
            ".L_x_0:\n"
            "        /*0020*/                   EXIT ;\n"
            "        /*0030*/                   NOP;\n")
    sass = compiled.parse_sass(text, (None, None, 7, 8))
    assert [(s.address, s.cuda_line, s.python_line) for s in sass] == \
        [(0, 3, 7), (16, 4, 8), (None, None, None), (32, 4, 8), (48, 4, 8)]
    assert compiled.sass_instructions(sass) == ("LDC R1, c[0x0][0x28]", "@P0 BRA `(.L_x_0)",
                                                 "EXIT")


@needs_nvrtc
def test_puzzle_occupancy_uses_the_kernels_compiled_registers(monkeypatch, capsys):
    from gpu_lessons.puzzles import _metrics

    args = _args()
    regs = _metrics.kernel_registers(tiled, args, fallback=99)
    assert regs == compile(tiled, *args).registers_per_thread
    monkeypatch.setattr(nvrtc, "newest_library", lambda: None)
    monkeypatch.setattr(_metrics, "_NO_NVRTC_SAID", [])
    assert _metrics.kernel_registers(tiled, args, fallback=99) == 99
    assert _metrics.kernel_registers(tiled, args, fallback=99) == 99
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "NVRTC is not installed" in out and "99 registers" in out


@needs_nvrtc
def test_side_by_side_view_marks_one_python_line_in_every_column():
    from gpu_lessons.views.compiled import compiled_explorer

    ex = compiled_explorer(tiled, *_args())
    line = ex.controls["line"]
    sync = next(n for n, text in ex.ck.python if text.strip() == "t.sync()")
    line.value = sync
    shown = ex.readout.value
    for title in ("Python", "CUDA C", "PTX", "SASS"):
        assert f"<b>{title}" in shown
    assert shown.count("background:#FFE9A8") >= 3     # Python, CUDA C, PTX (and SASS)
    assert "__syncthreads" in shown and "t.sync()" in ex.static_html()


def test_side_by_side_view_without_nvrtc_is_one_line(monkeypatch, capsys):
    from gpu_lessons.views.compiled import compiled_explorer

    monkeypatch.setattr(nvrtc, "newest_library", lambda: None)
    assert compiled_explorer(tiled, *_args()) is None
    assert capsys.readouterr().out.count("\n") == 1
