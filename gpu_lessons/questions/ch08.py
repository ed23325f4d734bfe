"""Chapter 08 (system level) exercise questions.

References come from :mod:`gpu_lessons.system` (launch overhead:
``step = max(o + n·d, n·o + d) + r`` with the H200's measured launch and sync costs; ring
all-reduce ``2(p−1)/p · S / B``, Thakur, Rabenseifner & Gropp 2005; data-parallel overlap as
PyTorch DDP does it) and :mod:`gpu_lessons.allocator` (a caching allocator with one pool, small
enough to trace by hand, against vLLM's fixed-size pages; fragmentation = 1 − largest free
block / total free), imported inside each function.
"""

from __future__ import annotations

from .types import Choice, Function, Mistake, Number, Question

# -- 08.launch_utilisation: kernels shorter than a launch ----------------------------------------

_N_KERNELS, _KERNEL_US = 200, 3.0
#: The H200 launch and sync costs the prompts state, µs.
_PROMPT_H200 = {"launch_us": 4.7, "sync_us": 5.1}


def _as_stated(kw: dict) -> dict:
    """The prompts' launch costs unless a mistake asks for another system's figures."""
    return kw if "figures" in kw else {**_PROMPT_H200, **kw}


def _launch_utilisation(**kw) -> float:
    """GPU busy fraction (percent) of 200 kernels of 3 µs launched back to back on an H200,
    one sync at the end: 600 µs of work in max(4.7 + 600, 940 + 3) + 5.1 = 948.1 µs."""
    from ..system import kernel_sequence

    return 100 * kernel_sequence(_N_KERNELS, _KERNEL_US, **_as_stated(kw)).utilisation


# -- 08.batch_knee: the batch at which the GPU stops waiting for the CPU --------------------------

_FIXED_US, _PER_ITEM_US = 2.0, 0.05


def _batch_knee(**kw) -> float:
    """Batch where a kernel of ``2 + 0.05·batch`` µs lasts one launch (4.7 µs on an H200)."""
    from ..system import batch_sweep

    kw.setdefault("fixed_us", _FIXED_US)
    return batch_sweep([1], per_item_us=_PER_ITEM_US, **_as_stated(kw)).knee_batch


def _launch_plus_sync(_ref: float) -> float:
    return _batch_knee(launch_us=_PROMPT_H200["launch_us"] + _PROMPT_H200["sync_us"])


# -- 08.allreduce_time: the ring all-reduce ------------------------------------------------------

def _allreduce_reference(nbytes, gpus, bandwidth):
    """``2(p−1)/p · S / B`` seconds (:func:`gpu_lessons.system.allreduce_time`, no latency)."""
    from ..system import allreduce_time

    return allreduce_time(nbytes, gpus, bandwidth)


def _allreduce_inputs(rng) -> dict:
    """Buffers from 1 kB to 10 GB, 1 to 1,024 GPUs, a catalog link or any 1 GB/s-1 TB/s."""
    from ..system import LINKS

    links = [bw for bw, _ in LINKS.values()]
    bandwidth = (float(rng.choice(links)) if rng.random() < 0.5
                 else round(float(10 ** rng.uniform(9, 12)), 0))
    gpus = int(rng.choice([2, 4, 8, 16, 64, 256])) if rng.random() < 0.5 \
        else int(rng.integers(1, 1025))
    return {"nbytes": int(10 ** rng.uniform(3, 10)), "gpus": gpus, "bandwidth": bandwidth}


def _allreduce_edges() -> list[dict]:
    from ..system import DDP_BUCKET_BYTES, LINKS

    nvlink = LINKS["nvlink4"][0]
    return [{"nbytes": 10**9, "gpus": 8, "bandwidth": nvlink},     # 1 GB over NVLink 4
            {"nbytes": 10**9, "gpus": 1, "bandwidth": nvlink},     # one GPU: nothing to send
            {"nbytes": DDP_BUCKET_BYTES, "gpus": 2, "bandwidth": LINKS["ib_ndr"][0]},
            {"nbytes": 4 * 10**9, "gpus": 1024, "bandwidth": LINKS["ib_hdr"][0]}]


# -- 08.exposed_comm: communication the backward pass cannot hide ---------------------------------

#: 08.exposed_comm's training step: per layer forward and backward ms, gradient bytes.
_STEP = {"n_layers": 12, "forward_ms": 1.0, "backward_ms": 2.0, "grad_bytes": 100e6, "gpus": 8,
         "link": 50e9}


