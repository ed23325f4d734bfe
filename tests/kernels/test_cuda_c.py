"""to_cuda: the CUDA C it writes, what it means, and what it refuses.

Three kinds of check, none needing a GPU:

* **structure**: the translation of small kernels against CUDA written out by hand here;
* **meaning**: the translated source compiled with g++ (tests/cuda_cpu.py: one OS thread per
  CUDA thread, barriers, shuffles and atomics emulated) must give *bit-identical* results to the
  simulator on the same inputs — every teaching kernel, every puzzle's worked kernel and kernels
  written to exercise NumPy's promotion rules, Python's ``//`` and ``%``, scoping and shuffles.
  The one tolerance: kernels calling ``np.exp`` (libm's and NumPy's exp differ in the last
  place), checked against the puzzle's spec with the puzzle's own tolerance;
* **refusals**: each construct the simulator would reject at run time is refused by name.
"""

import importlib.util
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpu_lessons import kernels
from gpu_lessons.kernels.lang import KernelLanguageError, compile_kernel
from gpu_lessons.kernels.simt import examples as simt_kernels
from gpu_lessons.kernels.simt import run

cpu = pytest.importorskip("cuda_cpu", reason="tests/cuda_cpu.py is the CPU harness")

ROOT = Path(__file__).resolve().parents[2]
needs_gxx = pytest.mark.skipif(not cpu.available(), reason="g++ is needed to run CUDA C on the CPU")


def _kernel(src: str):
    return compile_kernel(textwrap.dedent(src))


def _puzzle_kernels():
    path = ROOT / "solutions" / "puzzle_kernels.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("puzzle_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- structure -------------------------------------------------------------------------------------

def test_a_map_kernel_reads_like_hand_written_cuda():
    k = _kernel("""
    def scale(t, x, out, n):
        i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
        t.return_if(i >= n)
        out[i] = x[i] * 2.0
    """)
    src = kernels.to_cuda(k, np.ones(8, np.float32), np.zeros(8, np.float32), 8)
    code = [line.split("//")[0].rstrip() for line in src.body.splitlines()]
    assert code == ['extern "C" __global__ void scale(const float* x, float* out, int n)',
                    "{",
                    "    int i = blockIdx.x * blockDim.x + threadIdx.x;",
                    "    if (i >= n) return;",
                    "    out[i] = x[i] * 2.0f;",
                    "}"]
    comments = [line.split("// ", 1)[1] for line in src.body.splitlines() if "//" in line]
    assert comments == ["i = t.block_idx.x * t.block_dim.x + t.thread_idx.x",
                        "t.return_if(i >= n)", "out[i] = x[i] * 2.0"]
    # the comment column is aligned
    assert len({line.index("//") for line in src.body.splitlines() if "//" in line}) == 1
    assert src.kernel_name == "scale" and isinstance(src, str)
    assert [(p.name, p.kind, p.ctype, p.written) for p in src.params] == [
        ("x", "array", "float", False), ("out", "array", "float", True),
        ("n", "scalar", "int", False)]


def test_teaching_reduction_translates_to_harris_kernel_3():
    launch = simt_kernels.cuda_launch("reduce_sequential")
    src = kernels.to_cuda(simt_kernels.reduce_sequential, *launch.inputs)
    code = [line.split("//")[0].strip() for line in src.body.splitlines()]
    for expected in ("extern __shared__ __align__(128) unsigned char dynamic_smem[];",
                     "float* sdata = (float*)dynamic_smem;",
                     "int s = blockDim.x / 2;", "while (s > 0) {", "if (tid < s) {",
                     "sdata[tid] += sdata[tid + s];", "__syncthreads();", "s /= 2;"):
        assert expected in code, expected
    assert src.dynamic_shared_bytes(256) == 256 * 4 == launch.shared_bytes


def test_fixed_tiles_are_static_shared_arrays_and_2d_arrays_are_flattened():
    launch = simt_kernels.cuda_launch("transpose_tiled_padded", 64)
    src = kernels.to_cuda(simt_kernels.transpose_tiled_padded, *launch.inputs)
    assert "__shared__ float tile[32][32 + 1];" in src.body
    assert "a[(y + j) * 64 + x]" in src.body          # a[y + j, x] on a 64 x 64 array
    assert "tile[threadIdx.x][threadIdx.y + j]" in src.body
    assert "a[i, j] is a[i * 64 + j]" in src           # the header says how
    assert src.dynamic_shared_bytes((32, 8)) == 0


