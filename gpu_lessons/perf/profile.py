"""A profiler's report of a simulated run, laid out as Nsight Compute lays out its own.

:func:`profile` runs the performance model (:func:`gpu_lessons.perf.predict_time`) and reports
what it counted in Nsight Compute's sections -- GPU Speed Of Light Throughput, Memory Workload
Analysis, Compute Workload Analysis, Launch Statistics, Occupancy, Warp State Statistics --
with :attr:`Profile.metrics` keyed by ncu's own metric names, so the report of a kernel a
learner cannot run sits beside the real one (``tests/data/h200_perf_ncu.json`` holds ncu's
reports of the course's kernels on an H200; :func:`beside` sets the two side by side).

What the names mean here (docs/performance_model.md says how close each comes to ncu):

* ``dram__bytes_read.sum`` / ``dram__bytes_write.sum``: distinct 64-byte blocks read and
  32-byte sectors written, as ncu sees them with its default cache control (caches flushed
  before the kernel, so every input comes from DRAM), less the written bytes still dirty in
  L2 when the kernel ends (:func:`~gpu_lessons.perf.calibration.written_back`, with the
  measured ``l2_dirty_exit_bytes``: ncu does not count them);
* ``lts__t_sectors_srcunit_tex.sum``: sectors L1 asks of L2: each block's distinct load
  sectors (its re-reads hit L1), every store and atomic sector;
* ``l1tex__data_pipe_lsu_wavefronts_mem_shared.sum``,
  ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum``: the simulator's wavefronts and
  conflicts, over the whole grid;
* ``smsp__inst_executed.sum``: warp instructions **of the simulator's instruction set**
  (one per operation of the kernel's Python), not SASS: the compiler's address arithmetic,
  loop control and prologue make SASS several times longer;
* ``launch__registers_per_thread``: NVRTC's register count for sm_90;
* ``sm__warps_active.avg.pct_of_peak_sustained_active``: the warps the launch keeps resident
  on the busiest SM, averaged over its rounds of blocks;
* ``gpu__time_duration.sum``: the predicted kernel time without the launch overhead.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._format import bandwidth, binary_bytes, duration, percent, si
from .._math import cdiv
from .calibration import written_back
from .model import _predict

SECTIONS = ("GPU Speed Of Light Throughput", "Memory Workload Analysis",
            "Compute Workload Analysis", "Launch Statistics", "Occupancy",
            "Warp State Statistics")


@dataclass(frozen=True)
class Profile:
    """``sections``: section -> ((label, value text), ...); ``metrics``: ncu metric name ->
    number; ``prediction``: the :class:`~gpu_lessons.perf.TimePrediction` behind it."""

    kernel: str
    gpu: str
    sections: dict
    metrics: dict
    prediction: object

    def __repr__(self) -> str:
        lines = [f"  {self.kernel} (simulated), {self.gpu}"]
        for name, rows in self.sections.items():
            lines.append(f"    Section: {name}")
            lines.append("    " + "-" * 64)
            lines += [f"    {label:<44} {value}" for label, value in rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from .._format import html_table

        return "".join(html_table(f"{self.kernel}: {name} (simulated)", ("metric", "value"),
                                  rows) for name, rows in self.sections.items())


def profile(kernel, grid, block, *args, gpu: str = "H200", exact: bool = True,
            registers: int | None = None) -> Profile:
    """The Nsight Compute report of ``kernel<<<grid, block>>>(*args)`` on ``gpu``, from the
    performance model's sampled simulation (full-size arguments, not written)."""
    pred, x = _predict(kernel, grid, block, args, gpu, exact, registers, 8, 4.0)
    return _report(pred, x, exact)


