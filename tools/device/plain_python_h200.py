"""Kernels written as a Python programmer writes them, on a GPU: the simulator's output beside
the GPU's, and both beside NumPy.

    python3 tools/device/plain_python_h200.py --out $OUT/plain_python.json

Every kernel of ``tests/kernels/plain_python_kernels.py`` (plain ``if``/``while``, per-lane
``break``/``return``, ``and``/``or``, chained comparisons, guarded conditional reads, tuple
assignment, a loop over a literal tuple with shuffles, ``+=`` on lane values, ``min``/``max``,
``math.*``, the unsigned built-ins in arithmetic that goes negative) on fresh random inputs (seeds
0 to 2): ``gpu_lessons.kernels.run`` on one copy, ``gpu_lessons.kernels.run_on_gpu`` (NVRTC
through CuPy, ``-fmad=false``) on another.  Recorded per kernel and seed: whether every written
array is the simulator's bit for bit (or within the case's ulps, for ``exp``-like functions),
whether it is NumPy's reference, the largest difference in float32 ulps, and the GPU's median
time.  Replayed by ``tests/kernels/test_plain_python_h200.py``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import platform
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _cases():
    spec = importlib.util.spec_from_file_location(
        "plain_python_kernels", ROOT / "tests" / "kernels" / "plain_python_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


def _ulps(a: np.ndarray, b: np.ndarray) -> int:
    if a.dtype != np.float32:
        return 0 if np.array_equal(a, b) else -1
    ia = a.view(np.int32).astype(np.int64)
    ib = b.view(np.int32).astype(np.int64)
    return int(np.abs(ia - ib).max()) if a.size else 0


def main(out: Path) -> None:
    from gpu_lessons import kernels
    from gpu_lessons.measure.gpu import device_name

    rows = []
    for name, case in sorted(_cases().items()):
        for seed in range(3):
            rng = np.random.default_rng(seed)
            args = case.make(rng)
            sim = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            gpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            row = {"kernel": name, "seed": seed, "ulps_allowed": case.ulps}
            try:
                kernels.run(case.kernel, case.grid, case.block, *sim)
                run = kernels.run_on_gpu(case.kernel, case.grid, case.block, *gpu, repeats=5)
                expected = case.expected(args)
                worst, numpy_ok = 0, True
                for index in expected:
                    d = _ulps(gpu[index], sim[index])
                    worst = max(worst, d) if d >= 0 else 10**9
                    want = np.asarray(expected[index])
                    numpy_ok &= bool(np.allclose(gpu[index], want, rtol=1e-5, atol=1e-6,
                                                 equal_nan=True))
                row.update(matches_simulator=worst <= case.ulps, worst_ulps=worst,
                           matches_numpy=numpy_ok,
                           gpu_us=None if run is None else run.timing.median * 1e6)
            except Exception as exc:  # one kernel's failure is recorded, not fatal
                row.update(error=f"{type(exc).__name__}: {exc}")
            rows.append(row)
            print(name, seed, {k: v for k, v in row.items() if k not in ("kernel", "seed")},
                  flush=True)
    import cupy

    record = {"meta": {"date": dt.date.today().isoformat(), "gpu": device_name(),
                       "cupy": cupy.__version__, "python": platform.python_version(),
                       "how": "tools/device/plain_python_h200.py; run_on_gpu (-fmad=false), "
                              "5 timed runs per kernel"},
              "rows": rows}
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    ok = sum(r.get("matches_simulator", False) for r in rows)
    print(f"{ok} of {len(rows)} runs gave the simulator's output")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    main(ap.parse_args().out)