def test_types_follow_numpy_promotion():
    k = _kernel("""
    def k(t, x, out, alpha):
        i = t.thread_idx.x
        out[i] = x[i] * i + x[i] * alpha
    """)
    body = kernels.to_cuda(k, np.ones(32, np.float32), np.zeros(32, np.float32), 0.5).body
    # float32 * int64 index is float64 in NumPy; float32 * (weak) Python float stays float32
    assert "(double)x[i] * i" in body
    assert "x[i] * (float)alpha" in body
    assert "out[i] = (float)(" in body


def test_python_floor_division_and_modulo_use_helpers_unless_non_negative():
    k = _kernel("""
    def k(t, a, out, n):
        i = t.thread_idx.x
        out[i] = (a[i] // n) + (a[i] % n) + i // 2 + i % 4
    """)
    src = kernels.to_cuda(k, np.arange(32, dtype=np.int32), np.zeros(32, np.int32), 3)
    assert "py_floordiv(a[i], n)" in src.body and "py_mod(a[i], n)" in src.body
    assert "i / 2" in src.body and "i % 4" in src.body
    assert "__device__ int py_floordiv(int a, int b)" in src


def test_float_literal_is_numpys_float32_rounding():
    # 0.1 as float32 is 0.100000001490116...; the shortest text that reads back as it is 0.1
    k = _kernel("""
    def k(t, x):
        x[t.thread_idx.x] = x[t.thread_idx.x] + 16777217.0
    """)
    assert "x[threadIdx.x] + 16777216.0f" in kernels.to_cuda(k, np.ones(4, np.float32)).body


def test_print_is_shown_as_a_comment():
    k = _kernel("""
    def k(t, x):
        print("lane", t.lane)
        x[t.thread_idx.x] = 1.0
    """)
    assert "// print(...) runs in the simulator only" in kernels.to_cuda(k, np.ones(4, np.float32))


def test_html_display_highlights():
    src = kernels.to_cuda(simt_kernels.reduce_sequential, *simt_kernels.cuda_launch(
        "reduce_sequential").inputs)
    html = src._repr_html_()
    assert "<span" in html and "__syncthreads" in html
    assert repr(src) == str(src)


# -- meaning: bit-identical to the simulator on the CPU ---------------------------------------------

SEMANTICS = {
    "promotion": ("""
    def promotion(t, x, out, alpha, n):
        i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
        t.return_if(i >= n)
        v = x[i] * i + alpha
        w = x[i] * alpha - 1
        out[i] = v + w / 3
    """, lambda rng: (rng.standard_normal(70).astype(np.float32), np.zeros(70, np.float32),
                      0.3, 70), 2, 64),
    "floor_ops": ("""
    def floor_ops(t, a, f, out_i, out_f, n):
        i = t.thread_idx.x
        out_i[i] = a[i] // n + a[i] % n * 100 + (-i) // 3 * 10000 + (i - 16) % 5 * 1000000
        out_f[i] = f[i] // 0.75 + f[i] % 0.75 + i / 4
    """, lambda rng: (rng.integers(-50, 50, 32).astype(np.int32),
                      rng.standard_normal(32).astype(np.float32), np.zeros(32, np.int32),
                      np.zeros(32, np.float32), -7), 1, 32),
    "locals_and_branches": ("""
    def locals_and_branches(t, x, out, n):
        i = t.thread_idx.x
        acc = t.local(0.0)
        best = t.local(-np.inf, np.float32)
        for j in range(n - 1, -1, -2):
            v = x[(i + j) % 32]
            with t.if_((v > 0) & ~(v > 2)):
                acc[...] = acc + v
                best[...] = np.maximum(best, v)
            with t.else_():
                acc[...] = acc - v * 0.5
        k = t.local(i)
        for _ in t.while_(lambda: k < 40):
            k[...] = k + 3
        m = 0.0
        m = m + x[i]
        m = t.where(k % 2 == 0, m, -m)
        if n > 3 and not n > 100:
            out[i] = acc + best + k + m + abs(-n) + max(n, 2) + min(n, 2)
    """, lambda rng: (rng.standard_normal(32).astype(np.float32), np.zeros(32, np.float32), 9),
        1, 32),
    "reused_names": ("""
    def reused_names(t, x, out):
        tid = t.thread_idx.x
        d = 16
        v = x[tid]
        while d > 0:
            v = v + t.shfl_down(v, d)
            d //= 2
        with t.if_(t.lane < 4):
            d = 2
            w = t.shfl_xor(v, d) + t.shfl_up(v, 1) + t.shfl_idx(v, 3)
            out[tid] = w
        with t.else_():
            out[tid] = v
    """, lambda rng: (rng.integers(0, 9, 64).astype(np.float32), np.zeros(64, np.float32)),
        1, 64),
    "atomics": ("""
    def atomics(t, x, hist, mx, first, n):
        i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
        t.return_if(i >= n)
        b = x[i] % 8
        t.atomic_add(hist, b, 1)
        t.atomic_max(mx, b % 2, x[i] // 2 - 20)
        t.atomic_cas(first, b, -1, b * 10)
    """, lambda rng: (rng.integers(0, 100, 100).astype(np.int32), np.zeros(8, np.int32),
                      np.full(2, -100, np.int32), np.full(8, -1, np.int32), 100), 2, 64),
    "small_ints": ("""
    def small_ints(t, a, out):
        i = t.thread_idx.x
        out[i] = a[i] + a[i] * 3
    """, lambda rng: (rng.integers(0, 255, 32).astype(np.uint8), np.zeros(32, np.uint8)),
        1, 32),
}


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _same_bits(a, b) -> bool:
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.fixture(scope="module")
def semantics_runs():
    rng = np.random.default_rng(7)
    cases = []
    for name, (src, make, grid, block) in SEMANTICS.items():
        k = compile_kernel(textwrap.dedent(src))
        args = make(rng)
        cases.append((name, k, args, grid, block, kernels.to_cuda(k, *args)))
    for name in simt_kernels.KERNELS:
        if name == "reduce_missing_sync":   # a race: its answer depends on the schedule
            continue
        launch = simt_kernels.cuda_launch(name, iters=3) if name.startswith("branch") else \
            simt_kernels.cuda_launch(name)
        k = simt_kernels.KERNELS[name]
        cases.append((name, k, launch.inputs, launch.grid, launch.block,
                      kernels.to_cuda(k, *launch.inputs)))
    launchers = cpu.build([c[-1] for c in cases])
    return [(*c, lau) for c, lau in zip(cases, launchers, strict=True)]


