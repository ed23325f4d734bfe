"""A template private bank: one graded question per chapter, to copy and change.

Copy this folder somewhere students cannot read, change the numbers, the wording and the
formulas (this file is public, in the course's repository: its questions are only an example
of the form), and pass it to ``gpu-lessons release --bank DIR`` and ``gpu-lessons grade
--bank DIR``.  Each question follows the rules a release checks before it grades a question
(``gpu_lessons.assignments.practice_reason``):

* it has variants (``Vary``), so each student gets their own numbers;
* the lesson's own answer (the first choice of every ``Vary``) is right for no more than 1 in
  20 of the variants a student can be drawn — choose values whose answers differ by more
  than the tolerance (1 % by default);
* its reference is computed here, in your bank, not by a function the public package
  ships under the same name.

``tests/test_assignments.py`` loads this file and checks those rules for every question.
"""

from gpu_lessons import hardware
from gpu_lessons.questions.types import Mistake, Number, Question, Vary

GPUS = ("h100", "a100", "l40s", "b200", "v100")


def _name(key):
    return hardware.gpu(key).name


def _bw(key):
    return hardware.gpu(key).bandwidth


def dependent_loads_us(loads, latency_ns):
    return loads * latency_ns / 1e3


def warps_in_grid(blocks, threads):
    return blocks * -(-threads // 32)


def read_time_us(gpu, megabytes):
    return megabytes * 1e6 / _bw(gpu) * 1e6


def strided_sectors(stride, element_bytes):
    """32-byte sectors one warp's load touches: 32 lanes, ``stride`` elements apart."""
    addresses = {lane * stride * element_bytes // 32 for lane in range(32)}
    last = {(lane * stride * element_bytes + element_bytes - 1) // 32 for lane in range(32)}
    return len(addresses | last)


def gemm_intensity(n, element_bytes):
    """FLOP per DRAM byte of an n x n x n GEMM reading A and B and writing C once."""
    return 2 * n**3 / (3 * n * n * element_bytes)


def bytes_in_flight_kib(gpu, latency_ns):
    """Little's law: bandwidth x latency, in KiB."""
    return _bw(gpu) * latency_ns * 1e-9 / 1024


def tiled_traffic_mib(n, tile):
    """DRAM traffic of an n x n FP32 GEMM with tile x tile tiles (A and B read n / tile
    times, C written once), in MiB."""
    return (2 * n**3 / tile + n * n) * 4 / 2**20


def launches_ms(kernels, kernel_us, overhead_us):
    return kernels * (kernel_us + overhead_us) / 1e3


def mfu_percent(gpu, params_b, tokens_per_s):
    """Training MFU: 6 x parameters x tokens per second over the dense FP16 peak."""
    return 100 * 6 * params_b * 1e9 * tokens_per_s / (hardware.gpu(gpu).peak_tflops["fp16"]
                                                       * 1e12)


def roofline_us(gpu, gflop, megabytes):
    g = hardware.gpu(gpu)
    return max(gflop * 1e9 / (g.peak_tflops["fp32"] * 1e12), megabytes * 1e6 / g.bandwidth) * 1e6


QUESTIONS = (
    Question(
        id="01.bank_dependent_loads", name="dependent_loads_us", points=1,
        title="A chain of dependent loads",
        prompt="A CPU thread walks a linked list of {loads} nodes; each load waits "
               "{latency_ns} ns for the one before. How many **µs** does the walk take? "
               "Store it in `dependent_loads_us`.",
        vary=(Vary("loads", (1_000_000, 1_300_000, 1_700_000, 2_300_000, 2_900_000), "loads"),
              Vary("latency_ns", (80, 95, 110, 135, 160), "latency per load, ns")),
        answer=Number(reference=dependent_loads_us, units="µs", mistakes=(
            Mistake("ns", "the answer is in µs: divide ns by 1,000.",
                    value=lambda ref, **p: ref * 1e3),)),
    ),
    Question(
        id="02.bank_warps", name="warps_in_grid", points=1, title="Warps in a grid",
        prompt="A kernel is launched with {blocks} blocks of {threads} threads. How many warps "
               "does the grid hold? Store it in `warps_in_grid`.",
        vary=(Vary("blocks", (2, 3, 5, 7, 11), "blocks"),
              Vary("threads", (96, 160, 224, 288, 352, 416), "threads per block")),
        answer=Number(reference=warps_in_grid, units="warps", integer=True, rtol=0, mistakes=(
            Mistake("floor", "a partial warp is still a whole warp: round up.",
                    value=lambda ref, blocks, threads: None if threads % 32 == 0
                    else blocks * (threads // 32)),)),
    ),
    Question(
        id="03.bank_read_time", name="read_time_us", points=1, title="Reading an array",
        prompt="A kernel reads {megabytes} MB from DRAM once on an **{gpu}**. At the datasheet "
               "bandwidth, how many **µs** does it take at best? Store it in `read_time_us`.",
        vary=(Vary("gpu", GPUS, "the GPU", show=_name),
              Vary("megabytes", (300, 700, 1100, 1700, 2300), "megabytes read")),
        answer=Number(reference=read_time_us, units="µs"),
    ),
    Question(
        id="04.bank_strided_sectors", name="strided_sectors", points=1,
        title="Sectors of a strided load",
        prompt="Each of a warp's 32 lanes loads one {element_bytes}-byte element, lane i "
               "reading element i × {stride} of an aligned array. How many 32-byte sectors does "
               "the load touch? Store it in `strided_sectors`.",
        vary=(Vary("stride", (1, 3, 5, 6, 7, 9), "the stride, in elements"),
              Vary("element_bytes", (4, 8, 2), "bytes per element")),
        answer=Number(reference=strided_sectors, units="sectors", integer=True, rtol=0),
    ),
    Question(
        id="05.bank_gemm_intensity", name="gemm_intensity", points=1,
        title="Intensity of a square GEMM",
        prompt="An {n} × {n} × {n} matrix product reads A and B and writes C once, "
               "{element_bytes} bytes per element. What is its arithmetic intensity in "
               "**FLOP/byte** (2 FLOP per multiply-add)? Store it in `gemm_intensity`.",
        vary=(Vary("n", (512, 640, 896, 1408, 1664, 2176), "the matrix size"),
              Vary("element_bytes", (2, 4, 1), "bytes per element")),
        answer=Number(reference=gemm_intensity, units="FLOP/byte"),
    ),
    Question(
        id="06.bank_bytes_in_flight", name="bytes_in_flight_kib", points=1,
        title="Bytes in flight",
        prompt="To keep an **{gpu}**'s DRAM busy with a load latency of {latency_ns} ns, how "
               "many **KiB** must be in flight at once (Little's law)? Store it in "
               "`bytes_in_flight_kib`.",
        vary=(Vary("gpu", GPUS, "the GPU", show=_name),
              Vary("latency_ns", (450, 520, 610, 730, 860), "load latency, ns")),
        answer=Number(reference=bytes_in_flight_kib, units="KiB"),
    ),
    Question(
        id="07.bank_tiled_traffic", name="tiled_traffic_mib", points=1,
        title="Traffic of a tiled GEMM",
        prompt="An {n} × {n} FP32 matrix product uses {tile} × {tile} tiles: A and B are read "
               "n / tile times, C written once. How many **MiB** cross DRAM? Store it in "
               "`tiled_traffic_mib`.",
        vary=(Vary("n", (1024, 1536, 2560, 3584), "the matrix size"),
              Vary("tile", (16, 32, 64, 128), "the tile size")),
        answer=Number(reference=tiled_traffic_mib, units="MiB"),
    ),
    Question(
        id="08.bank_launches", name="launches_ms", points=1, title="Many small kernels",
        prompt="A step launches {kernels} kernels of {kernel_us} µs each, one after another, "
               "with {overhead_us} µs of launch overhead each. How many **ms** does the step "
               "take? Store it in `launches_ms`.",
        vary=(Vary("kernels", (1000, 1300, 1900, 2600), "kernels"),
              Vary("kernel_us", (3, 7, 11, 17), "µs per kernel"),
              Vary("overhead_us", (4, 5, 6), "launch overhead, µs")),
        answer=Number(reference=launches_ms, units="ms"),
    ),
    Question(
        id="09.bank_mfu", name="mfu_percent", points=1, title="MFU of a training run",
        prompt="A {params_b} B-parameter model trains at {tokens_per_s} tokens/s on one "
               "**{gpu}**. Counting 6 FLOP per parameter per token against the dense FP16 "
               "peak, what is the MFU in **%**? Store it in `mfu_percent`.",
        vary=(Vary("gpu", ("h100", "a100", "l40s", "b200"), "the GPU", show=_name),
              Vary("params_b", (1.3, 2.7, 6.7), "billions of parameters"),
              Vary("tokens_per_s", (9000, 13000, 21000), "tokens per second")),
        answer=Number(reference=mfu_percent, units="%"),
    ),
    Question(
        id="10.bank_roofline_time", name="roofline_us", points=1,
        title="A mystery kernel on the roofline",
        prompt="A kernel does {gflop} GFLOP of FP32 work and moves {megabytes} MB on an "
               "**{gpu}**. Ignoring overlap limits, what is its roofline time in **µs**? Store "
               "it in `roofline_us`.",
        vary=(Vary("gpu", GPUS, "the GPU", show=_name),
              Vary("gflop", (40, 90, 170), "GFLOP"),
              Vary("megabytes", (500, 1300, 2900), "megabytes")),
        answer=Number(reference=roofline_us, units="µs"),
    ),
)
