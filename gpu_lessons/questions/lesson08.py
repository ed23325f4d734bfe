"""Chapter 08 (system level) exercise questions.

References come from :mod:`gpu_lessons.system` (launch overhead:
``step = max(o + n·d, n·o + d) + r`` with the H200's measured launch and sync costs; ring
all-reduce ``2(p−1)/p · S / B``, Thakur, Rabenseifner & Gropp 2005; data-parallel overlap as
PyTorch DDP does it) and :mod:`gpu_lessons.allocator` (its caching allocator with one pool,
``pools="one"``, small enough to trace by hand, against vLLM's fixed-size pages; fragmentation =
1 − largest free block / total free).
"""

from __future__ import annotations

import math
from functools import lru_cache

from ..allocator import MiB, alloc, caching, compare, free
from ..system import (
    DDP_BUCKET_BYTES,
    LINKS,
    allreduce_time,
    batch_sweep,
    kernel_sequence,
    launch_figures,
    training_step,
)
from ._common import percent_as_fraction
from .types import Choice, Function, Mistake, Number, Question, Vary

# -- 08.min_kernel_time: how long kernels must be to keep the GPU busy -----------------------------

def _busy(n_kernels, kernel_us, **kw) -> float:
    """Percent of the step the GPU runs kernels: :func:`gpu_lessons.system.kernel_sequence`
    with the H200's measured launch and sync costs."""
    return 100 * kernel_sequence(n_kernels, kernel_us, **kw).utilisation


@lru_cache(maxsize=1024)
def _min_kernel_us(n_kernels, target, **kw) -> float:
    """The shortest kernel (µs) that keeps the GPU busy ``target`` % of the step, bisected on
    the model (the busy share grows with the kernel's length).  200 kernels, 90 %: kernels
    shorter than a 6.05 µs launch leave the GPU waiting, step = 200·6.05 + d + 4.92, and
    200·d / (1,214.92 + d) = 0.9 at d = 5.49 µs."""
    low, high = 1e-3, 1e4
    if _busy(n_kernels, high, **kw) < target:
        return float("nan")
    while high / low > 1 + 1e-10:
        mid = (low * high) ** 0.5
        low, high = (low, mid) if _busy(n_kernels, mid, **kw) >= target else (mid, high)
    return high


def _kernel_fields(n_kernels, target) -> dict:
    h200 = launch_figures("H200")
    return {"launch": f"{h200.launch_us:g}", "sync": f"{h200.sync_us:g}"}


def _distinct(ref, value, rtol: float = 0.02):
    """``value``, unless it is within ``rtol`` of the reference (then the mistake cannot be
    told from the right answer, and does not apply)."""
    return None if value != value or abs(value - ref) <= rtol * abs(ref) else value


# -- 08.batch_knee: the batch at which the GPU stops waiting for the CPU --------------------------

def _batch_knee(fixed_us, per_item_us, **kw) -> float:
    """The smallest whole batch whose kernel (``fixed + per_item·batch`` µs) lasts at least one
    launch (6.05 µs on an H200): ``ceil((launch − fixed) / per_item)``, from the model's knee
    (:func:`gpu_lessons.system.batch_sweep`), rounded up as a count must be."""
    knee = batch_sweep([1], fixed_us=fixed_us, per_item_us=per_item_us, **kw).knee_batch
    whole = round(knee)
    return float(whole if abs(knee - whole) < 1e-9 else math.ceil(knee))


def _batch_fields(fixed_us, per_item_us) -> dict:
    return {"launch": f"{launch_figures('H200').launch_us:g}"}


# -- 08.allreduce_time: the ring all-reduce ------------------------------------------------------

def _allreduce_reference(nbytes, gpus, bandwidth):
    """``2(p−1)/p · S / B`` seconds (:func:`gpu_lessons.system.allreduce_time`, no latency)."""
    return allreduce_time(nbytes, gpus, bandwidth)


