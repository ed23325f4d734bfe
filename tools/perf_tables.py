"""Write gpu_lessons/data/perf_calibration.toml from the H200 records.

    python tools/perf_tables.py

The [gpus.H200] table: the constants gpu_lessons.perf.calibration.derive computes from
tests/data/h200_perf_microbench.json.  The [worked_puzzles.H200] table: each worked puzzle
kernel's time measured with run_on_gpu in tests/data/h200_perf_validation.json
("puzzle_runs") and what the model predicts for it (the puzzle checks print both).
tests/test_perf_model.py checks the file against the records and the model.
"""

import importlib.util
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_lessons.perf import calibration  # noqa: E402
from gpu_lessons.perf.model import predict_time  # noqa: E402

HEADER = """\
# Calibration of the performance model (gpu_lessons.perf), one table per GPU.
# Data, not code: written by tools/perf_tables.py from the records in tests/data/.
# [gpus.NAME]: every value derived by gpu_lessons.perf.calibration.derive from the
# microbenchmark record named in the table (tools/device/perf_calibration.py wrote it on that
# GPU); tests/test_perf_model.py recomputes each value from the record.
# Units: seconds, bytes, bytes/s; *_per_s_sm = warp instructions (or sectors, wavefronts) per
# second per SM; *_s_sm = seconds of one SM per warp instruction.
# [worked_puzzles.NAME.<puzzle>]: the worked kernel timed with run_on_gpu (measured_us) and
# the model's prediction (predicted_us, limiter).  See docs/performance_model.md.

"""


def main():
    record_path = "tests/data/h200_perf_microbench.json"
    record = json.loads((ROOT / record_path).read_text())
    atomics = json.loads((ROOT / "tests/data/h200_perf_atomics.json").read_text())
    values = calibration.derive(record, gpu="H200", atomics=atomics)
    values.update(calibration.derive_writeback(
        json.loads((ROOT / "tests/data/h200_l2_writeback.json").read_text())))
    text = HEADER + calibration.toml_table(values, "H200", record_path,
                                           record["runs"][0]["when"],
                                           "tools/device/perf_calibration.py (both parts), "
                                           "tools/device/perf_atomics.py "
                                           "(tests/data/h200_perf_atomics.json), "
                                           "tools/device/l2_writeback.py "
                                           "(tests/data/h200_l2_writeback.json)")
    runs = json.loads((ROOT / "tests/data/h200_perf_validation.json").read_text())
    spec = importlib.util.spec_from_file_location(
        "perf_calibration", ROOT / "tools" / "device" / "perf_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calibration._table.cache_clear()
    (ROOT / "gpu_lessons/data/perf_calibration.toml").write_text(text)
    calibration._table.cache_clear()
    text += ("\n# the worked puzzle kernels: tests/data/h200_perf_validation.json, "
             f"puzzle_runs ({runs['when']})\n")
    for name, (kernel, grid, block, args) in mod.puzzle_cases().items():
        p = predict_time(kernel, grid, block, *args)
        text += (f"\n[worked_puzzles.H200.{name}]\n"
                 f"measured_us = {runs['puzzle_runs'][name]['measured_us']!r}\n"
                 f"predicted_us = {round(p.us, 2)!r}\nlimiter = \"{p.limiter}\"\n")
        print(f"{name:22s} {runs['puzzle_runs'][name]['measured_us']:10.1f} {p.us:10.1f}")
    (ROOT / "gpu_lessons/data/perf_calibration.toml").write_text(text)


if __name__ == "__main__":
    main()
