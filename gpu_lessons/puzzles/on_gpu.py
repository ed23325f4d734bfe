"""Run a puzzle's kernel on a real GPU: the learner's own kernel, translated to CUDA C.

:func:`run_on_gpu` translates the kernel (:func:`gpu_lessons.kernels.to_cuda`), runs it at the
puzzle's ``gpu_size`` on inputs from the puzzle's input maker, checks the outputs against the
puzzle's spec, and sets the measured time beside what the models predicted:

* the simulator's counts, from a simulated run at the puzzle's first (small) size: global
  sectors per request, shared-memory wavefronts and bank conflicts, SIMT efficiency;
* the memory model's time: the bytes the simulator says move (32-byte sectors x 32 B),
  scaled from the small size to the GPU size by the ratio of the arrays' bytes, over the
  catalog bandwidth of the GPU it ran on (:func:`gpu_lessons.roofline.kernel_time` with no
  FLOPs: the time memory alone needs).  The scaling assumes the kernel moves bytes in
  proportion to its arrays, true of every puzzle's sound kernel; caches (L2 reuse of a
  matrix multiply's tiles) make the real traffic smaller, launch overhead makes tiny kernels
  slower.

The launch is the puzzle's at that size, except where the puzzle's own would not fill a GPU
(``Puzzle.gpu_launch``: the grid-stride loop's fixed 4 blocks become 32 blocks of 64 threads
per SM); the run prints the launch it used.

It first prints the kernel as CUDA C (the translation runs GPU or not, so a kernel CUDA could
not take is reported either way); without a GPU it then prints the course's one skip line, as
every GPU cell does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate
from .._format import Readout, Row
from ..kernels.gpu import memory_model_rows


@dataclass(frozen=True, repr=False)
class PuzzleGpuRun(Readout):
    """A puzzle kernel on a GPU next to the models' predictions (times in seconds)."""

    puzzle: str
    device: str
    size: dict
    grid: tuple
    block: tuple
    correct: bool
    wrong: str | None
    seconds: float
    repeats: int
    sectors_per_request: float
    bank_conflicts: int
    shared_wavefronts: int
    simt_efficiency: float
    predicted_bytes: float
    predicted_seconds: float | None
    bandwidth: float | None
    flops: float = 0.0                 # the spec's arithmetic at this size (0: not modelled)
    peak_flops: float | None = None    # the catalog's FP32 peak of the GPU it ran on
    model: object = None               # gpu_lessons.perf's TimePrediction for this launch

    def readout_title(self) -> str:
        size = ", ".join(f"{k}={v:,}" for k, v in self.size.items())
        return f"{self.puzzle} on {self.device} ({size})"

    def readout_rows(self) -> tuple[Row, ...]:
        spr = self.sectors_per_request
        rows = [Row("output", "matches the spec" if self.correct else f"WRONG: {self.wrong}"),
                Row("launch", f"grid {_dims(self.grid)}, block {_dims(self.block)}"),
                Row("measured kernel time (median, CUDA events)", self.seconds, "s"),
                Row("timed runs", self.repeats),
                Row("simulator: global sectors / request", "–" if spr != spr else spr),
                Row("simulator: shared wavefronts", self.shared_wavefronts),
                Row("simulator: bank conflicts", self.bank_conflicts),
                Row("simulator: SIMT efficiency", self.simt_efficiency, "%"),
                Row("memory model: bytes moved at this size", self.predicted_bytes, "B")]
        if self.flops and self.peak_flops:
            rate = self.flops / self.seconds
            rows += [Row("arithmetic", self.flops, "FLOP"), Row("measured rate", rate, "FLOP/s"),
                     Row("of the FP32 peak", rate / self.peak_flops, "%"),
                     Row("FP32 peak", self.peak_flops, "FLOP/s")]
        if self.predicted_seconds is not None and self.flops and self.peak_flops:
            memory = self.predicted_bytes / self.bandwidth
            compute = self.flops / self.peak_flops
            rows += [Row("roofline: time at the catalog peaks", max(memory, compute), "s"),
                     Row("roofline: memory", memory, "s"),
                     Row("roofline: FP32 arithmetic", compute, "s"),
                     Row("measured / predicted", self.seconds / self.predicted_seconds)]
        elif self.predicted_seconds is not None:
            rows += memory_model_rows(self.seconds, self.predicted_seconds, self.bandwidth)
        else:
            rows.append(Row("memory model: time", f"{self.device} is not in the course's GPU "
                                                  f"catalog, so no bandwidth to divide by"))
        if self.model is not None:
            rows += [Row("performance model (predict_time)", self.model.seconds, "s"),
                     Row("performance model: limiter", self.model.limiter),
                     Row("measured / performance model", self.seconds / self.model.seconds)]
        return tuple(rows)


def _dims(d) -> str:
    d = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    return " × ".join(f"{v:,}" for v in d)