@needs_gxx
def test_translated_kernels_give_the_simulators_bits(semantics_runs):
    checked = []
    for name, k, args, grid, block, src, launcher in semantics_runs:
        sim_args, cpu_args = _copy(args), _copy(args)
        run(k, grid, block, *sim_args)
        cpu.run_cpu(src, grid, block, *cpu_args, launcher=launcher)
        for p, s, c in zip(src.params, sim_args, cpu_args, strict=True):
            if p.kind != "array" or not p.written:
                continue
            if name == "atomics" and p.name == "first":
                continue  # which lane wins a CAS depends on the order lanes are served
            assert _same_bits(s, c), f"{name}: {p.name} differs\nsim {s}\ncpu {c}\n{src}"
        checked.append(name)
    assert len(checked) == len(SEMANTICS) + len(simt_kernels.KERNELS) - 1


@needs_gxx
def test_every_puzzle_reference_kernel_gives_the_simulators_bits():
    pk = _puzzle_kernels()
    puzzles = pytest.importorskip("gpu_lessons.puzzles")
    if pk is None:
        pytest.skip("solutions/puzzle_kernels.py is not in this checkout")
    cases = []
    for p in puzzles.puzzles():
        k = getattr(pk, p.kernel_name)
        choices = {c: getattr(pk, c.upper()) for c in p.choices}
        size = p.sizes[0]
        args = p.make_inputs(size, seed=3)
        grid, block = p.launch(**size, **choices)
        cases.append((p, k, args, grid, block, kernels.to_cuda(k, *args.values())))
    launchers = cpu.build([c[-1] for c in cases])
    tolerance = []
    for (p, k, args, grid, block, src), launcher in zip(cases, launchers, strict=True):
        sim_args, cpu_args = _copy(args.values()), _copy(args.values())
        run(k, grid, block, *sim_args)
        cpu.run_cpu(src, grid, block, *cpu_args, launcher=launcher)
        expected = p.expected(args)
        for name, s, c in zip(args, sim_args, cpu_args, strict=True):
            if name not in p.outputs:
                continue
            # exp and exp2 differ in the last bits between NumPy and the C library
            if "np.exp(" in src.body.replace("expf(", "np.exp(").replace("exp2f(", "np.exp("):
                tolerance.append(p.id)
                np.testing.assert_allclose(c, expected[name], rtol=p.rtol, atol=p.atol)
            else:
                assert _same_bits(s, c), f"{p.id}: {name} differs from the simulator"
    assert set(tolerance) <= {"softmax", "flash_attention", "decode_attention"}