def _allreduce_inputs(rng) -> dict:
    """Buffers from 1 kB to 10 GB, 1 to 1,024 GPUs, a catalog link or any 1 GB/s-1 TB/s."""
    links = [bw for bw, _ in LINKS.values()]
    bandwidth = (float(rng.choice(links)) if rng.random() < 0.5
                 else round(float(10 ** rng.uniform(9, 12)), 0))
    gpus = int(rng.choice([2, 4, 8, 16, 64, 256])) if rng.random() < 0.5 \
        else int(rng.integers(1, 1025))
    return {"nbytes": int(10 ** rng.uniform(3, 10)), "gpus": gpus, "bandwidth": bandwidth}


def _allreduce_edges() -> list[dict]:
    nvlink = LINKS["nvlink4"][0]
    return [{"nbytes": 10**9, "gpus": 8, "bandwidth": nvlink},     # 1 GB over NVLink 4
            {"nbytes": 10**9, "gpus": 1, "bandwidth": nvlink},     # one GPU: nothing to send
            {"nbytes": DDP_BUCKET_BYTES, "gpus": 2, "bandwidth": LINKS["ib_ndr"][0]},
            {"nbytes": 4 * 10**9, "gpus": 1024, "bandwidth": LINKS["ib_hdr"][0]}]


# -- 08.max_bucket: the most gradient per layer that the backward pass hides -----------------------

_LAYERS = 12


def _exposed_ms(grad_mb, gpus, link_gbs, backward_ms, **kw) -> float:
    """Communication left after the backward pass (:func:`gpu_lessons.system.training_step`:
    each layer's gradients all-reduced as soon as its backward finishes, one at a time)."""
    return training_step(1.0, backward_ms, grad_mb * 1e6, gpus=gpus, n_layers=_LAYERS,
                         link_bandwidth=link_gbs * 1e9, **kw).exposed_comm_ms


def _one_allreduce_ms(grad_mb, gpus, link_gbs) -> float:
    return 1e3 * allreduce_time(grad_mb * 1e6, gpus, link_gbs * 1e9)


@lru_cache(maxsize=1024)
def _max_bucket(gpus, link_gbs, backward_ms) -> float:
    """The largest gradient size per layer (MB) for which only the last layer's all-reduce is
    exposed: every earlier one finishes before the next layer's gradients are ready.  Bisected
    on the timeline model; it is where one all-reduce lasts one layer's backward,
    S = t·B·p / (2(p − 1)) — 8 GPUs, 50 GB/s, 2 ms: 57.1 MB."""
    low, high = 1e-3, 1e6
    while high / low > 1 + 1e-10:
        mid = (low * high) ** 0.5
        exposed = _exposed_ms(mid, gpus, link_gbs, backward_ms)
        if exposed <= _one_allreduce_ms(mid, gpus, link_gbs) * (1 + 1e-12) + 1e-12:
            low = mid
        else:
            high = mid
    return low


# -- 08.fragmentation and 08.allocator_choice: small traces ---------------------------------------

def _trace(a, b, c, d, e=None):
    """An 8 MiB segment, cached free; then a, b, c, d MiB one after another; free a and c; then
    (for 08.allocator_choice) e MiB."""
    events = [alloc("w", 8 * MiB), free("w"), alloc("a", int(a * MiB)), alloc("b", int(b * MiB)),
              alloc("c", int(c * MiB)), alloc("d", int(d * MiB)), free("a"), free("c")]
    return events + ([alloc("e", int(e * MiB))] if e else [])


#: 08.fragmentation's allocation sizes in MiB (a, b, c, d), all leaving a free tail.
_SIZES = ("3 1 1 2", "2 1 1.5 1", "1 0.5 2 3", "4 0.5 1 1.5", "3 0.5 1.5 1", "2 1 2 2",
          "0.5 1 3 1.5", "3.5 1 1 1")


def _before_e(sizes):
    """The best-fit caching allocator's state once a and c are freed: (fragmentation, largest
    free, total free, reserved)."""
    run = caching(_trace(*map(float, sizes.split())), policy="best_fit", pools="one")
    i = len(run.used) - 1
    return (float(run.fragmentation[i]), float(run.largest_free[i]),
            float(run.free_cached[i]), float(run.reserved[i]))


