"""Predict a kernel's GPU time from a simulated sample of its blocks and measured rates.

:func:`predict_time` takes the arguments of a GPU run at full size and returns the time
``gpu_lessons.kernels.run_on_gpu`` would measure (:class:`TimePrediction`), with the resource
that sets it and the numbers behind it.  The model, per SM of the busiest SM (docs/
performance_model.md has the derivation and its measured errors):

* **work per block** from :func:`gpu_lessons.perf.sample.sample`: instructions by class,
  global sectors, shared wavefronts, atomics, barriers, dependent-load batches;
* **residency** from the occupancy calculator with the kernel's real register count (NVRTC):
  ``B`` blocks per SM at once, ``n`` = ceil(blocks / SMs) on the busiest SM, ``ceil(n / B)``
  rounds of them;
* **each resource's time** = its work over its measured rate (``calibration``): DRAM bytes
  (distinct 64-byte blocks read, 32-byte sectors written: what reaches DRAM through the L2)
  over the bandwidth that the bytes in flight sustain (Little's law, a measured curve), L1
  and L2 sectors, shared wavefronts, each pipe's instructions, atomics per address, blocks
  launched;
* **latency**: each round of blocks lasts as long as one warp's chain of dependent loads
  (at the loaded latency the curve implies), dependent arithmetic and barriers;
* time = the launch's overhead (as ``run_on_gpu`` times it) + the largest of those.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import _validate
from .._format import bandwidth, binary_bytes, duration, percent, si
from . import calibration
from .sample import sample

LIMITERS = ("DRAM bandwidth", "L2", "shared memory", "FP32 pipe", "FP64", "SFU",
            "integer/ALU issue", "atomics", "too little parallelism to hide latency",
            "launch overhead")


@dataclass(frozen=True)
class TimePrediction:
    """A predicted kernel time (seconds) and why.

    ``breakdown``: limiter -> the time that resource alone needs (the kernel's part, without
    the launch overhead, which ``overhead`` holds); ``limiter``: the largest (one of
    :data:`LIMITERS`); ``evidence``: name -> (value, text) of what the prediction rests on;
    ``notes``: warnings in words (no calibration, an unrepresentative sample...)."""

    kernel: str
    gpu: str
    grid: tuple
    block: tuple
    seconds: float
    limiter: str
    breakdown: dict
    overhead: float
    evidence: dict = field(default_factory=dict)
    notes: tuple = ()
    calibrated: bool = True
    exact: bool = True

    @property
    def us(self) -> float:
        return self.seconds * 1e6

    def _rows(self):
        rows = [("predicted time", f"{duration(self.seconds)} = launch {duration(self.overhead)}"
                                   f" + {duration(self.seconds - self.overhead)}"),
                ("limited by", self.limiter)]
        for k, v in sorted(self.breakdown.items(), key=lambda kv: -kv[1]):
            rows.append((f"  {k} alone", duration(v)))
        rows += [(k, text) for k, (_, text) in self.evidence.items()]
        rows += [("note", n) for n in self.notes]
        return rows

    def __repr__(self) -> str:
        head = (f"{self.kernel}<<<{_dims(self.grid)}, {_dims(self.block)}>>> on {self.gpu} "
                f"({'-fmad=false' if self.exact else 'default build'}):")
        return "\n".join([head] + [f"  {k}: {v}" for k, v in self._rows()])

    def _repr_html_(self) -> str:
        from .._format import html_table

        return html_table(f"{self.kernel} on {self.gpu}: predicted {duration(self.seconds)}",
                          ("quantity", "value"), self._rows())

    def line(self) -> str:
        """One line for a puzzle check: time and limiter."""
        return (f"predicted on {self.gpu}: {duration(self.seconds)}, limited by "
                f"{self.limiter}" + ("" if self.calibrated else " (datasheet figures)"))


def _count(n: float) -> str:
    """A count with an SI prefix and no unit (``1.23 M``)."""
    return si(n, "").strip()


def _dims(d) -> str:
    d = tuple(d)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return " × ".join(f"{v:,}" for v in d)


def _interp_curve(curve, inflight: float) -> float:
    """Read bandwidth at ``inflight`` bytes per SM from the measured curve: the running
    maximum (more bytes in flight never lowers what can be reached), log-log between points,
    proportional below the first (Little's law at the unloaded latency), flat above the
    last."""
    xs, ys = [], []
    for x, y in sorted(curve):
        if xs and x == xs[-1]:
            ys[-1] = max(ys[-1], y)
            continue
        xs.append(float(x))
        ys.append(max(float(y), ys[-1] if ys else 0.0))
    if inflight <= xs[0]:
        return ys[0] * max(inflight, 1.0) / xs[0]
    if inflight >= xs[-1]:
        return ys[-1]
    return float(np.exp(np.interp(np.log(inflight), np.log(xs), np.log(ys))))


def _units(curve, lines: int) -> float:
    """How many of ``lines`` hot lines the L2 serves at once, from the measured curve (at
    least 1, log-log between its points, flat beyond the last)."""
    if not curve:
        return float(lines)
    xs = [float(x) for x, _ in curve]
    ys = list(np.maximum.accumulate([float(y) for _, y in curve]))
    if lines <= xs[0]:
        return max(1.0, ys[0])
    return max(1.0, float(np.exp(np.interp(np.log(lines), np.log(xs), np.log(ys)))))


def _block_seconds(table, threads: int) -> float:
    ts = [t for t, _ in table]
    vs = [v for _, v in table]
    return float(np.interp(threads, ts, vs))


def compiled_facts(kernel, args, exact: bool = True):
    """``(registers per thread, shared-access widths)`` of the kernel's translation, compiled
    for sm_90 with NVRTC (no GPU; :func:`gpu_lessons.perf.compiled.facts`); ``None`` when NVRTC
    is not installed."""
    from . import compiled

    try:
        return compiled.facts(kernel, args, exact=exact)
    except RuntimeError:
        return None


def predict_time(kernel, grid, block, *args, gpu: str = "H200", exact: bool = True,
                 registers: int | None = None, max_blocks: int = 8,
                 time_budget: float = 4.0) -> TimePrediction:
    """The time ``run_on_gpu(kernel, grid, block, *args, exact=exact)`` would measure on
    ``gpu``, from a simulated sample of the launch's blocks (see the module docstring).

    ``args``: the full-size arrays and numbers (they are not written); ``registers``: the
    kernel's registers per thread if known (default: compile it with NVRTC);
    ``max_blocks``/``time_budget``: how many blocks to simulate at most, and for how long."""
    return _predict(kernel, grid, block, args, gpu, exact, registers, max_blocks,
                    time_budget)[0]


def _predict(kernel, grid, block, args, gpu, exact, registers, max_blocks, time_budget):
    from .. import hardware
    from ..occupancy import occupancy

    exact = _validate.flag("exact", exact)
    g = hardware.gpu(gpu)
    k = calibration.constants(gpu)
    s = sample(kernel, grid, block, *args, max_blocks=max_blocks, time_budget=time_budget)
    threads = s.block[0] * s.block[1] * s.block[2]
    notes = []
    if not k.measured:
        notes.append(k.source)
    facts = compiled_facts(kernel, args, exact)
    widths = facts[1] if facts else {"ld": 1.0, "st": 1.0}
    if registers is None:
        if facts is None:
            registers = 32
            notes.append("NVRTC is not installed: 32 registers per thread assumed")
        else:
            registers = facts[0]
    registers = _validate.integer("registers", registers, low=1, high=255)
    occ = occupancy(cc=g.cc, threads_per_block=threads, registers_per_thread=registers,
                    shared_mem_per_block=int(s.shared_bytes))
    if occ.blocks_per_sm < 1:
        raise ValueError(f"{s.kernel}: a block of {threads} threads at {registers} registers "
                         f"and {binary_bytes(s.shared_bytes)} of shared memory cannot be resident on "
                         f"{g.name} ({occ.limiter})")
    sms = k.sms
    n_b = s.n_blocks
    warps = s.warps_per_block
    per_sm = math.ceil(n_b / sms)
    resident = min(occ.blocks_per_sm, per_sm)
    rounds = math.ceil(per_sm / resident)

    def mean(f):
        return s.mean(f)

    kinds = lambda name: mean(lambda b: b.stats["by_kind"].get(name, 0.0))  # noqa: E731
    mix = lambda name: mean(lambda b: b.mix.get(name, 0.0))  # noqa: E731

    # -- bytes: DRAM (through the L2) and L2 -------------------------------------------------
    l2_cap = float(g.l2_bytes)
    array_bytes = sum(nb for nb, _, _ in s.arrays.values())
    in_l2 = array_bytes <= l2_cap / 2   # the reset copies leave it all in the L2
    read = write = l2_sectors = 0.0
    for name, (nbytes, _, _) in s.arrays.items():
        fp = [b.footprint.get(name, {}) for b in s.blocks]
        cap64 = math.ceil(nbytes / 64) * 64
        cap32 = math.ceil(nbytes / 32) * 32
        ld64 = float(np.mean([f.get("ld64", 0.0) for f in fp])) * n_b * 64
        st32 = float(np.mean([f.get("st32", 0.0) for f in fp])) * n_b * 32
        at32 = float(np.mean([f.get("atom32", 0.0) for f in fp])) * n_b * 32
        read += min(ld64, cap64) + min(at32, cap32)
        write += min(st32 + at32, cap32)
        l2_sectors += float(np.mean([f.get("ld32", 0.0) for f in fp])) * n_b
    load_sectors = l2_sectors
    l2_sectors += (mean(lambda b: b.stats.get("st.global.sectors", 0.0))
                   + mean(lambda b: b.stats.get("atom.global.sectors", 0.0))) * n_b
    cold_read, cold_write = read, write
    if in_l2:
        read = write = 0.0

    load_instr = kinds("ld.global")
    loads_w = mean(lambda b: b.loads) / warps
    batches_w = mean(lambda b: b.batches) / warps
    mlp = loads_w / batches_w if batches_w else 0.0
    bytes_per_load = (cold_read / (load_instr * n_b) if load_instr and cold_read else 128.0)
    inflight = resident * warps * mlp * bytes_per_load
    bw_read = _interp_curve(k.read_curve, inflight) if inflight else k.copy_bw
    read_top = max(y for _, y in k.read_curve)
    t_dram = max(read / read_top, (read + write) / k.copy_bw, write / k.write_bw)
    partial = (mean(lambda b: b.stats.get("partial_store_sectors", 0.0))
               + mean(lambda b: b.stats.get("atom.global.sectors", 0.0))) * n_b
    t_l2 = max(l2_sectors * 32 / k.l2_bw, partial / k.atomic_sectors_per_s)
    sectors_blk = mean(lambda b: b.stats.get("global_sectors", 0.0))
    # L1 looks up one 128-byte line per cycle: a request costs the lines it touches (the
    # benchmark's stride-32 loads touch one sector in each of 32 lines)
    lines_blk = mean(lambda b: b.stats.get("global_lines", 0.0))
    t_l1 = lines_blk * per_sm / k.l1_sectors_per_s_sm

    # -- shared memory, pipes --------------------------------------------------------------
    # a wide SASS access (LDS.128, from scalar loads of a row the compiler merged) does the
    # work of several of the simulator's one-per-operation accesses
    ld_sh, st_sh = kinds("ld.shared"), kinds("st.shared")
    merged = ld_sh * widths["ld"] + st_sh * widths["st"]
    merge = merged / (ld_sh + st_sh) if ld_sh + st_sh else 1.0
    wave_blk = mean(lambda b: b.stats.get("shared_wavefronts", 0.0)) * merge
    t_shared = wave_blk * per_sm / k.shared_wavefronts_per_s_sm
    fp32 = mix("fp32")
    if not exact:
        muls = mix("fp32_mul")
        fp32 -= min(muls, fp32 - muls)
    ratio64 = k.fp32_per_s_sm / k.fp64_per_s_sm
    t_fp32 = fp32 * per_sm / k.fp32_per_s_sm
    t_fp64 = (mix("fp64") + (mix("fp64_div") * k.div_s_sm + mix("fp64_sfu") * k.exp_s_sm)
              * ratio64 * k.fp64_per_s_sm) * per_sm / k.fp64_per_s_sm
    t_sfu = (mix("fp32_sfu") * k.exp_s_sm + mix("fp32_div") * k.div_s_sm) * per_sm
    classified = sum(mix(c) for c in ("fp32", "fp32_div", "fp32_sfu", "fp64", "fp64_div",
                                      "fp64_sfu", "int", "other"))
    int_like = (mix("int") + mix("other") + max(kinds("alu") - classified, 0.0)
                + kinds("branch") + kinds("bar.warp") + kinds("cp.async")
                + kinds("mma"))   # issue slots only: the tensor pipe's time is not modelled
    memory_instr = merged + sum(kinds(x) for x in ("ld.global", "st.global", "atom.global",
                                                   "atom.shared"))
    t_int = int_like * per_sm / k.int_per_s_sm
    t_issue = (t_fp32 + t_int + (kinds("shfl") / k.shfl_per_s_sm
                                 + memory_instr / k.fp32_per_s_sm) * per_sm)

    # -- atomics ------------------------------------------------------------------------------
    # per 128-byte line: the lanes on one address queue one by one, a sector's addresses at
    # once, its sectors in turn (an instruction whose lanes share one address is aggregated by
    # the compiler into one lane's); lines hit by several sampled blocks are hit by every
    # block, and the L2 serves only so many of those hot lines at once
    hot: dict = {}
    seen: dict = {}
    requests = 0.0
    for b in s.blocks:
        for array, sectors, _, uniform, w, top in b.atomics:
            requests += len(sectors) * w
            for sec, tp in zip(sectors, top, strict=True):
                key = (array, sec // 4)
                hot[key] = hot.get(key, 0.0) + (1 if uniform else tp) * w * k.atomic_address_s
                seen.setdefault(key, set()).add(b.linear)
    scale = n_b / s.sampled
    shared_lines = [v * scale for key, v in hot.items() if len(seen[key]) > 1]
    t_hot = max(max(hot.values(), default=0.0),
                sum(shared_lines) / _units(k.atomic_line_units, len(shared_lines))
                if shared_lines else 0.0)
    t_atom_thru = requests * scale / k.atomic_sectors_per_s
    t_shared_atom = (mean(lambda b: sum(w for *_, w in b.shared_atomics)) * per_sm
                     * k.shared_atomic_s_sm)
    t_atomics = max(t_hot, t_atom_thru, t_shared_atom)

    # -- latency: one round of resident blocks lasts one warp's dependent chain -------------
    # a load waits as long as the level that serves it: the share of the sectors L1 asks of
    # the L2 that the L2 must fetch from DRAM (the rest hit data another warp brought in)
    from_dram = (0.0 if in_l2 else min(1.0, cold_read / (load_sectors * 32)) if load_sectors
                 else 1.0)
    latency_mem = k.l2_latency_s + from_dram * (k.dram_latency_s - k.l2_latency_s)
    t_block = _block_seconds(k.block_s, threads)
    chain = (batches_w * latency_mem
             + mean(lambda b: b.critical_alu) * k.dependent_op_s
             + mean(lambda b: b.barriers) * k.barrier_s)
    t_latency = rounds * chain
    # a warp waiting at a barrier issues nothing, and a round's blocks start together and run
    # the same code: between barriers they wait for their loads, then all share the pipes, so
    # a barrier-separated kernel's on-chip work adds to its chain instead of hiding under it
    onchip = {"shared memory": t_shared, "integer/ALU issue": t_issue, "FP64": t_fp64,
              "SFU": t_sfu}
    phased = bool(mean(lambda b: b.barriers))
    t_chain = t_latency
    if phased:
        t_latency += max(onchip.values())
    t_blocks = per_sm * t_block

    # -- the launch as run_on_gpu times it: its resets of every array hide the host's part,
    # as much as the measured launches after resets of 4 B to 256 MiB say --------------------
    xs, ys = zip(*k.launch_curve, strict=True)
    overhead = float(np.interp(array_bytes, xs, ys))

    # latency-bound and bandwidth-bound memory time overlap as the measured read curve says
    p = k.overlap_p
    t_memory = (t_latency ** p + t_dram ** p) ** (1 / p)
    if t_dram >= t_latency:
        t_dram = t_memory
    else:
        t_latency = t_memory
    breakdown = {"DRAM bandwidth": t_dram, "L2": max(t_l2, t_l1), "shared memory": t_shared,
                 "FP32 pipe": t_fp32, "FP64": t_fp64, "SFU": t_sfu,
                 "integer/ALU issue": t_issue, "atomics": t_atomics,
                 "too little parallelism to hide latency": t_latency,
                 "launch overhead": t_blocks}
    top = max(breakdown, key=breakdown.get)
    kernel_time = breakdown[top]
    limiter = top
    if (top == "too little parallelism to hide latency" and phased
            and max(onchip.values()) > t_chain):
        limiter = max(onchip, key=onchip.get)     # the phases' larger part: on-chip work
    if limiter == "integer/ALU issue" and t_fp32 >= 0.5 * t_issue:
        limiter = "FP32 pipe"
    if overhead >= kernel_time:
        limiter = "launch overhead"
    seconds = overhead + kernel_time

    if not s.representative:
        notes.append(f"the sampled blocks differ by {s.spread + 1:.1f}x in instructions: a "
                     f"sample of {s.sampled} cannot speak for all {n_b:,} blocks")
    if in_l2:
        notes.append(f"the arrays ({binary_bytes(array_bytes)}) fit in half the "
                     f"{binary_bytes(l2_cap)} L2: after run_on_gpu's resets they are read "
                     f"from L2, not DRAM")
    stats_instr = mean(lambda b: b.stats["instructions"])
    lanes = mean(lambda b: b.stats.get("active_lanes", 0.0))
    greq = mean(lambda b: b.stats.get("global_requests", 0.0))
    sreq = kinds("ld.shared") + kinds("st.shared") + kinds("atom.shared")
    evidence = {
        "registers": (registers, f"{registers} per thread ({'-fmad=false' if exact else 'default'}"
                                 f" build)"),
        "occupancy": (occ.occupancy, f"{occ.blocks_per_sm} blocks / SM ({occ.limiter}), "
                                     f"{percent(occ.occupancy)} of the warps; {resident} "
                                     f"resident in this launch"),
        "waves": (n_b / (occ.blocks_per_sm * sms),
                  f"{n_b / (occ.blocks_per_sm * sms):,.2f} ({rounds} rounds of {resident} "
                  f"blocks on the busiest SM, {per_sm:,} blocks there)"),
        "bytes in flight per SM": (inflight, f"{binary_bytes(inflight)} ({resident} blocks x "
                                             f"{warps} warps x {mlp:.1f} loads x "
                                             f"{binary_bytes(bytes_per_load)}) -> "
                                             f"{bandwidth(bw_read)} of DRAM reads"),
        "DRAM bytes": ((read, write), f"{si(cold_read, 'B')} read, {si(cold_write, 'B')} "
                                      f"written" + (" (from L2 here)" if in_l2 else "")),
        "L2 sectors": (l2_sectors, f"{l2_sectors:,.0f} ({si(l2_sectors * 32, 'B')})"),
        "sectors per request": (sectors_blk / greq if greq else float("nan"),
                                f"{sectors_blk / greq:.2f}" if greq else "–"),
        "wavefronts per shared request": (wave_blk / sreq if sreq else float("nan"),
                                          f"{wave_blk / sreq:.2f}" if sreq else "–"),
        "instruction mix per SM": ({"fp32": fp32 * per_sm, "fp64": mix("fp64") * per_sm,
                                    "sfu": (mix("fp32_sfu") + mix("fp32_div")) * per_sm,
                                    "int": int_like * per_sm, "memory": memory_instr * per_sm},
                                   f"FP32 {_count(fp32 * per_sm)}, FP64 {_count(mix('fp64') * per_sm)},"
                                   f" SFU/div {si((mix('fp32_sfu') + mix('fp32_div')) * per_sm, '')}"
                                   f", integer/other {_count(int_like * per_sm)}, memory "
                                   f"{_count(memory_instr * per_sm)} warp instructions"),
        "SIMT efficiency": (lanes / (32 * stats_instr) if stats_instr else 0.0,
                            percent(lanes / (32 * stats_instr)) if stats_instr else "–"),
        "dependent chain per warp": (chain, f"{batches_w:,.1f} load batches x "
                                            f"{duration(latency_mem)} + "
                                            f"{mean(lambda b: b.critical_alu):,.0f} dependent "
                                            f"instructions + "
                                            f"{mean(lambda b: b.barriers):,.0f} barriers = "
                                            f"{duration(chain)}"),
        "phases between barriers": ((t_chain, max(onchip.values())) if phased else None,
                                    f"{rounds} rounds x the chain = {duration(t_chain)}, then "
                                    f"{duration(max(onchip.values()))} of on-chip work "
                                    f"({max(onchip, key=onchip.get)}) that the barriers keep "
                                    f"from overlapping it" if phased else "no barriers"),
        "sample": (s.sampled, f"{s.sampled} of {n_b:,} blocks simulated in "
                              f"{duration(s.seconds)}"),
    }
    pred = TimePrediction(s.kernel, g.name, s.grid, s.block, seconds, limiter, breakdown,
                          overhead, evidence, tuple(notes), k.measured, exact)
    internals = {"sample": s, "occupancy": occ, "registers": registers, "cold_read": cold_read,
                 "cold_write": cold_write, "l2_sectors": l2_sectors, "in_l2": in_l2,
                 "l2_load_sectors": load_sectors,
                 "per_sm": per_sm, "resident": resident, "constants": k,
                 "load_latency": latency_mem}
    return pred, internals