def _report(pred, x, exact) -> Profile:
    s, occ, k = x["sample"], x["occupancy"], x["constants"]
    n_b = s.n_blocks
    total = lambda f: s.total(f)  # noqa: E731
    by_kind = lambda name: total(lambda b: b.stats["by_kind"].get(name, 0.0))  # noqa: E731
    kernel_s = pred.seconds - pred.overhead
    rounds = cdiv(x["per_sm"], x["resident"])
    warps = s.warps_per_block
    achieved = x["per_sm"] * warps / (rounds * 64) if rounds else 0.0
    lanes = total(lambda b: b.stats.get("active_lanes", 0.0))
    instr = total(lambda b: b.stats["instructions"])
    muls = total(lambda b: b.mix.get("fp32_mul", 0.0))
    fp32 = total(lambda b: b.mix.get("fp32", 0.0))
    simt = lanes / (32 * instr) if instr else 0.0
    fused = 0.0 if exact else min(muls, fp32 - muls)
    metrics = {
        "gpu__time_duration.sum": kernel_s * 1e9,
        "dram__bytes_read.sum": x["cold_read"],
        "dram__bytes_write.sum": written_back(x["cold_read"], x["cold_write"],
                                              k.l2_dirty_exit_bytes, x["l2_load_sectors"] * 32),
        "lts__t_sectors_srcunit_tex.sum": x["l2_sectors"],
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum":
            total(lambda b: b.stats.get("ld.global.sectors", 0.0)),
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum":
            total(lambda b: b.stats.get("st.global.sectors", 0.0)),
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": by_kind("ld.global"),
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum":
            total(lambda b: b.stats.get("shared_wavefronts", 0.0)),
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum":
            total(lambda b: b.stats.get("bank_conflicts", 0.0)),
        "smsp__inst_executed.sum": instr,
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": (muls - fused) * 32 * simt,
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum":
            (fp32 - muls - fused) * 32 * simt,
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": fused * 32 * simt,
        "launch__registers_per_thread": x["registers"],
        "launch__grid_size": n_b,
        "launch__block_size": s.block[0] * s.block[1] * s.block[2],
        "launch__waves_per_multiprocessor": n_b / (occ.blocks_per_sm * k.sms),
        "sm__maximum_warps_per_active_cycle_pct": occ.occupancy * 100,
        "sm__warps_active.avg.pct_of_peak_sustained_active": achieved * 100,
        "sm__cycles_elapsed.avg.per_second": k.clock_hz,
    }
    b = pred.breakdown
    dram_bytes = x["cold_read"] + x["cold_write"]
    sol = [("Duration", duration(kernel_s)),
           ("DRAM Throughput", f"{percent(min(dram_bytes / kernel_s / k.copy_bw, 1))} of the "
                               f"measured {bandwidth(k.copy_bw)}" if kernel_s else "–"),
           ("L2 Throughput", percent(min(b["L2"] / kernel_s, 1)) if kernel_s else "–"),
           ("Compute (SM) Throughput",
            percent(min(max(b["integer/ALU issue"], b["FP64"], b["SFU"]) / kernel_s, 1))
            if kernel_s else "–"),
           ("Limited by (model)", pred.limiter)]
    ev = pred.evidence
    mem = [("DRAM bytes read", si(metrics["dram__bytes_read.sum"], "B")),
           ("DRAM bytes written", si(metrics["dram__bytes_write.sum"], "B")),
           ("L2 sectors from L1", f"{metrics['lts__t_sectors_srcunit_tex.sum']:,.0f}"),
           ("Global sectors per request", ev["sectors per request"][1]),
           ("Shared wavefronts", f"{metrics['l1tex__data_pipe_lsu_wavefronts_mem_shared.sum']:,.0f}"),
           ("Shared bank conflicts",
            f"{metrics['l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum']:,.0f}"),
           ("Bytes in flight per SM", ev["bytes in flight per SM"][1])]
    comp = [("Executed warp instructions (simulator's)", f"{instr:,.0f}"),
            ("Instruction mix per SM", ev["instruction mix per SM"][1]),
            ("SIMT efficiency (active lanes)", percent(simt))]
    launch = [("Grid size", f"{n_b:,} blocks"), ("Block size", f"{metrics['launch__block_size']:,}"
                                                                f" threads"),
              ("Registers per thread", f"{x['registers']}"),
              ("Static shared memory per block", binary_bytes(s.shared_bytes)),
              ("Waves per SM", f"{metrics['launch__waves_per_multiprocessor']:,.2f}")]
    occupancy = [("Theoretical occupancy", percent(occ.occupancy)),
                 ("Block limit", f"{occ.blocks_per_sm} blocks / SM ({occ.limiter})"),
                 ("Achieved occupancy (model)", percent(achieved))]
    warp = [("Dependent chain per warp", ev["dependent chain per warp"][1]),
            ("Latency-bound time", duration(b["too little parallelism to hide latency"]))]
    sections = dict(zip(SECTIONS, (sol, mem, comp, launch, occupancy, warp), strict=True))
    return Profile(pred.kernel, pred.gpu, sections, metrics, pred)


#: The metrics :func:`beside` compares, with how they are compared ("ratio" or "points").
COMPARED = (("launch__registers_per_thread", "exact"), ("dram__bytes_read.sum", "ratio"),
            ("dram__bytes_write.sum", "ratio"), ("lts__t_sectors_srcunit_tex.sum", "ratio"),
            ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "ratio"),
            ("smsp__inst_executed.sum", "ratio"),
            ("sm__warps_active.avg.pct_of_peak_sustained_active", "points"),
            ("gpu__time_duration.sum", "ratio"))


def beside(simulated: dict, measured: dict) -> list[tuple[str, float, float, str]]:
    """(metric, simulated, ncu, difference in words) for each of :data:`COMPARED` that
    ``measured`` (an ncu report's metrics) has."""
    rows = []
    for name, how in COMPARED:
        if name not in measured or name not in simulated:
            continue
        sim, real = float(simulated[name]), float(measured[name])
        if how == "points":
            diff = f"{sim - real:+.1f} points"
        elif how == "exact":
            diff = "equal" if sim == real else f"{sim - real:+.0f}"
        elif real == 0:
            diff = "both 0" if sim == 0 else "ncu: 0"
        else:
            diff = f"x {sim / real:.2f}"
        rows.append((name, sim, real, diff))
    return rows
