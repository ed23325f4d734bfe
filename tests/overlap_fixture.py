"""A SYNTHETIC overlap record, for testing the plumbing (never shown to learners as a measurement).

``tests/data/overlap_fixture.json`` is :func:`build` written out (``python tests/overlap_fixture.py``
rewrites it; ``tests/models/test_overlap.py`` checks the file and this module agree).  Every number is
chosen so its consequences can be derived by hand in the tests:

* 2 "GPUs", 8 layers of one GEMM each, **200 µs per GEMM** (compute alone 1,600 µs), 32 MiB of
  gradients per layer (256 MiB in all);
* all-reduces follow the ring model exactly with **α = 10 µs, B = 200 GB/s**: for p = 2,
  ``t = 2·α + S / B`` = 20 µs + S / (200 GB/s), so a fit must give back α and B;
* contention: the GEMMs start 30 µs after the all-reduces (the host queued those first) and
  take 1,600 / 0.9 µs beside them (so ``comm_sm_fraction`` = 0.1); the 64 MiB all-reduces take
  400 µs apiece instead of 355.54432 µs;
* overlap, measured exposed communication: 300 µs with 32 MiB buckets, 600 µs with 64 MiB
  buckets (outside 20 % of the model on purpose) and 1,400 µs with one 256 MiB bucket.

Rank 0 is the slower rank in every repeat (rank 1 takes 0.99 of its time); rank 0's repeats
are 0.98, 1 and 1.05 times the value above, so the median of the slowest rank is the value.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MiB = 2**20
PATH = Path(__file__).parent / "data" / "overlap_fixture.json"

GEMM_US = 200.0
N_LAYERS = 8
GRAD = 32 * MiB
ALPHA_US = 10.0
BANDWIDTH = 200e9                       # bytes/s
SIZES = (1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB)
BUCKETS = (32 * MiB, 64 * MiB, 256 * MiB)
#: bucket bytes -> (measured exposed µs, compute-stream time during overlap µs)
OVERLAP = {32 * MiB: (300.0, 1720.0), 64 * MiB: (600.0, 1700.0), 256 * MiB: (1400.0, 1600.0)}
CONTENTION_BYTES = 64 * MiB
COMPUTE_START_US = 30.0                 # the host queued the all-reduces first
COMPUTE_UNDER_US = 1600.0 / 0.9
ALLREDUCE_UNDER_US = 400.0
COUNT = 6


def ring_us(nbytes: int) -> float:
    """2(p−1)·α + 2(p−1)/p · S/B for p = 2, in µs."""
    return 2 * ALPHA_US + nbytes / BANDWIDTH * 1e6


def _repeats(us: float, rank: int) -> list[float]:
    scale = 1.0 if rank == 0 else 0.99
    return [us * f * scale * 1e-6 for f in (0.98, 1.0, 1.05)]


def _groups(cap: int) -> list[list[int]]:
    per = cap // GRAD
    order = list(range(N_LAYERS - 1, -1, -1))
    return [order[i:i + per] for i in range(0, N_LAYERS, per)]


def _rank(rank: int) -> dict:
    compute = N_LAYERS * GEMM_US
    ends = [ALLREDUCE_UNDER_US * (i + 1) * 1e-6 for i in range(COUNT)]
    return {
        "meta": {"name": "synthetic GPU (test fixture)", "device": f"fake:{rank}"},
        "compute_samples": _repeats(compute, rank),
        "allreduce": [{"nbytes": s, "iters": 10, "samples": _repeats(ring_us(s), rank)}
                      for s in SIZES],
        "overlap": [{"bucket_bytes": cap, "buckets": _groups(cap),
                     "total_samples": _repeats(compute + OVERLAP[cap][0], rank),
                     "compute_samples": _repeats(OVERLAP[cap][1], rank)} for cap in BUCKETS],
        "contention": {"allreduce_bytes": CONTENTION_BYTES, "count": COUNT,
                       "allreduce_alone_samples": _repeats(ring_us(CONTENTION_BYTES), rank),
                       "compute_start_samples": [COMPUTE_START_US * 1e-6] * 3,
                       "compute_samples": _repeats(COMPUTE_UNDER_US, rank),
                       "comm_end_samples": [ends, ends, ends],
                       "total_samples": _repeats(COUNT * ALLREDUCE_UNDER_US, rank)},
    }


def build() -> dict:
    return {
        "schema": 1, "what": "communication/computation overlap",
        "synthetic": True, "smoke_test": False, "backend": "nccl", "world_size": 2,
        "note": ("SYNTHETIC FIXTURE for testing the plumbing: made-up numbers chosen for hand "
                 "derivations (tests/overlap_fixture.py), not a measurement"),
        "config": {"gemm_n": 4096, "dtype": "bfloat16", "n_layers": N_LAYERS,
                   "grad_bytes_per_layer": GRAD, "bucket_bytes": list(BUCKETS),
                   "allreduce_bytes": list(SIZES), "contention_bytes": CONTENTION_BYTES,
                   "repeats": 3, "warmup": 1, "iters": 10},
        "meta": {"date_utc": "synthetic", "torch": "none (synthetic)", "nccl": "none (synthetic)",
                 "env": {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1",
                         "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}},
        "by_rank": [_rank(0), _rank(1)],
    }


def text() -> str:
    return json.dumps(build(), indent=1) + "\n"


if __name__ == "__main__":
    PATH.write_text(text())
    sys.stdout.write(f"wrote {PATH}\n")