def _step(**kw):
    from ..system import training_step

    s = _STEP
    kw.setdefault("link_bandwidth", s["link"])
    return training_step(s["forward_ms"], s["backward_ms"], s["grad_bytes"], gpus=s["gpus"],
                         n_layers=s["n_layers"], **kw)


def _exposed_comm() -> float:
    """12 all-reduces of 3.5 ms (2·7/8·100 MB at 50 GB/s) queue behind 2-ms backward layers:
    the link runs from 14 ms to 56 ms, compute ends at 36 ms: 20 ms exposed."""
    return _step().exposed_comm_ms


def _comm_minus_backward(_ref: float) -> float:
    s = _STEP
    return _step().comm_ms - s["n_layers"] * s["backward_ms"]


def _one_allreduce(_ref: float) -> float:
    from ..system import allreduce_time

    return 1e3 * allreduce_time(_STEP["grad_bytes"], _STEP["gpus"], _STEP["link"])


def _no_ring_factor(_ref: float) -> float:
    """Each all-reduce taken as S / B (the 2(p−1)/p factor left out)."""
    p = _STEP["gpus"]
    return _step(link_bandwidth=_STEP["link"] * 2 * (p - 1) / p).exposed_comm_ms


# -- 08.fragmentation and 08.allocator_choice: one small trace ------------------------------------

def _trace():
    """An 8 MiB segment, cached free; then a 3, b 1, c 1, d 2 MiB; free a and c; e 4 MiB.

    Free blocks before e: a's 3 MiB, c's 1 MiB and the 1 MiB tail after d (c and the tail are
    separated by d): 5 MiB free, largest 3 MiB.
    """
    from ..allocator import MiB, alloc, free

    return (alloc("w", 8 * MiB), free("w"), alloc("a", 3 * MiB), alloc("b", 1 * MiB),
            alloc("c", 1 * MiB), alloc("d", 2 * MiB), free("a"), free("c"), alloc("e", 4 * MiB))


def _before_e():
    """The best-fit caching allocator's state just before e: (fragmentation, largest free,
    total free, reserved)."""
    from ..allocator import caching

    run = caching(_trace(), policy="best_fit", pools="one")
    i = len(run.used) - 2
    return (float(run.fragmentation[i]), float(run.largest_free[i]),
            float(run.free_cached[i]), float(run.reserved[i]))


def _fragmentation() -> float:
    return 100 * _before_e()[0]


def _fragmentation_of_reserved(_ref: float) -> float:
    _, largest, _, reserved = _before_e()
    return 100 * (1 - largest / reserved)


def _allocator_choice() -> str:
    """The allocator that serves e from memory it already holds (reserved does not grow)."""
    from ..allocator import MiB, compare

    runs = compare(_trace(), page_bytes=MiB, pools="one").runs
    fits = [r.allocator for r in runs if r.reserved[-1] == r.reserved[-2] and not r.failed]
    if len(fits) != 1:
        raise AssertionError(f"08.allocator_choice needs one answer, the model gives {fits}")
    return fits[0]