def predicted_work(p, kernel, size: dict, nbytes: int, *, seed: int = 0, **choices):
    """What the models say ``kernel`` costs on puzzle ``p`` at ``size`` (whose arrays hold
    ``nbytes``): the simulator's totals at the puzzle's first size, the bytes its sectors move
    scaled to ``size`` by the arrays' bytes, and the spec's FLOPs at ``size`` (0 where the
    puzzle does not count them)."""
    from ..kernels import simt

    small = dict(p.sizes[0])
    small_args = p.make_inputs(small, seed=seed)
    sim = simt.run(kernel, *p.launch(**small, **choices), *small_args.values())
    moved = sim.totals.global_sectors * 32 * nbytes / _array_bytes(small_args)
    flops = float(p.flops(**size)) if p.flops is not None else 0.0
    return sim.totals, moved, flops


def _array_bytes(args) -> int:
    return sum(v.nbytes for v in args.values() if isinstance(v, np.ndarray))


def run_on_gpu(puzzle_id, kernel, *, size=None, repeats=20, seed=0, show_source=True,
               exact=True, **choices):
    """Run ``kernel`` on puzzle ``puzzle_id`` at ``size`` (default: the puzzle's ``gpu_size``)
    on this machine's GPU, ``repeats`` timed runs; ``choices``: the launch parameters a puzzle
    lets the learner choose (e.g. ``block=256``).  Returns a :class:`PuzzleGpuRun`, or ``None``
    without a GPU (after printing the skip line).

    ``show_source``: first print the kernel as CUDA C, each line with the Python line it came
    from (GPU or not: the translation is what a learner without a GPU gets from this cell).
    ``exact``: compile with ``-fmad=false`` (as :func:`gpu_lessons.kernels.run_on_gpu` does by
    default); ``False`` lets the compiler fuse multiply-adds, as nvcc does, which makes
    multiply-add-bound kernels faster (the output is still checked against the spec)."""
    from .. import kernels as cuda
    from .. import roofline
    from ..measure.gpu import catalog_gpu, skip_line
    from . import _kernel
    from ._registry import find

    p = find(puzzle_id)
    if _kernel.is_stub(kernel):  # the exercise's stub: nothing to translate yet
        print(f"… {p.id}: not attempted yet — write the kernel first")
        return None
    unchosen = [k.upper() for k, v in choices.items() if v is Ellipsis]
    if unchosen:                 # the exercise's BLOCK = ... left as it was
        print(f"… {p.id}: not attempted yet — choose {', '.join(unchosen)}")
        return None
    if set(choices) != set(p.choices):
        wanted = ", ".join(f"{k}=..." for k in p.choices) or "none"
        raise TypeError(f"{p.id}'s launch choices are: {wanted}; got "
                        f"{', '.join(f'{k}=' for k in choices) or 'none'}")
    if isinstance(kernel, str):
        kernel = _kernel.kernel_from_source(kernel)
    size = dict(p.gpu_size if size is None else size)
    args = p.make_inputs(size, seed=seed)
    grid, block = p.launch(**size, **choices)
    if p.gpu_launch is not None and skip_line() is None:
        grid, block = p.gpu_launch(_sm_count(), **size, **choices)
    source = cuda.to_cuda(kernel, *args.values())   # the language and the translation, GPU or not
    if _validate.flag("show_source", show_source):
        print(source.body)
    line = skip_line()
    if line is not None:
        print(line)
        return None

    expected = p.expected(args)
    run = cuda.run_on_gpu(kernel, grid, block, *args.values(), repeats=repeats,
                          exact=_validate.flag("exact", exact))
    if run is None:     # a CUDA error was reported in one line
        return None
    wrong = None
    for name in p.outputs:
        got, want = args[name], expected[name]
        ok = (np.isclose(got, want, rtol=p.rtol, atol=p.atol)
              if np.issubdtype(want.dtype, np.floating) else got == want)
        if not ok.all():
            i = int(np.flatnonzero(~ok.ravel())[0])
            wrong = f"{name}[{i}] is {got.ravel()[i]}, expected {want.ravel()[i]}"
            break
    t, moved, flops = predicted_work(p, kernel, size, _array_bytes(args), seed=seed,
                                     **choices)
    g = catalog_gpu(run.device)
    predicted = (roofline.kernel_time(flops, moved, g.peak_flops("fp32"), g.bandwidth)
                 if g is not None and moved > 0 else None)
    model = None
    if g is not None:
        from ..perf import predict_time

        try:
            model = predict_time(kernel, grid, block, *p.make_inputs(size, seed=seed).values(),
                                 gpu=g.name, exact=_validate.flag("exact", exact),
                                 registers=run.registers_per_thread)
        except Exception:  # the measurement stands without the model
            model = None
    return PuzzleGpuRun(p.id, run.device, size, grid, block, wrong is None, wrong,
                        run.timing.median,
                        run.timing.repeats, t.sectors_per_request, int(t.bank_conflicts),
                        int(t.shared_wavefronts), t.simt_efficiency, moved, predicted,
                        g.bandwidth if g is not None else None,
                        flops, g.peak_flops("fp32") if g is not None else None, model)


def _sm_count() -> int:
    import cupy as cp

    return int(cp.cuda.Device().attributes["MultiProcessorCount"])