def _fragmentation(sizes) -> float:
    """1 − largest free block / total free, in percent.  3, 1, 1, 2 MiB: free pieces of 3, 1
    and 1 MiB (a's, c's and the tail; c and the tail are separated by d): 1 − 3/5 = 40 %."""
    return 100 * _before_e(sizes)[0]


def _fragmentation_fields(sizes) -> dict:
    a, b, c, d = sizes.split()
    return {"a": a, "b": b, "c": c, "d": d}


def _allocator_choice() -> str:
    """The allocator that serves e = 4 MiB from memory it already holds (reserved does not
    grow) after 3, 1, 1, 2 MiB with a and c freed."""
    runs = compare(_trace(3, 1, 1, 2, 4), page_bytes=MiB, pools="one").runs
    fits = [r.allocator for r in runs if r.reserved[-1] == r.reserved[-2] and not r.failed]
    if len(fits) != 1:
        raise AssertionError(f"08.allocator_choice needs one answer, the model gives {fits}")
    return fits[0]


QUESTIONS = (
    Question(
        id="08.min_kernel_time",
        name="min_kernel_time",
        points=2,
        title="How long must kernels be?",
        prompt="A step launches **{n_kernels} kernels** of equal length back to back on an "
               "H200 ({launch} µs of CPU time per launch, {sync} µs round trip for the one "
               "synchronisation at the end of the step; the GPU can start a kernel only once "
               "its launch has returned and the previous kernel has finished). What is the "
               "shortest kernel, in **µs**, for which the GPU is busy running kernels at least "
               "**{target} %** of the step? Store it in `min_kernel_time`.",
        hint="Write the step time for kernels shorter and longer than a launch (which one "
             "sets when the last kernel ends?), then solve busy time / step time = the target.",
        vary=(Vary("n_kernels", (200, 50, 100, 500, 1000), "kernels per step"),
              Vary("target", (90, 80, 95, 75, 60), "the share of the step the GPU must be "
                   "busy, %")),
        derive=_kernel_fields,
        answer=Number(
            reference=_min_kernel_us,
            units="µs",
            rtol=0.01,
            mistakes=(
                Mistake("sync_each", "that charges a sync round trip after every kernel; here "
                        "the kernels are launched back to back with one sync at the end.",
                        value=lambda ref, n_kernels, target: _distinct(
                            ref, _min_kernel_us(n_kernels, target, mode="sync"))),
                Mistake("launch", "that is the length of one launch: kernels that long just "
                        "stop the GPU waiting for the CPU; the target asks for more.",
                        value=lambda ref, **p: _distinct(ref, launch_figures("H200").launch_us)),
            ),
        ),
    ),
    Question(
        id="08.batch_knee",
        name="batch_knee",
        points=1,
        title="The batch that keeps up with launches",
        prompt="An inference kernel takes {fixed_us} µs plus {per_item_us} µs per item of the "
               "batch, and kernels are launched back to back on an H200 ({launch} µs per "
               "launch). From which batch size on does a kernel last at least as long as its "
               "launch, so that the GPU no longer waits for the CPU?\n\n"
               "Answer with a whole batch size (**items**) in `batch_knee`.",
        vary=(Vary("fixed_us", (2.0, 1.0, 3.0, 1.5, 0.5), "fixed kernel time, µs"),
              Vary("per_item_us", (0.05, 0.02, 0.1, 0.03, 0.04), "kernel time per item, µs")),
        derive=_batch_fields,
        answer=Number(
            reference=_batch_knee,
            units="items",
            rtol=0,
            integer=True,
            mistakes=(
                Mistake("no_fixed", "the kernel's fixed {fixed_us} µs counts too: only the "
                        "remainder of the launch time has to come from the per-item work.",
                        value=lambda ref, fixed_us, per_item_us: _batch_knee(0.0, per_item_us)),
                Mistake("with_sync", "back-to-back launches have no sync between them: compare "
                        "the kernel with the launch cost alone.",
                        value=lambda ref, fixed_us, per_item_us: _batch_knee(
                            fixed_us, per_item_us, launch_us=launch_figures("H200").launch_us
                            + launch_figures("H200").sync_us)),
                Mistake("v100", "that uses the V100's launch cost; the question is about the "
                        "H200.", value=lambda ref, fixed_us, per_item_us: _distinct(
                            ref, _batch_knee(fixed_us, per_item_us, figures="V100"))),
                Mistake("rounded_down", "at that batch the kernel is still a little shorter "
                        "than a launch: round up.", value=lambda ref, **p: ref - 1),
            ),
        ),
    ),
    Question(
        id="08.allreduce_time",
        name="allreduce_time",
        points=2,
        title="A ring all-reduce",
        prompt="Write `allreduce_time(nbytes, gpus, bandwidth)` returning the time in seconds "
               "of a ring all-reduce of `nbytes` bytes over `gpus` GPUs whose links move "
               "`bandwidth` bytes/s per GPU and direction (bandwidth term only, no per-step "
               "latency).\n\n"
               "Return **seconds**. With one GPU there is nothing to exchange.",
        hint="A ring all-reduce is a reduce-scatter followed by an all-gather.",
        answer=Function(
            reference=_allreduce_reference,
            inputs=_allreduce_inputs,
            edge_cases=_allreduce_edges,
            signature="allreduce_time(nbytes, gpus, bandwidth)",
            units="seconds",
            rtol=1e-9,
            mistakes=(
                Mistake("half", "that is one of the two phases; an all-reduce is a "
                        "reduce-scatter *and* an all-gather.", value=lambda e, **kw: e / 2),
                Mistake("no_fraction", "each phase moves (p − 1)/p of the buffer per GPU, not "
                        "all of it: the last 1/p is the GPU's own share.",
                        value=lambda e, nbytes, gpus, bandwidth: 2 * nbytes / bandwidth),
                Mistake("whole_buffer_per_step", "in a ring each of the 2(p − 1) steps sends "
                        "one chunk of nbytes / p, not the whole buffer.",
                        value=lambda e, nbytes, gpus, bandwidth:
                        2 * (gpus - 1) * nbytes / bandwidth),
                Mistake("one_copy", "that is the time to send the buffer once; a ring "
                        "all-reduce sends nearly twice that per GPU.",
                        value=lambda e, nbytes, gpus, bandwidth: nbytes / bandwidth),
                Mistake("ms", "return seconds, not ms.", value=lambda e, **kw: 1e3 * e),
                Mistake("us", "return seconds, not µs.", value=lambda e, **kw: 1e6 * e),
            ),
        ),
    ),
    Question(
        id="08.max_bucket",
        name="max_bucket",
        points=3,
        title="Gradients the backward pass can hide",
        prompt="Data-parallel training on **{gpus} GPUs**: 12 layers, each with a 1 ms forward "
               "and a **{backward_ms} ms backward**. Each layer's gradients are all-reduced "
               "(ring, **{link_gbs} GB/s** per GPU and direction, no latency term) as soon as "
               "its backward finishes, one all-reduce at a time; compute does not slow down "
               "while they run. What is the largest gradient size per layer, in **MB** (10⁶ "
               "bytes), for which only the last layer's all-reduce is left after the backward "
               "pass (every earlier one finishes before the next one can start)? Store it in "
               "`max_bucket`.\n\n"
               "`gpu_lessons.system.training_step` draws this timeline; work it out first, then "
               "compare.",
        hint="The all-reduces queue as soon as one lasts longer than a layer's backward.",
        vary=(Vary("gpus", (8, 4, 16, 64, 2), "GPUs in the ring"),
              Vary("link_gbs", (50, 100, 25, 200), "link bandwidth per GPU and direction, "
                   "GB/s"),
              Vary("backward_ms", (2.0, 1.5, 3.0, 0.8), "backward time per layer, ms")),
        answer=Number(
            reference=_max_bucket,
            units="MB",
            rtol=0.01,
            mistakes=(
                Mistake("no_ring_factor", "a ring all-reduce moves 2(p − 1)/p of the buffer "
                        "per GPU, not the buffer once.", value=lambda ref, gpus, **p: _distinct(
                            ref, ref * 2 * (gpus - 1) / gpus)),
                Mistake("one_phase", "an all-reduce is a reduce-scatter *and* an all-gather: "
                        "each moves (p − 1)/p of the buffer per GPU.",
                        value=lambda ref, **p: 2 * ref),
                Mistake("forward", "the all-reduces overlap the *backward* pass; the forward "
                        "pass is over before the first gradient exists.",
                        value=lambda ref, backward_ms, **p: _distinct(ref, ref / backward_ms)),
                Mistake("bits", "that is in megabits; the question asks for megabytes.",
                        value=lambda ref, **p: 8 * ref),
            ),
        ),
    ),
    Question(
        id="08.fragmentation",
        name="fragmentation",
        points=2,
        title="Fragmentation of a caching allocator",
        prompt="A caching allocator (best fit; blocks are split; a freed block merges only with "
               "free neighbours in the same segment) holds one 8 MiB segment, all free. The "
               "program allocates a = {a} MiB, b = {b} MiB, c = {c} MiB and d = {d} MiB, placed "
               "one after another from the start of the segment, then frees a and c. What is "
               "the external fragmentation of the free memory now, 1 − largest free block / "
               "total free, in **percent**? Store it in `fragmentation`.\n\n"
               "(PyTorch's caching allocator also keeps requests of 1 MiB or less in a separate "
               "pool of small blocks, and reserves 20 MiB for a request of 1 to 10 MiB; this "
               "question's allocator has one pool: `pools=\"one\"` in `gpu_lessons.allocator`.)",
        hint="Draw the segment: which free pieces are neighbours, and which are not?",
        vary=(Vary("sizes", _SIZES, "a, b, c and d in MiB"),),
        derive=_fragmentation_fields,
        answer=Number(
            reference=_fragmentation,
            units="%",
            rtol=0.01,
            mistakes=(
                Mistake("inverted", "that is largest free block / total free, the share of the "
                        "free memory one request could use; fragmentation measures the rest.",
                        value=lambda ref, **p: 100 - ref),
                Mistake("of_reserved", "the measure divides by the free memory, not by the "
                        "whole segment.", value=lambda ref, sizes: 100 * (
                            1 - _before_e(sizes)[1] / _before_e(sizes)[3])),
                percent_as_fraction(),
                Mistake("merged", "freed blocks merge only with free neighbours; a and c are "
                        "separated by b, and c and the tail by d.", value=0.0),
            ),
        ),
    ),
    Question(
        id="08.allocator_choice",
        name="allocator_choice",
        points=1,
        title="Which allocator serves the next request?",
        prompt="Take the segment of `08.fragmentation` with a = 3, b = 1, c = 1 and d = 2 MiB, "
               "after a and c are freed. The program now asks for e = 4 MiB. Which allocator "
               "serves it from memory it already holds, without reserving more from the device: "
               "the caching allocator with `\"first_fit\"`, with `\"best_fit\"`, or a "
               "`\"paged\"` allocator with 1 MiB pages (as vLLM's PagedAttention)? Store the "
               "answer in `allocator_choice`.\n\n"
               "You can replay the trace with `gpu_lessons.allocator` (`alloc`, `free`, "
               "`compare(trace, page_bytes=..., pools=\"one\")`) to see it.",
        answer=Choice(
            reference=_allocator_choice,
            options=("first_fit", "best_fit", "paged"),
            mistakes=(
                Mistake("best_fit", "5 MiB are free in total, but best fit needs one free "
                        "block of at least 4 MiB, and the largest is smaller.",
                        value="best_fit"),
                Mistake("first_fit", "first fit takes the first free block that is large "
                        "enough: is any single free block large enough?", value="first_fit"),
            ),
        ),
    ),
)
