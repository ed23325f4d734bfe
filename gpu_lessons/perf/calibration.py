"""The performance model's constants for one GPU: measured, or the datasheet's where not.

Each constant comes from a microbenchmark of ``tools/device/perf_calibration.py`` (its raw
record for the H200 is ``tests/data/h200_perf_microbench.json``).  :func:`derive` turns a
record into constants; the results are stored with their record in
``gpu_lessons/data/perf_calibration.toml`` and read with :func:`constants`, and
``tests/test_perf_model.py`` recomputes them from the record.  To calibrate another GPU: run
the script there, then ``python -m gpu_lessons.perf.calibration RECORD.json NAME`` prints the
TOML table to add.

A GPU with no table gets :func:`datasheet` constants from the catalog (bandwidth, peak rates
and clocks) and the prediction says so.

Every derivation is one line of arithmetic on one or two timings; ``net`` is a benchmark's
median time less the GPU-side launch time (``launch_256mib``: a launch whose arguments'
resets hide the host's share), so long benchmarks lose little to it.
"""

from __future__ import annotations

import json
import math
import sys
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

#: The compiler unrolls a translated grid-stride ``t.while_`` loop whose body has no store four
#: times and issues the four iterations' loads together (seen in the SASS of the read
#: benchmarks), so each warp of ``read_k{k}`` keeps 4 x k loads in flight.
READ_UNROLL = 4


@dataclass(frozen=True)
class Constants:
    """Calibration of one GPU (SI units: seconds, bytes, bytes/s, operations/s)."""

    gpu: str
    measured: bool
    source: str
    sms: int
    clock_hz: float
    launch_host_s: float          # a launch whose arguments' resets are small
    launch_device_s: float        # a launch after resets long enough to hide the host
    copy_bw: float                # DRAM read + write, streaming
    write_bw: float
    l2_bw: float
    dram_latency_s: float         # one dependent load, random, from DRAM
    l2_latency_s: float
    read_curve: tuple = field(default=())  # ((bytes in flight per SM, read bytes/s), ...)
    launch_curve: tuple = field(default=())  # ((bytes reset before it, launch seconds), ...)
    l1_sectors_per_s_sm: float = 0.0
    fp32_per_s_sm: float = 0.0    # warp instructions / s / SM
    fp64_per_s_sm: float = 0.0
    int_per_s_sm: float = 0.0
    exp_s_sm: float = 0.0         # seconds of one SM per warp exp (float32)
    div_s_sm: float = 0.0         # seconds of one SM per warp float32 division
    dependent_op_s: float = 0.0   # one dependent arithmetic instruction
    shared_wavefronts_per_s_sm: float = 0.0
    shfl_per_s_sm: float = 0.0
    atomic_address_s: float = 0.0  # one lane's update of a global address others update too
    atomic_sectors_per_s: float = 0.0  # chip-wide sector requests of spread-out atomics
    atomic_line_units: tuple = field(default=())  # ((hot lines, lines served at once), ...)
    shared_atomic_s_sm: float = 0.0
    barrier_s: float = 0.0        # one barrier of an 8-warp block, one block per SM
    block_s: tuple = field(default=())  # ((threads per block, seconds per block per SM), ...)
    overlap_p: float = 1.0        # see overlap_exponent
    l2_dirty_exit_bytes: float = 0.0  # L2 bytes of the last traffic a kernel leaves unwritten