QUESTIONS = (
    Question(
        id="08.launch_utilisation",
        name="launch_utilisation",
        points=2,
        prompt="A step launches 200 kernels of 3 µs each back to back on an H200 (4.7 µs of "
               "CPU time per launch, 5.1 µs round trip for the one synchronisation at the end "
               "of the step). What fraction of the step is the GPU busy running kernels, in "
               "percent?",
        hint="The GPU can start a kernel only after its launch call returned and the previous "
             "kernel finished; find when the last kernel ends, then add the final sync.",
        answer=Number(
            reference=_launch_utilisation,
            units="%",
            rtol=0.01,
            mistakes=(
                Mistake("sync_each", "that charges a sync round trip after every kernel; here "
                        "the kernels are launched back to back with one sync at the end.",
                        value=lambda ref: _launch_utilisation(mode="sync")),
                Mistake("serial", "launches overlap with the kernels already queued: the CPU "
                        "does not wait for a kernel before launching the next.",
                        value=lambda ref: _launch_utilisation(mode="sync", sync_us=0.0)),
                Mistake("graph", "that is what a CUDA graph would give; these kernels are "
                        "launched one by one.", value=lambda ref: _launch_utilisation(
                            mode="graph")),
                Mistake("no_overhead", "the kernels are shorter than a launch: the GPU waits "
                        "for the CPU between them.", value=100.0),
                Mistake("fraction", "looks like a fraction (0..1); the answer is wanted in "
                        "percent.", value=lambda ref: ref / 100),
            ),
        ),
    ),
    Question(
        id="08.batch_knee",
        name="batch_knee",
        points=1,
        prompt="An inference kernel takes 2 µs plus 0.05 µs per item of the batch, and kernels "
               "are launched back to back on an H200 (4.7 µs per launch). From which batch "
               "size on does a kernel last at least as long as its launch, so that the GPU no "
               "longer waits for the CPU?",
        answer=Number(
            reference=_batch_knee,
            units="items",
            rtol=0.01,
            mistakes=(
                Mistake("no_fixed", "the kernel's fixed 2 µs counts too: only the remainder of "
                        "the launch time has to come from the per-item work.",
                        value=lambda ref: _batch_knee(fixed_us=0.0)),
                Mistake("with_sync", "back-to-back launches have no sync between them: compare "
                        "the kernel with the launch cost alone.", value=_launch_plus_sync),
                Mistake("v100", "that uses the V100's launch cost; the question is about the "
                        "H200.", value=lambda ref: _batch_knee(figures="V100")),
            ),
        ),
    ),
    Question(
        id="08.allreduce_time",
        name="allreduce_time",
        points=2,
        prompt="Write allreduce_time(nbytes, gpus, bandwidth) returning the time in seconds of "
               "a ring all-reduce of nbytes bytes over `gpus` GPUs whose links move bandwidth "
               "bytes/s per GPU and direction (bandwidth term only, no per-step latency).",
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
        id="08.exposed_comm",
        name="exposed_comm",
        points=3,
        prompt="Data-parallel training on 8 GPUs: 12 layers, each with a 1 ms forward, a 2 ms "
               "backward and 100 MB (10^8 bytes) of gradients. Each layer's gradients are "
               "all-reduced (ring, 50 GB/s per GPU and direction, no latency term) as soon as "
               "its backward finishes, one all-reduce at a time; compute does not slow down "
               "while they run. How many milliseconds does the step last beyond the end of the "
               "backward pass (the exposed communication)?",
        hint="Build the timeline: backward runs layer 12 down to layer 1; each all-reduce "
             "starts when its layer's gradients are ready *and* the previous all-reduce has "
             "finished.",
        answer=Number(
            reference=_exposed_comm,
            units="ms",
            rtol=0.01,
            mistakes=(
                Mistake("last_only", "that is one all-reduce: true when each all-reduce "
                        "finishes within the next layer's backward, but here the link cannot "
                        "keep up, so all-reduces queue.", value=_one_allreduce),
                Mistake("no_overlap", "that is the whole communication time, as if it started "
                        "after the backward pass; here each layer's all-reduce starts as soon "
                        "as its gradients are ready.",
                        value=lambda ref: _step(overlap=False).exposed_comm_ms),
                Mistake("comm_minus_backward", "the first all-reduce cannot start before the "
                        "first backward layer has finished, so not all of the backward time "
                        "hides communication.", value=_comm_minus_backward),
                Mistake("no_ring_factor", "a ring all-reduce moves 2(p − 1)/p of the buffer "
                        "per GPU, not the buffer once.", value=_no_ring_factor),
            ),
        ),
    ),
    Question(
        id="08.fragmentation",
        name="fragmentation",
        points=2,
        prompt="A caching allocator with one pool (best fit, blocks are split, a freed block "
               "merges only with free neighbours in the same segment) holds one 8 MiB segment, "
               "all free. The program allocates a = 3 MiB, b = 1 MiB, c = 1 MiB and d = 2 MiB, "
               "placed one after another from the start of the segment, then frees a and c. "
               "What is the external fragmentation of the free memory now, "
               "1 − largest free block / total free, in percent?",
        hint="Draw the segment: which free pieces are neighbours, and which are not?",
        answer=Number(
            reference=_fragmentation,
            units="%",
            rtol=0.01,
            mistakes=(
                Mistake("inverted", "that is largest free block / total free, the share of the "
                        "free memory one request could use; fragmentation measures the rest.",
                        value=lambda ref: 100 - ref),
                Mistake("of_reserved", "the measure divides by the free memory, not by the "
                        "whole segment.", value=_fragmentation_of_reserved),
                Mistake("fraction", "looks like a fraction (0..1); the answer is wanted in "
                        "percent.", value=lambda ref: ref / 100),
                Mistake("merged", "freed blocks merge only with free neighbours; a and c are "
                        "separated by b, and c and the tail by d.", value=0.0),
            ),
        ),
    ),
    Question(
        id="08.allocator_choice",
        name="allocator_choice",
        points=1,
        prompt="Continuing 08.fragmentation: the program now asks for e = 4 MiB. Which "
               "allocator serves it from memory it already holds, without reserving more from "
               "the device: the caching allocator with 'first_fit', with 'best_fit', or a "
               "'paged' allocator with 1 MiB pages (as vLLM's PagedAttention)?",
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
