"""The launch overhead ``run_on_gpu`` measures, against the number of arguments (an H200 run).

    PYTHONUNBUFFERED=1 python3 tools/device/perf_launch.py OUT.json
    python3 tools/device/perf_launch.py --dry

A tiny launch's time, as ``gpu_lessons.kernels.run_on_gpu`` times it (CUDA events around one
launch, after the resets of every array), is mostly the host's work of launching: CuPy packs
each argument, so the time grows with the number of arrays and numbers a kernel takes.  This
benchmark launches one block of 32 threads of do-nothing kernels taking 1 to 6 arrays of one
element and 0 to 3 numbers besides, each through ``run_on_gpu`` (20 timed launches), in 5
interleaved rounds so that drift in the host's speed spreads over every case.  It found the
time does not grow with the arguments (7.3-9.8 µs for all eight), so the performance model keeps
one launch time per size of the resets before it (``launch_curve``, from
``tools/device/perf_calibration.py``'s ``launch_*`` cases); ``tests/test_perf_model.py`` holds
the record to that.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from gpu_lessons import kernels  # noqa: E402

ROUNDS = 5


def la1(t, a, n):
    t.return_if(n < 1)
    a[0] = 1


def la2(t, a, b, n):
    t.return_if(n < 1)
    a[0] = 1


def la3(t, a, b, c, n):
    t.return_if(n < 1)
    a[0] = 1


def la4(t, a, b, c, d, n):
    t.return_if(n < 1)
    a[0] = 1


def la6(t, a, b, c, d, e, f, n):
    t.return_if(n < 1)
    a[0] = 1


def ln0(t, a):
    a[0] = 1


def ln2(t, a, n, m):
    t.return_if(n < m)
    a[0] = 1


def ln3(t, a, n, m, p):
    t.return_if(n < m + p)
    a[0] = 1


#: name -> (kernel, arrays, numbers)
CASES = {"arrays1_numbers1": (la1, 1, 1), "arrays2_numbers1": (la2, 2, 1),
         "arrays3_numbers1": (la3, 3, 1), "arrays4_numbers1": (la4, 4, 1),
         "arrays6_numbers1": (la6, 6, 1), "arrays1_numbers0": (ln0, 1, 0),
         "arrays1_numbers2": (ln2, 1, 2), "arrays1_numbers3": (ln3, 1, 3)}


def _args(arrays, numbers):
    return [np.zeros(1, np.float32) for _ in range(arrays)] + [1] * numbers


def main(argv):
    dry = "--dry" in argv
    out = [a for a in argv[1:] if not a.startswith("--")]
    if dry:
        for name, (k, arrays, numbers) in CASES.items():
            kernels.run(k, 1, 32, *_args(arrays, numbers))
            kernels.to_cuda(k, *_args(arrays, numbers))
            print(f"  {name}: simulated and translated")
        return
    import cupy as cp

    samples = {name: [] for name in CASES}
    for r in range(ROUNDS):
        for name, (k, arrays, numbers) in CASES.items():
            run = kernels.run_on_gpu(k, 1, 32, *_args(arrays, numbers), repeats=20)
            samples[name] += list(run.timing.samples)
        print(f"  round {r + 1} of {ROUNDS} done")
    props = cp.cuda.runtime.getDeviceProperties(0)
    record = {"what": "launch overhead as run_on_gpu times it, against the number of arguments",
              "how": __doc__.strip().splitlines()[0] + " (tools/device/perf_launch.py)",
              "gpu": props["name"].decode(), "cupy": cp.__version__,
              "driver": cp.cuda.runtime.driverGetVersion(),
              "runtime": cp.cuda.runtime.runtimeGetVersion(),
              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cases": {}}
    for name, (_, arrays, numbers) in CASES.items():
        s = samples[name]
        record["cases"][name] = {"arrays": arrays, "numbers": numbers,
                                 "seconds": float(np.median(s)), "samples": s}
        print(f"  {name:20s} {np.median(s) * 1e6:7.2f} us")
    with open(out[0], "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main(sys.argv)