# -- refusals the simulator would also make -----------------------------------------------------

def _refused(src, args, construct):
    with pytest.raises(KernelLanguageError) as info:
        kernels.to_cuda(_kernel(src), *args)
    assert info.value.construct == construct, str(info.value)
    assert "cannot be translated to CUDA" in str(info.value) or info.value.lineno
    return info.value


X = (np.ones(32, np.float32), np.zeros(32, np.float32))


def test_per_lane_range_is_refused_with_the_while_form():
    err = _refused("""
    def k(t, x, out):
        for j in range(t.thread_idx.x):
            out[0] = 1.0
    """, X, "per-lane condition")
    assert "while j < stop" in str(err) and err.lineno == 3


def test_an_integer_literal_beyond_32_bits_is_refused_at_its_line():
    err = _refused("""
    def k(t, x, out):
        i = t.thread_idx.x
        out[i] = x[i] + (i * 2654435761) % 7
    """, X, "constant")
    assert err.lineno == 4 and "2654435761 does not fit a 32-bit int" in str(err)


def test_uniform_assignment_in_a_lane_branch_is_refused():
    err = _refused("""
    def k(t, x, out):
        count = 0
        with t.if_(t.thread_idx.x < 5):
            count += 1
        out[t.thread_idx.x] = count
    """, X, "uniform assignment in a lane branch")
    assert "t.local" in str(err)


def test_a_variable_that_changes_type_is_refused():
    _refused("""
    def k(t, x, out):
        v = x[t.thread_idx.x]
        for j in range(3):
            v = v + j
            v = t.thread_idx.x + j
        out[0] = v
    """, X, "variable type")


def test_and_or_not_take_conditions():
    err = _refused("""
    def k(t, x, out):
        i = t.thread_idx.x
        out[i] = 1.0 if x[i] and i < 5 else 0.0
    """, X, "and operand")
    assert "(x[i] != 0) and ..." in str(err) and err.lineno == 4
    err = _refused("""
    def k(t, x, out):
        if not x[t.thread_idx.x]:
            out[0] = 1.0
    """, X, "not operand")
    assert "x[t.thread_idx.x] == 0" in str(err)
    _refused("""
    def k(t, x, out, n):
        out[0] = 1.0 if n or 3 else 0.0
    """, (*X, 4), "and/or value")


def test_conversions_of_lanes_and_mixed_uniform_arms_are_refused():
    _refused("""
    def k(t, x, out):
        out[0] = np.float32(x[t.thread_idx.x])
    """, X, "conversion of lanes")
    _refused("""
    def k(t, x, out, n):
        out[0] = n if n > 2 else 0.5
    """, (*X, 4), "conditional types")


def test_loop_variable_used_after_its_loop_is_refused():
    _refused("""
    def k(t, x, out):
        for j in range(4):
            out[j] = 1.0
        out[j] = 2.0
    """, X, "loop variable")


def test_unsupported_types_are_named():
    with pytest.raises(TypeError, match="complex64"):
        kernels.to_cuda(_kernel("def k(t, x):\n    x[0] = 1.0\n"), np.ones(4, np.complex64))
    _refused("""
    def k(t, h):
        t.atomic_add(h, 0, 1)
    """, (np.zeros(4, np.int16),), "atomic type")
    _refused("""
    def k(t, h):
        t.atomic_max(h, 0, 1.0)
    """, (np.zeros(4, np.float32),), "atomic type")
    with pytest.raises(ValueError, match="32-bit"):
        kernels.to_cuda(_kernel("def k(t, x, n):\n    x[0] = n\n"), np.ones(4, np.int32), 2**40)
    with pytest.raises(TypeError, match="argument"):
        kernels.to_cuda(_kernel("def k(t, x, n):\n    x[0] = n\n"), np.ones(4, np.int32))


def test_language_errors_come_first():
    with pytest.raises(KernelLanguageError) as info:
        kernels.to_cuda("def k(t, x):\n    import os\n", np.ones(4))
    assert info.value.construct == "import"


# -- running -------------------------------------------------------------------------------------

