"""How long the models take at the sizes the lessons and explorers use.

    .venv/bin/python tools/bench_models.py              # prints a markdown table
    .venv/bin/python tools/bench_models.py --repeat 9   # best of 9 runs per case

Each case runs ``--repeat`` times (default 7) after one untimed call and keeps the fastest
run: on a shared 2-core machine one run can stall behind another process.  The CPU column is
this process's CPU time, which the neighbours disturb less than wall time.  The budget beside
each case is what it has to stay under for the lesson or explorer that calls it to feel
instant (a widget update well under 100 ms; a single call a lesson makes in a loop, about a
millisecond); the tests check what the models compute, this table how fast.
"""

from __future__ import annotations

import platform
import time

import benchkit
import numpy as np
from benchkit import best_of

from gpu_lessons import allocator as A
from gpu_lessons import latency as L
from gpu_lessons import memory, occupancy, traces
from gpu_lessons import system as S
from gpu_lessons.cache import Cache
from gpu_lessons.mfu import compare_estimates, mfu, transformer_flops


def _cases() -> list[tuple[str, float, object]]:
    """(case, budget in ms, function) — the sizes the lessons use."""
    serve, train = A.serving_trace(200, seed=0), A.training_trace(3)
    addrs = traces.random_access(65_536, 1 << 20).addresses
    cache = Cache(32768, 128, 4)
    flops = transformer_flops(8, 1024, 768, 12, 3072, 50257, 12)
    tile = memory.tile_column(3, width=32, padding=1, element_bytes=16)

    def allocators():
        A.compare(serve, page_bytes=A.BLOCK_TOKENS * A.KV_BYTES_OPT_13B, capacity=16 * 2**30,
                  snapshots=range(0, len(serve), 40))
        A.caching(train, snapshots=range(0, len(train), 20))

    def system_step():
        S.compare_modes(1000, 2.0)
        S.batch_sweep(np.arange(1, 513), fixed_us=2, per_item_us=0.05, n_kernels=200)
        S.training_step(np.full(96, 1.5), grad_bytes=np.full(96, 50e6), gpus=8,
                        link_bandwidth="nvlink4", comm_sm_fraction=0.1,
                        bucket_bytes=S.DDP_BUCKET_BYTES)

    return [
        ("allocator: serving trace x 3 allocators + training trace", 100, allocators),
        ("system: launch modes, batch sweep, 96-layer training step", 100, system_step),
        ("cache: 65,536 random loads through 32 KiB", 100,
         lambda: (cache.reset(), cache.run(addrs))),
        ("latency: one occupancy curve (of the 10 a slider sweep draws)", 20,
         lambda: L.curve(64, alu_per_load=4, latency=600, ilp=2)),
        ("occupancy: occupancy_vs_block_size", 20,
         lambda: occupancy.occupancy_vs_block_size(cc="9.0", registers_per_thread=40,
                                                   shared_mem_per_block=4096)),
        ("occupancy: occupancy_vs_registers", 20,
         lambda: occupancy.occupancy_vs_registers(cc="9.0", threads_per_block=256,
                                                  shared_mem_per_block=4096)),
        ("occupancy: occupancy_vs_shared_mem", 20,
         lambda: occupancy.occupancy_vs_shared_mem(cc="9.0", threads_per_block=256,
                                                   registers_per_thread=40)),
        ("memory: global_load of one warp", 1, lambda: memory.global_load(memory.strided(3), 4)),
        ("memory: shared_load of one warp, 16-byte lanes", 1,
         lambda: memory.shared_load(tile, 16)),
        ("mfu: transformer_flops (GPT-2 small)", 1,
         lambda: transformer_flops(8, 1024, 768, 12, 3072, 50257, 12)),
        ("mfu: mfu() with recomputation", 1,
         lambda: mfu(flops, gpu="h100", tokens_per_s=1e5, n_gpus=8, recompute=True)),
        ("mfu: compare_estimates over 64 sequence lengths", 1,
         lambda: compare_estimates(range(128, 8193, 128), d_model=768, n_layers=12, d_ff=3072,
                                   vocab_size=50257, n_heads=12)),
    ]


def table(repeat: int) -> str:
    lines = [f"Model call times on {platform.node() or 'this machine'} "
             f"({platform.processor() or platform.machine()}, Python "
             f"{platform.python_version()}, NumPy {np.__version__}), "
             f"{time.strftime('%Y-%m-%d', time.gmtime())}; best of {repeat} runs.", "",
             "| case | budget (ms) | best run (ms) | CPU time (ms) | within budget |",
             "|---|---|---|---|---|"]
    for name, budget, fn in _cases():
        wall, cpu = best_of(fn, repeat)
        ok = "yes" if cpu * 1e3 < budget else "**no**"
        lines.append(f"| {name} | {budget:g} | {wall * 1e3:.3f} | {cpu * 1e3:.3f} | {ok} |")
    return "\n".join(lines)


if __name__ == "__main__":
    benchkit.main(__doc__, table)
