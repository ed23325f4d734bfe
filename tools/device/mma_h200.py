"""Tensor cores on the GPU beside the simulator: ``t.mma`` and ``t.ldmatrix``, bit by bit.

    python3 tools/device/mma_h200.py --out $OUT/mma_h200.json   # on a machine with CuPy and a GPU
    python3 tools/device/mma_h200.py --dry                       # anywhere: all but the GPU

Each kernel below (and the worked kernels of the ``mma_tile`` and ``hgemm_mma`` puzzles from
``solutions/puzzle_kernels.py``) runs in the simulator and, translated by
``gpu_lessons.kernels.to_cuda``, on the GPU: compiled by CuPy's NVRTC with ``-fmad=false`` (the
simulator's rounding for everything but the mma itself), on the same inputs.  The record
keeps, per kernel and seed, the GPU's output bits (base64, little-endian);
``tests/kernels/test_mma_h200.py`` regenerates the inputs, runs the simulator and compares.
``ldmatrix`` moves bits, so its outputs must be equal; the puzzles' small whole numbers make
every sum exact, so they must be equal too; random inputs
show how far the tensor cores' internal order and rounding are from the simulator's float32
sums (the largest difference in units in the last place, ulp, of float32).

``--dry`` checks everything but the GPU: every kernel simulates, translates, and NVRTC (the
test extra's) compiles it for sm_90 with HMMA or LDSM in its SASS.  The record: date, GPU,
driver, CUDA runtime, CuPy and NVRTC versions, the options, and per run the outputs' bits and
the differences found.  Copy it to ``tests/data/mma_h200.json``.
"""

import argparse
import base64
import importlib.util
import json
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from gpu_lessons import puzzles  # noqa: E402
from gpu_lessons.kernels import compile, run, to_cuda  # noqa: E402
from gpu_lessons.kernels.cuda_types import EXACT_OPTIONS  # noqa: E402

BF16 = ml_dtypes.bfloat16
SEEDS = (1, 2, 3)