def overlap_exponent(curve, sms: int, latency: float) -> float:
    """How the read curve turns from latency-bound to bandwidth-bound: the ``p`` for which
    ``time = (t_latency**p + t_bandwidth**p) ** (1/p)`` fits the curve best (least squared
    log error, p from 1 to 8 in steps of 0.05), with ``t_latency = bytes x L / (bytes in
    flight)`` at the unloaded DRAM latency ``L`` (the pointer chase) and ``t_bandwidth =
    bytes / (the highest bandwidth)``.  The model combines a kernel's latency-bound and
    bandwidth-bound memory times with the same ``p`` (1: they add; large: the larger wins)."""
    xs = [float(x) for x, _ in curve]
    ys = [float(y) for _, y in curve]
    top = max(ys)
    best, best_err = 1.0, float("inf")
    for i in range(141):
        p = 1 + 0.05 * i
        err = 0.0
        for x, y in zip(xs, ys, strict=True):
            t = ((latency / (sms * x)) ** p + (1 / top) ** p) ** (1 / p)
            err += math.log(t * y) ** 2
        if err < best_err:
            best, best_err = p, err
    return round(best, 2)


def _net(cases, name):
    return cases[name]["seconds"] - cases["launch_256mib"]["seconds"]


def derive(record: dict, gpu: str = "H200", sms: int = 132, atomics: dict | None = None) -> dict:
    """The constants (a dict of :class:`Constants` fields) from a microbenchmark record and,
    where given, the hot-line atomics record (``tools/device/perf_atomics.py``)."""
    c = record["cases"]
    clock = float(record["sm_clock_mhz"]) * 1e6
    out = {"gpu": gpu, "sms": sms, "clock_hz": clock,
           "launch_host_s": c["launch_small"]["seconds"],
           "launch_device_s": c["launch_256mib"]["seconds"],
           "launch_curve": tuple(sorted((case["counts"]["reset_bytes"], case["seconds"])
                                        for name, case in c.items()
                                        if name.startswith("launch_")))}
    cp = c["copy"]["counts"]
    out["copy_bw"] = (cp["bytes_read"] + cp["bytes_written"]) / _net(c, "copy")
    out["write_bw"] = c["write"]["counts"]["bytes_written"] / _net(c, "write")
    out["l2_bw"] = c["l2_read"]["counts"]["bytes_read"] / _net(c, "l2_read")
    out["dram_latency_s"] = _net(c, "chase_dram") / c["chase_dram"]["counts"]["dependent_loads"]
    out["l2_latency_s"] = _net(c, "chase_l2") / c["chase_l2"]["counts"]["dependent_loads"]
    curve = []
    for name, case in c.items():
        if name.startswith("read_k"):
            k = case["counts"]
            inflight = k["warps_per_sm"] * k["loads_in_flight"] * READ_UNROLL * 128
            curve.append((inflight, k["bytes_read"] / _net(c, name)))
    out["read_curve"] = tuple(sorted(curve))
    out["overlap_p"] = overlap_exponent(out["read_curve"], sms, out["dram_latency_s"])
    out["l1_sectors_per_s_sm"] = (c["l1_sectors"]["counts"]["warp_loads"] * 32
                                  / _net(c, "l1_sectors") / sms)
    out["fp32_per_s_sm"] = c["fp32"]["counts"]["warp_ops"] / _net(c, "fp32") / sms
    out["fp64_per_s_sm"] = c["fp64"]["counts"]["warp_ops"] / _net(c, "fp64") / sms
    out["int_per_s_sm"] = c["int"]["counts"]["warp_ops"] / _net(c, "int") / sms
    e = c["exp"]["counts"]
    out["exp_s_sm"] = ((_net(c, "exp") * sms - e["warp_fp32_ops"] / out["fp32_per_s_sm"])
                       / e["warp_exps"])
    out["div_s_sm"] = _net(c, "div") * sms / c["div"]["counts"]["warp_divs"]
    out["dependent_op_s"] = (_net(c, "fp32_latency")
                             / c["fp32_latency"]["counts"]["dependent_ops_per_warp"])
    out["shared_wavefronts_per_s_sm"] = (c["shared_conflict"]["counts"]["wavefronts"]
                                         / _net(c, "shared_conflict") / sms)
    s = c["shfl"]["counts"]["warp_shfls"]
    out["shfl_per_s_sm"] = s / (_net(c, "shfl") - s / out["fp32_per_s_sm"] / sms) / sms
    # one address, 16 lanes of every warp instruction on it: lanes queue one by one
    m2 = c["atomic_mod2"]["counts"]
    out["atomic_address_s"] = _net(c, "atomic_mod2") / (m2["warp_ops"] * m2["lanes_per_address"])
    d = c["atomic_distinct"]["counts"]
    out["atomic_sectors_per_s"] = d["warp_ops"] * 4 / _net(c, "atomic_distinct")
    sa = c["shared_atomic_distinct"]["counts"]
    out["shared_atomic_s_sm"] = _net(c, "shared_atomic_distinct") * sms / sa["warp_ops"]
    b = c["barrier_one_block"]["counts"]
    out["barrier_s"] = _net(c, "barrier_one_block") * sms / b["block_barriers"]
    blocks = []
    for threads in (32, 128, 256, 1024):
        few, many = c[f"blocks_{threads}_{sms * 256}"], c[f"blocks_{threads}_{sms * 1024}"]
        blocks.append((threads, (many["seconds"] - few["seconds"])
                       / ((many["counts"]["blocks"] - few["counts"]["blocks"]) / sms)))
    out["block_s"] = tuple(blocks)
    if atomics is not None:
        out.update(derive_atomics(atomics, c["launch_256mib"]["seconds"]))
    return out