def test_run_on_gpu_without_a_gpu_prints_the_skip_line(monkeypatch, capsys):
    monkeypatch.setenv("GPU_LESSONS_NO_GPU", "1")
    from gpu_lessons.measure import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    x, out = np.ones(64, np.float32), np.zeros(64, np.float32)
    assert kernels.run_on_gpu(simt_kernels.reduce_sequential, 1, 64, x, out) is None
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("No CUDA GPU (") and printed.endswith("runs without it.")
    assert not out.any()   # nothing ran, nothing was written
    with pytest.raises(KernelLanguageError):   # the translation still checks the kernel
        kernels.run_on_gpu(_kernel("def k(t, x):\n    for j in range(t.lane):\n"
                                   "        x[0] = 1.0\n"), 1, 32, x)
    with pytest.raises(ValueError, match="1024"):
        kernels.run_on_gpu(simt_kernels.reduce_sequential, 1, (64, 32), x, out)
    # the launch is checked against CUDA's per-axis limits, as the simulator checks it
    with pytest.raises(ValueError, match=r"block\.z must be <= 64, got 65"):
        kernels.run_on_gpu(simt_kernels.reduce_sequential, 1, (1, 1, 65), x, out)
    with pytest.raises(ValueError, match=r"grid\.y must be <= 65535"):
        kernels.run_on_gpu(simt_kernels.reduce_sequential, (1, 70_000), 64, x, out)
    with pytest.raises(TypeError, match=r"grid must be a positive int or a tuple of 1 to 3"):
        kernels.run_on_gpu(simt_kernels.reduce_sequential, "1", 64, x, out)


def test_dynamic_shared_bytes_align_each_array_like_the_simulator():
    k = _kernel("""
    def k(t, x):
        a = t.shared(t.block_dim.x + 1)
        b = t.shared((t.block_dim.x, 2), np.float64)
        a[t.thread_idx.x] = 1.0
        b[t.thread_idx.x, 1] = 2.0
        x[t.thread_idx.x] = a[t.thread_idx.x] + b[t.thread_idx.x, 1]
    """)
    src = kernels.to_cuda(k, np.ones(64, np.float32))
    # a: 65 floats = 260 B, rounded up to 384; b: 64 x 2 doubles = 1024 B
    assert src.dynamic_shared_bytes(64) == 384 + 1024
    assert "b[(int)threadIdx.x * 2 + 1]" in src.body or "b[threadIdx.x * 2 + 1]" in src.body


def test_puzzle_gpu_cell_without_a_gpu_checks_the_kernel_then_skips(monkeypatch, capsys):
    monkeypatch.setenv("GPU_LESSONS_NO_GPU", "1")
    puzzles = pytest.importorskip("gpu_lessons.puzzles")
    from gpu_lessons.measure import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    p = puzzles.puzzles()[0]
    ok = _kernel(f"def {p.kernel_name}(t, {', '.join(p.params)}):\n    pass\n")
    assert puzzles.run_on_gpu(p.id, ok) is None
    out = capsys.readouterr().out.strip().splitlines()     # the kernel as CUDA C, then the skip
    assert out[0].startswith(f'extern "C" __global__ void {p.kernel_name}(')
    assert out[-1].startswith("No CUDA GPU (")
    bad = _kernel(f"def {p.kernel_name}(t, {', '.join(p.params)}):\n"
                  f"    for j in range(t.thread_idx.x):\n        pass\n")
    with pytest.raises(KernelLanguageError):
        puzzles.run_on_gpu(p.id, bad)


def test_a_refused_kernel_shows_a_short_traceback():
    """The message names the learner's line; a notebook shows no translator frames above it."""
    def per_lane_if(t, x):
        for j in range(t.thread_idx.x):
            x[j] = 1

    def imports(t, x):
        import os  # noqa: F401

    for kernel in (per_lane_if, imports):
        with pytest.raises(KernelLanguageError, match=r"^line \d+: ") as info:
            kernels.to_cuda(kernel, np.zeros(4, np.float32))
        assert info.traceback[-1].name == "to_cuda"


# -- plain Python, unsigned built-ins, FP64, shuffle offsets, 64-bit indices ------------------

def test_unsigned_builtins_are_signed_where_a_value_can_be_negative():
    k = _kernel("""
    def k(t, x, f64, i64, n):
        i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
        f64[i] = (t.thread_idx.x - 5) * 0.5
        i64[i] = t.thread_idx.x - 5
        x[i] = t.where(t.thread_idx.x > n, 1.0, 0.0)
    """)
    args = (np.zeros(32, np.float32), np.zeros(32, np.float64), np.zeros(32, np.int64), -1)
    body = kernels.to_cuda(k, *args).body
    assert "int i = blockIdx.x * blockDim.x + threadIdx.x;" in body   # >= 0: left as written
    assert "f64[i] = ((int)threadIdx.x - 5) * 0.5;" in body
    assert "i64[i] = (int)threadIdx.x - 5;" in body
    assert "(int)threadIdx.x > n ? 1.0 : 0.0" in body   # np.where of two Python floats: float64


