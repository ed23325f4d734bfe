"""Measure communication/computation overlap on every visible GPU (PyTorch + NCCL), as raw JSON.

Run from the repository root on a machine with NVIDIA GPUs and PyTorch:

    python3 tools/device/overlap_nccl.py --out $OUT/overlap.json            # the real run (>= 2 GPUs)
    python3 tools/device/overlap_nccl.py --out $OUT/overlap.json --quick    # fewer repeats
    python3 tools/device/overlap_nccl.py --report tests/data/h200x2_overlap.json   # Markdown

It starts one process per GPU (``torch.multiprocessing``, start method "spawn") with NVLink
multicast off in each (``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``,
``NVSHMEM_DISABLE_NVLS=1``, set here before PyTorch is imported, and again in every worker),
runs ``gpu_lessons.measure.overlap``'s four phases, writes the raw record to ``--out`` and the
Markdown report (``gpu_lessons.overlap.report_markdown``) beside it (``.md``),
and prints the report.  On one GPU the run is a smoke test of the code path and the record
says so: an all-reduce over one rank moves nothing between GPUs.
"""

import os

# before anything can load NCCL
os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                   "NVSHMEM_DISABLE_NVLS": "1"})

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpu_lessons import overlap as overlap_model
from gpu_lessons.measure import overlap
from gpu_lessons.measure.multigpu import NVLS_OFF


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="where to write the raw record (JSON)")
    ap.add_argument("--report", metavar="JSON", help="print the Markdown report of a record")
    ap.add_argument("--gpus", type=int, default=None, help="world size (default: every GPU)")
    ap.add_argument("--quick", action="store_true", help="3 repeats instead of 10")
    ap.add_argument("--backend", choices=overlap.BACKENDS, default="nccl",
                    help="gloo runs the code path on the CPU (no GPU needed)")
    ap.add_argument("--timeout", type=float, default=540.0, help="seconds for the whole run")
    args = ap.parse_args(argv)
    if args.report:
        sys.stdout.write(overlap_model.report_markdown(overlap_model.load_overlap(args.report)))
        return 0
    if not args.out:
        ap.error("--out is required (or --report)")
    assert all(os.environ.get(k) == v for k, v in NVLS_OFF.items())
    try:
        import torch  # noqa: F401 - the run spawns one PyTorch process per GPU
    except ImportError:
        ap.exit(2, "overlap_nccl.py needs PyTorch (with NCCL and two or more GPUs for "
                   "--backend nccl); nothing was measured\n")
    config = (overlap.OverlapConfig.cpu_test() if args.backend == "gloo" else
              overlap.OverlapConfig.quick() if args.quick else overlap.OverlapConfig())
    began = time.monotonic()
    raw = overlap.run_overlap_raw(config, world_size=args.gpus, backend=args.backend,
                                  timeout_s=args.timeout)
    m = overlap.overlap_from_raw(raw)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    m.save(out)
    report = overlap_model.report_markdown(m)
    out.with_suffix(".md").write_text(report)
    sys.stdout.write(report)
    print(f"\nwrote {out} and {out.with_suffix('.md')} in {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