def tile_f16(t, a, b, c, d):
    """d = a @ b + c, float16 in, each lane loading its own fragments from global memory."""
    fa = t.local((8,), np.float16)
    fb = t.local((4,), np.float16)
    fc = t.local((4,), np.float32)
    fd = t.local((4,), np.float32)
    g = t.lane // 4
    q = t.lane % 4
    for i in range(8):
        fa[i] = a[g + 8 * (i // 2 % 2), 2 * q + i % 2 + 8 * (i // 4)]
    for i in range(4):
        fb[i] = b[2 * q + i % 2 + 8 * (i // 2), g]
        fc[i] = c[g + 8 * (i // 2), 2 * q + i % 2]
    t.mma(fd, fa, fb, fc)
    for i in range(4):
        d[g + 8 * (i // 2), 2 * q + i % 2] = fd[i]


def ldmatrix_all(t, m, x4, x4t, x2, x1):
    """ldmatrix .x4, .x4.trans, .x2 and .x1 of a 16 x 16 tile with rows 24 halves apart."""
    s = t.shared((16, 24), np.float16)
    for j in range(8):
        s[t.lane // 2, t.lane % 2 * 8 + j] = m[t.lane // 2, t.lane % 2 * 8 + j]
    t.syncwarp()
    r4 = t.local((8,), np.float16)
    r4t = t.local((8,), np.float16)
    r2 = t.local((4,), np.float16)
    r1 = t.local((2,), np.float16)
    row = t.lane % 8 + 8 * (t.lane // 8 % 2)
    col = 8 * (t.lane // 16)
    t.ldmatrix(r4, s, (row, col), 4)
    t.ldmatrix(r4t, s, (row, col), 4, trans=True)
    t.ldmatrix(r2, s, (t.lane % 16, 8), 2)
    t.ldmatrix(r1, s, (t.lane % 8 + 8, 8), 1)
    for i in range(8):
        x4[t.lane, i] = r4[i]
        x4t[t.lane, i] = r4t[i]
    for i in range(4):
        x2[t.lane, i] = r2[i]
    for i in range(2):
        x1[t.lane, i] = r1[i]


def mma_from_shared(t, a, b, c):
    """c = a @ b with both fragments from shared memory: a by ldmatrix.x4, b (k x n, row by
    row) by ldmatrix.x2.trans."""
    sa = t.shared((16, 16), ml_dtypes.bfloat16)
    sb = t.shared((16, 8), ml_dtypes.bfloat16)
    fa = t.local((8,), ml_dtypes.bfloat16)
    fb = t.local((4,), ml_dtypes.bfloat16)
    acc = t.local((4,), np.float32)
    for j in range(8):
        sa[t.lane // 2, t.lane % 2 * 8 + j] = a[t.lane // 2, t.lane % 2 * 8 + j]
    for j in range(4):
        sb[t.lane // 2, t.lane % 2 * 4 + j] = b[t.lane // 2, t.lane % 2 * 4 + j]
    t.syncwarp()
    t.ldmatrix(fa, sa, (t.lane % 8 + 8 * (t.lane // 8 % 2), 8 * (t.lane // 16)), 4)
    t.ldmatrix(fb, sb, (t.lane % 16, 0), 2, trans=True)
    t.mma(acc, fa, fb, acc)
    g = t.lane // 4
    q = t.lane % 4
    for i in range(4):
        c[g + 8 * (i // 2), 2 * q + i % 2] = acc[i]


def worked(pid):
    path = ROOT / "solutions" / "puzzle_kernels.py"
    spec = importlib.util.spec_from_file_location("puzzle_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, f"{pid}_kernel")


def _random(shape, dtype, rng):
    return rng.standard_normal(shape).astype(dtype)


#: The size the hgemm_mma puzzle runs at here (small enough to simulate in seconds).
HGEMM = {"m": 128, "n": 128, "k": 64}
PUZZLES = ("mma_tile", "hgemm_mma")


def cases():
    """(name, kernel, args, outputs, exact, launch): ``args(seed)`` makes every argument;
    ``exact``: the GPU must give the simulator's bits (no rounding of a sum can differ);
    ``launch``: (grid, block)."""
    p = puzzles.find("mma_tile")
    h = puzzles.find("hgemm_mma")
    tile, hgemm = worked("mma_tile"), worked("hgemm_mma")
    warp = ((1,), (32,))
    blocks = h.launch(**HGEMM)

    def puzzle_args(seed):
        return dict(p.make_inputs(seed=seed))

    def hgemm_args(seed):
        return dict(h.make_inputs(HGEMM, seed=seed))

    def hgemm_random(seed):
        args = hgemm_args(seed)
        rng = np.random.default_rng([14, seed])
        for name in ("a", "b"):
            args[name] = _random(args[name].shape, BF16, rng)
        return args

    def tile_args(dtype):
        def make(seed):
            rng = np.random.default_rng([11, seed])
            return {"a": _random((16, 16), dtype, rng), "b": _random((16, 8), dtype, rng),
                    "c": np.full((16, 8), np.nan, np.float32)}
        return make

    def f16_args(seed):
        rng = np.random.default_rng([12, seed])
        return {"a": _random((16, 16), np.float16, rng), "b": _random((16, 8), np.float16, rng),
                "c": rng.standard_normal((16, 8)).astype(np.float32),
                "d": np.full((16, 8), np.nan, np.float32)}

    def ld_args(seed):
        rng = np.random.default_rng([13, seed])
        bits = rng.integers(0, 2**16, (16, 16)).astype(np.uint16)
        bits[(bits & 0x7C00) == 0x7C00] &= 0xFBFF        # no NaN or infinity: any bits else
        return {"m": bits.view(np.float16), "x4": np.zeros((32, 8), np.float16),
                "x4t": np.zeros((32, 8), np.float16), "x2": np.zeros((32, 4), np.float16),
                "x1": np.zeros((32, 2), np.float16)}

    return [
        ("mma_tile", tile, puzzle_args, ("c",), True, warp),
        ("mma_tile_random_bf16", tile, tile_args(BF16), ("c",), False, warp),
        ("tile_f16_random", tile_f16, f16_args, ("d",), False, warp),
        ("ldmatrix_x4_x2_x1", ldmatrix_all, ld_args, ("x4", "x4t", "x2", "x1"), True, warp),
        ("mma_from_shared_bf16", mma_from_shared, tile_args(BF16), ("c",), False, warp),
        ("hgemm_mma", hgemm, hgemm_args, ("c",), True, blocks),
        ("hgemm_mma_random_bf16", hgemm, hgemm_random, ("c",), False, blocks),
    ]


def bits_of(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


def ulps(x: np.ndarray, y: np.ndarray) -> int:
    """The largest distance between two arrays of one float type in units in the last place
    (adjacent floats are 1 apart; +0 and -0 are 0 apart)."""
    def ordered(a):
        i = a.view(np.int16 if a.dtype.itemsize == 2 else np.int32).astype(np.int64)
        return np.where(i < 0, -(i & (2 ** (8 * a.dtype.itemsize - 1) - 1)), i)
    return int(np.abs(ordered(x) - ordered(y)).max()) if x.size else 0


def simulate(kernel, args, outputs, launch=((1,), (32,))):
    sim = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    run(kernel, *launch, *sim.values(), max_instructions=10**6)
    return {name: sim[name] for name in outputs}


def dry():
    for name, kernel, make, outputs, _, launch in cases():
        args = make(SEEDS[0])
        out = simulate(kernel, args, outputs, launch)
        assert all(np.isfinite(v.astype(np.float32)).all() for v in out.values()), name
        ck = compile(kernel, *args.values(), arch="sm_90")
        sass = " ".join(line.text for line in ck.sass)
        units = [u for u in ("HMMA", "LDSM") if u in sass]
        assert units, f"{name}: no HMMA or LDSM in the SASS"
        print(f"{name:<22} simulated, translated, sm_90 SASS has {', '.join(units)}; "
              f"{ck.registers} registers")
    print("dry run: everything but the GPU checked")


def on_gpu(out_path):
    import cupy as cp

    from gpu_lessons.kernels import nvrtc
    from gpu_lessons.kernels.gpu import launch_args

    props = cp.cuda.runtime.getDeviceProperties(0)
    lib = nvrtc.newest_library()
    record = {
        "date": time.strftime("%Y-%m-%d"), "gpu": props["name"].decode(),
        "cc": f"{props['major']}.{props['minor']}",
        "driver": cp.cuda.runtime.driverGetVersion(),
        "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(), "cupy": cp.__version__,
        "cupy_nvrtc": ".".join(map(str, cp.cuda.nvrtc.getVersion())),
        "local_nvrtc": ".".join(map(str, nvrtc.version(lib))) if lib is not None else None,
        "options": list(EXACT_OPTIONS), "seeds": list(SEEDS), "runs": [],
    }
    for name, kernel, make, outputs, exact, launch in cases():
        for seed in SEEDS:
            args = make(seed)
            want = simulate(kernel, args, outputs, launch)
            src = to_cuda(kernel, *args.values())
            f = cp.RawModule(code=str(src), options=tuple(EXACT_OPTIONS)).get_function(
                src.kernel_name)
            dev = launch_args(src, list(args.values()))
            grid, block = (tuple(d) if isinstance(d, tuple) else (d,) for d in launch)
            f(grid, block, tuple(dev))
            cp.cuda.runtime.deviceSynchronize()
            got = {}
            for p, a, d in zip(src.params, args.values(), dev, strict=True):
                if p.name in outputs:
                    got[p.name] = cp.asnumpy(d).view(a.dtype).reshape(a.shape)
            row = {"kernel": name, "seed": seed, "exact": exact, "outputs": {}}
            for o in outputs:
                row["outputs"][o] = {
                    "dtype": str(got[o].dtype), "shape": list(got[o].shape),
                    "bits_base64": base64.b64encode(bits_of(got[o]).astype("<u4" if
                                                    got[o].dtype.itemsize == 4 else "<u2")
                                                    .tobytes()).decode(),
                    "equal": int((bits_of(got[o]) == bits_of(want[o])).sum()),
                    "elements": int(got[o].size), "max_ulp": ulps(got[o], want[o])}
            if name in PUZZLES:
                spec = puzzles.find(name).expected(args)["c"]
                row["matches_spec"] = bool(np.array_equal(got["c"], spec))
            row["bit_for_bit"] = all(v["equal"] == v["elements"] for v in row["outputs"].values())
            record["runs"].append(row)
            worst = max(v["max_ulp"] for v in row["outputs"].values())
            print(f"{name:<22} seed {seed}: bit for bit {row['bit_for_bit']}, "
                  f"max {worst} ulp", flush=True)
    Path(out_path).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out_path}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="where to write the JSON record (on a GPU)")
    ap.add_argument("--dry", action="store_true", help="check everything but the GPU")
    a = ap.parse_args(argv)
    if a.dry:
        dry()
    elif a.out:
        on_gpu(a.out)
    else:
        ap.error("give --out OUT.json (on a GPU) or --dry")


if __name__ == "__main__":
    main()