@needs_gxx
def test_unsigned_builtins_give_the_simulators_values_on_the_cpu():
    """The three cases the unsigned built-ins got wrong: -2.5 (not 2.1e9), 1 (not 0) for
    threadIdx.x > -1, and -5 (not 4294967291) stored as int64."""
    k = _kernel("""
    def k(t, x, f64, i64, n):
        i = t.thread_idx.x
        f64[i] = (t.thread_idx.x - 5) * 0.5
        i64[i] = t.thread_idx.x - 5
        x[i] = t.where(t.thread_idx.x > n, 1.0, 0.0)
    """)
    args = [np.zeros(32, np.float32), np.zeros(32, np.float64), np.zeros(32, np.int64), -1]
    cpu.run_cpu(kernels.to_cuda(k, *args), 1, 32, *args)
    lanes = np.arange(32)
    np.testing.assert_array_equal(args[1], (lanes - 5) * 0.5)
    np.testing.assert_array_equal(args[2], lanes - 5)
    np.testing.assert_array_equal(args[0], np.ones(32, np.float32))   # every lane > -1


def test_fp64_is_named_in_the_header_with_its_lines():
    k = _kernel("""
    def k(t, x, out):
        i = t.thread_idx.x
        acc = t.local(0.0)
        acc[...] = acc + x[i]
        out[i] = acc
    """)
    src = str(kernels.to_cuda(k, *X))
    assert "// computes in FP64 (double) on line 5: acc[...] = acc + x[i];" in src
    assert "1/2 of FP32's rate on an H200 and 1/64 on consumer GPUs" in src
    assert "t.local(0.0, np.float32) or acc = 0.0 then acc += x[i]" in src
    fixed = _kernel("""
    def k(t, x, out):
        i = t.thread_idx.x
        acc = 0.0
        acc += x[i]
        out[i] = acc
    """)
    src = kernels.to_cuda(fixed, *X)
    assert "FP64" not in src and "float acc = 0.0f;" in src


def test_the_header_says_what_a_32_bit_overflow_is_and_the_64_bit_index_is_long_long():
    k = _kernel("""
    def k(t, x, out, n):
        i = np.int64(t.block_idx.x) * t.block_dim.x + t.thread_idx.x
        big = np.int64(n) * n
        out[i] = big % 7
    """)
    src = kernels.to_cuda(k, np.zeros(32, np.float32), np.zeros(32, np.int64), 100_000)
    assert "undefined behaviour in C++" in src
    assert "long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;" in src.body
    assert "long long big = (long long)n * n;" in src.body


@needs_gxx
def test_shuffle_offsets_pass_through_and_use_their_low_5_bits():
    k = _kernel("""
    def k(t, x, out):
        i = t.thread_idx.x
        v = x[i]
        out[4 * i] = t.shfl_down(v, 33)
        out[4 * i + 1] = t.shfl_up(v, 34)
        out[4 * i + 2] = t.shfl_xor(v, 35)
        out[4 * i + 3] = t.shfl_idx(v, -1)
    """)
    x, out = np.arange(32, dtype=np.float32), np.zeros(128, np.float32)
    src = kernels.to_cuda(k, x, out)
    for call in ("__shfl_down_sync(0xffffffff, v, 33)", "__shfl_up_sync(0xffffffff, v, 34)",
                 "__shfl_xor_sync(0xffffffff, v, 35)", "__shfl_sync(0xffffffff, v, -1)"):
        assert call in src.body
    cpu.run_cpu(src, 1, 32, x, out)
    lane = np.arange(32)
    got = out.reshape(32, 4)
    # PTX shfl.sync: offset & 31; a source past the warp's end gives the lane its own value
    np.testing.assert_array_equal(got[:, 0], np.where(lane + 1 < 32, lane + 1, lane))
    np.testing.assert_array_equal(got[:, 1], np.where(lane - 2 >= 0, lane - 2, lane))
    np.testing.assert_array_equal(got[:, 2], lane ^ 3)
    np.testing.assert_array_equal(got[:, 3], np.full(32, 31))
