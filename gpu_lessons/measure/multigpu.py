"""Cells and runs that need several GPUs: PyTorch's processes over NCCL, one per GPU.

The course's single-GPU cells use CuPy (:func:`gpu_lessons.measure.on_gpu`).  A measurement
across GPUs needs a collective library, so multi-GPU cells use PyTorch's ``torch.distributed``
with NCCL, one process per GPU.  PyTorch is **not** a course dependency: it is imported only
inside these functions and the processes they start, never when the package is imported.

A notebook's multi-GPU cell goes through :func:`on_gpus`; with too few GPUs (or no PyTorch)
it prints one line and returns ``None``, in the same words as the single-GPU cells::

    from gpu_lessons.measure import on_gpus
    result = on_gpus(2, some_measurement)    # fewer than 2 GPUs -> one line, None

Every process started here runs with NVLink multicast (NVLS) switched off in NCCL, PyTorch
and NVSHMEM (:data:`NVLS_OFF`): multicast objects on a shared host can put its GPUs out of
service for others, and the measurements here do not need them.
"""

from __future__ import annotations

import contextlib
import os
import time
from datetime import timedelta

from .. import _validate
from .gpu import FAIL_LINE, GPUS_LINE, SKIP_LINE, SKIP_TAIL

#: Environment of every process that may touch NCCL: no NVLink SHARP / multicast.
NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
            "NVSHMEM_DISABLE_NVLS": "1"}


class MultiGpuError(RuntimeError):
    """A worker process failed or the run outlived its time limit."""


def switch_off_multicast() -> None:
    """Set :data:`NVLS_OFF` in this process's environment (inherited by its children)."""
    os.environ.update(NVLS_OFF)


@contextlib.contextmanager
def environment(values: dict):
    """Set ``values`` in this process's environment (and so in processes started inside the
    block), then put back what was there before."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def multi_gpu_status(min_gpus: int = 2) -> tuple[bool, str]:
    """``(True, "")`` when PyTorch sees at least ``min_gpus`` CUDA GPUs and has NCCL; else
    ``(False, the one line a cell prints)``.  Never raises for a missing or broken PyTorch."""
    need = _validate.integer("min_gpus", min_gpus, low=1, high=1024)
    if os.environ.get("GPU_LESSONS_NO_GPU"):
        return False, SKIP_LINE.format(why="GPU_LESSONS_NO_GPU is set")
    try:
        import torch
    except ImportError:
        return False, SKIP_LINE.format(why="PyTorch not installed")
    except Exception as exc:  # a broken install should not break a lesson
        return False, SKIP_LINE.format(why=f"PyTorch failed to import: {type(exc).__name__}")
    try:
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        found = 0
    if found == 0:
        return False, SKIP_LINE.format(why="PyTorch found no CUDA device")
    if found < need:
        return False, GPUS_LINE.format(need=need, found=found)
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_nccl_available()):
        return False, f"Needs NCCL (PyTorch {torch.__version__} was built without it)" + SKIP_TAIL
    return True, ""


def skip_line(min_gpus: int = 2) -> str | None:
    """The one line a multi-GPU cell prints when it cannot run, or ``None`` when it can."""
    ok, line = multi_gpu_status(min_gpus)
    return None if ok else line


def _run_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [MultiGpuError]
    try:
        import torch
    except Exception:
        return tuple(errors)
    for name in ("OutOfMemoryError",):
        obj = getattr(torch.cuda, name, None)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            errors.append(obj)
    return tuple(errors)


def on_gpus(min_gpus: int, measurement, *args, **kwargs):
    """Run ``measurement(*args, **kwargs)`` if PyTorch sees ``min_gpus`` GPUs or more; else print
    one line and return ``None``.  A failed run (a worker's CUDA or NCCL error, out of memory,
    the time limit) is also one line, not a traceback; bad arguments still raise."""
    if not callable(measurement):
        raise TypeError(f"measurement must be callable, got {measurement!r}")
    ok, line = multi_gpu_status(min_gpus)
    if not ok:
        print(line)
        return None
    try:
        return measurement(*args, **kwargs)
    except _run_errors() as exc:
        print(FAIL_LINE.format(why=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"))
        return None


def spawn(fn, world_size: int, args: tuple, *, timeout_s: float = 600.0) -> None:
    """Run ``fn(rank, *args)`` in ``world_size`` fresh processes (start method "spawn": no CUDA
    state is inherited) with :data:`NVLS_OFF` set, and wait for all of them.

    ``fn`` must be importable by name (a module-level function).  A process that raises, or
    a run longer than ``timeout_s``, stops them all and raises :class:`MultiGpuError` with the
    worker's message.
    """
    world = _validate.integer("world_size", world_size, low=1, high=1024)
    limit = _validate.positive("timeout_s", timeout_s)
    switch_off_multicast()
    import torch.multiprocessing as mp

    ctx = mp.start_processes(fn, args=args, nprocs=world, join=False, start_method="spawn")
    began = time.monotonic()
    try:
        while not ctx.join(timeout=1.0):
            if time.monotonic() - began > limit:
                raise MultiGpuError(f"the run took longer than timeout_s={limit:g}; stopped")
    except mp.ProcessRaisedException as exc:
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        raise MultiGpuError(f"a worker failed: {lines[-1] if lines else exc}\n{exc}") from None
    except mp.ProcessExitedException as exc:
        raise MultiGpuError(f"a worker exited early: {exc}") from None
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
                p.join(5)


def init_process_group(rank: int, world_size: int, backend: str, rendezvous: str,
                       timeout_s: float) -> None:
    """Join this process to the group: NCCL with GPU ``rank``, or gloo on the CPU."""
    switch_off_multicast()
    import torch
    import torch.distributed as dist

    kw = {}
    if backend == "nccl":
        torch.cuda.set_device(rank)
        kw["device_id"] = torch.device("cuda", rank)
    dist.init_process_group(backend, init_method=rendezvous, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=timeout_s), **kw)