def derive_atomics(record: dict, launch_device_s: float) -> dict:
    """``atomic_line_units`` from the hot-line record: warps adding to ``W`` words, one
    128-byte line per warp request, the grid's requests spread over ``W / 32`` lines.  How many
    times faster ``L`` lines take the same requests than one line is how many lines the L2
    serves at once (on the H200 two neighbouring lines share one unit: 2 lines take as long as
    1, and 8 as long as 4)."""
    c = record["cases"]

    def net(name):
        return c[name]["seconds"] - launch_device_s

    units = sorted((case["counts"]["lines"], net("global_words32") / net(name))
                   for name, case in c.items() if name.startswith("global_words"))
    return {"atomic_line_units": tuple(units)}


def derive_writeback(record: dict) -> dict:
    """``{"l2_dirty_exit_bytes": C}`` from tools/device/l2_writeback.py's record.

    When a kernel ends, the L2 still holds the last ``C`` bytes of its traffic; the written
    ones among them (a share ``W / T`` of a kernel that writes ``W`` bytes in ``T`` bytes of
    traffic) reach DRAM only after the kernel, so ncu counts ``W - min(W, C W / T)``
    (:func:`written_back`).  ``C``: the median over the copies (``T = 2 W``) that wrote well
    beyond it (less than 90 % of their bytes stayed dirty).  A kernel that only writes keeps
    less than ``C`` (the record's ``probe_fill`` launches): the share is a simplification."""
    est = []
    for r in record["runs"]:
        w, rd = r["bytes_written"], r["bytes_read"]
        kept = w - r["dram__bytes_write.sum"]
        if w and rd == w and kept < 0.9 * w:
            est.append(kept * (rd + w) / w)
    if not est:
        raise ValueError("the write-back record has no copy that wrote beyond the L2")
    est.sort()
    mid = len(est) // 2
    return {"l2_dirty_exit_bytes": est[mid] if len(est) % 2 else (est[mid - 1] + est[mid]) / 2}


def written_back(read: float, write: float, dirty_exit: float, loaded: float = 0.0) -> float:
    """DRAM bytes a kernel writes within itself: ``write`` distinct bytes written, ``read``
    distinct bytes read, ``loaded`` bytes its loads ask of L2 (re-reads sweep the L2 too),
    with ``dirty_exit`` (:attr:`Constants.l2_dirty_exit_bytes`) left in L2 at its end."""
    if write <= 0:
        return 0.0
    return write - min(write, dirty_exit * write / (max(read, loaded) + write))


def datasheet(g) -> dict:
    """Constants from a catalog entry alone (no measurement): the peaks at face value."""
    sms = int(g.sms)
    clock = float(g.boost_mhz or 1500) * 1e6
    bw = float(g.bandwidth)
    fp32 = g.peak_flops("fp32") / 2 / 32 / sms     # FMA = 2 FLOPs, 32 lanes
    try:
        fp64 = g.peak_flops("fp64") / 2 / 32 / sms
    except (KeyError, ValueError):
        fp64 = fp32 / 32
    return {"gpu": g.name, "sms": sms, "clock_hz": clock, "launch_host_s": 10e-6,
            "launch_device_s": 3e-6, "launch_curve": ((0, 10e-6), (1 << 25, 3e-6)),
            "copy_bw": bw, "write_bw": bw, "l2_bw": 3 * bw,
            "dram_latency_s": 600 / clock * 1.0, "l2_latency_s": 300 / clock,
            "read_curve": ((1024, bw * 1024 * sms / (bw * 600 / clock)), (1 << 20, bw)),
            "l1_sectors_per_s_sm": 4 * clock, "fp32_per_s_sm": fp32, "fp64_per_s_sm": fp64,
            "int_per_s_sm": fp32 / 2, "exp_s_sm": 8 / clock, "div_s_sm": 10 / clock,
            "dependent_op_s": 4 / clock, "shared_wavefronts_per_s_sm": clock,
            "shfl_per_s_sm": clock, "atomic_address_s": 2 / clock,
            "atomic_sectors_per_s": sms * clock / 4, "atomic_line_units": ((1, 1.0),),
            "shared_atomic_s_sm": 2 / clock,
            "barrier_s": 40 / clock, "block_s": ((32, 100e-9), (1024, 150e-9)),
            "overlap_p": 1.0}


@cache
def _table() -> dict:
    text = resources.files("gpu_lessons").joinpath("data/perf_calibration.toml").read_text(
        "utf-8")
    return tomllib.loads(text)


def constants(gpu: str = "H200") -> Constants:
    """The calibration of ``gpu`` (a catalog name); a GPU without one gets its datasheet
    figures (``measured`` False)."""
    from .. import hardware

    g = hardware.gpu(gpu)
    table = _table().get("gpus", {})
    for key, entry in table.items():
        if hardware._key(key) == hardware._key(g.name) or key == gpu:
            values = {k: (tuple(tuple(p) for p in v) if isinstance(v, list) else v)
                      for k, v in entry.items() if k not in ("record", "date", "how")}
            return Constants(measured=True, source=f"measured ({entry['record']}, "
                                                    f"{entry['date']})", **values)
    return Constants(measured=False, source=f"{g.name}'s datasheet figures from the catalog "
                                            f"(no calibration run recorded for it)",
                     **datasheet(g))


def toml_table(values: dict, key: str, record: str, date: str, how: str) -> str:
    """``values`` as the TOML table ``[gpus.KEY]``."""
    lines = [f"[gpus.{key}]", f'record = "{record}"', f'date = "{date}"', f'how = "{how}"']
    for k, v in values.items():
        if isinstance(v, tuple):
            v = "[" + ", ".join(f"[{a}, {b!r}]" for a, b in v) + "]"
        elif isinstance(v, str):
            v = f'"{v}"'
        else:
            v = repr(v)
        lines.append(f"{k} = {v}")
    return "\n".join(lines) + "\n"


def main(argv):
    path, key = argv[1], (argv[2] if len(argv) > 2 else "H200")
    with open(path) as f:
        record = json.load(f)
    atomics = None
    if len(argv) > 3:
        with open(argv[3]) as f:
            atomics = json.load(f)
    values = derive(record, gpu=key, atomics=atomics)
    print(toml_table(values, key, path, record["runs"][0]["when"],
                     "tools/device/perf_calibration.py (both parts)"))


if __name__ == "__main__":
    main(sys.argv)
