"""What each process of the overlap measurement runs (PyTorch; imported only inside a worker).

One process per GPU, joined in a ``torch.distributed`` process group (NCCL on GPUs; gloo on
the CPU, which only the tests use, to run this same code without a GPU).  Every rank runs the
same phases and records its own timings; :func:`measure_overlap_raw` then gathers every
rank's samples, so the record holds all of them and the summary can take, repeat by repeat,
the slowest rank (a step of data-parallel training ends when its last GPU does).

Phases (times per timed run; ``warmup`` untimed runs first; a barrier and a GPU-side sync
before every timed run, so every rank starts it at the same moment):

* **compute**: the "backward pass": ``n_layers`` GEMMs of ``gemm_n``³ on the compute stream;
* **all-reduce**: ``iters`` back-to-back all-reduces of each size (as nccl-tests' ``-n``),
  divided by ``iters``;
* **overlap**, per bucket size: the same GEMMs while the gradients (one flat FP32 buffer,
  ``grad_bytes_per_layer`` per layer) are all-reduced in buckets on a second stream, each
  bucket launched when its last layer's GEMM is done (DDP's rule,
  :func:`gpu_lessons.system.gradient_buckets`); timed: the compute stream's own end and the
  end of everything;
* **contention**: the GEMMs while a run of all-reduces of ``contention_bytes`` occupies the
  second stream from start to end: how much the two slow each other down.

GPU times come from CUDA events (CUDA C++ Best Practices Guide, "Using CUDA GPU Timers"); on
the CPU path host clocks stand in for them (CPU matrix products are synchronous), and an
all-reduce "on the second stream" is gloo's asynchronous all-reduce.  Environment variables in
:data:`gpu_lessons.measure.multigpu.NVLS_OFF` are set before anything touches NCCL.
"""

from __future__ import annotations

import math
import os
import socket
import time

from .. import system
from .._format import binary_bytes, duration
from ..overlap_record import OverlapConfig
from . import nvml
from .multigpu import switch_off_multicast


class _CudaOps:
    """Timing and streams on a CUDA device: CUDA events; buckets on a second stream."""

    def __init__(self, torch, dist, device):
        self.torch, self.dist, self.device = torch, dist, device
        self.comm = torch.cuda.Stream(device)

    def mark(self, on_comm: bool = False):
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record(self.comm if on_comm else self.torch.cuda.current_stream(self.device))
        return ev

    def seconds(self, start, end) -> float:
        end.synchronize()
        return start.elapsed_time(end) * 1e-3

    def allreduce(self, tensor) -> None:
        """All-reduce ``tensor`` on the compute stream (blocking that stream, not the host)."""
        self.dist.all_reduce(tensor)

    def allreduce_on_comm(self, tensor):
        """All-reduce ``tensor`` on the second stream once the compute queued so far is done;
        returns an event on the second stream marking its end."""
        ready = self.torch.cuda.Event()
        ready.record(self.torch.cuda.current_stream(self.device))
        self.comm.wait_event(ready)
        with self.torch.cuda.stream(self.comm):
            self.dist.all_reduce(tensor)
        return self.mark(on_comm=True)

    def join(self) -> None:
        """The compute stream waits for everything queued on the second stream."""
        self.torch.cuda.current_stream(self.device).wait_stream(self.comm)

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        self.sync()
        self.dist.barrier(device_ids=[self.device.index])


class _CpuOps:
    """The same operations on the CPU with gloo: host clocks; gloo's asynchronous all-reduce
    (run by gloo's own threads) plays the second stream."""

    def __init__(self, torch, dist, device):
        self.torch, self.dist, self.device = torch, dist, device
        self.pending = []

    def mark(self, on_comm: bool = False):
        if on_comm:
            self.join()
        return time.perf_counter()

    def seconds(self, start, end) -> float:
        if not isinstance(end, float):      # a gloo work handle: its end is when we see it done
            end.wait()
            end = time.perf_counter()
        return max(end - start, 1e-9)

    def allreduce(self, tensor) -> None:
        self.dist.all_reduce(tensor)

    def allreduce_on_comm(self, tensor):
        work = self.dist.all_reduce(tensor, async_op=True)
        self.pending.append(work)
        return work

    def join(self) -> None:
        for work in self.pending:
            work.wait()
        self.pending = []

    def sync(self) -> None:
        self.join()

    def barrier(self) -> None:
        self.sync()
        self.dist.barrier()


class _Run:
    """One rank's buffers and phases."""

    def __init__(self, torch, dist, ops, config: OverlapConfig):
        self.torch, self.dist, self.ops, self.c = torch, dist, ops, config
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        dev = ops.device
        dtype = getattr(torch, config.dtype)
        gen = torch.Generator(device=dev).manual_seed(1234 + self.rank)
        n = config.gemm_n
        # unit-variance inputs scaled by 1/sqrt(n): products stay O(1), never inf or NaN
        self.a = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
        self.w = [torch.randn(n, n, device=dev, dtype=dtype, generator=gen) / math.sqrt(n)
                  for _ in range(config.n_layers)]
        self.out = [torch.empty(n, n, device=dev, dtype=dtype) for _ in range(2)]
        per_layer = config.grad_bytes_per_layer // 4
        self.grads = torch.zeros(per_layer * config.n_layers, device=dev, dtype=torch.float32)
        self.grad_elems = per_layer
        self.sync_buf = torch.zeros(1, device=dev, dtype=torch.float32)
        self.clock = None
        self.clock_samples = []

    # -- helpers ---------------------------------------------------------------------------

    def start_together(self):
        """Barrier on the host, then a one-element all-reduce on the compute stream: every rank's
        GPU leaves it at the same moment, with the host already queueing what follows."""
        self.ops.barrier()
        self.ops.allreduce(self.sync_buf)

    def sample_clock(self):
        if self.clock is not None:
            self.clock_samples.append(self.clock.sample())

    def gemm(self, layer: int):
        self.torch.matmul(self.a, self.w[layer], out=self.out[layer % 2])

    def gemms(self):
        for layer in range(self.c.n_layers):
            self.gemm(layer)

    def repeat(self, timed_run, warmup: int | None = None) -> list:
        """``warmup`` untimed, then ``repeats`` timed runs of ``timed_run()`` (returns a tuple
        of seconds)."""
        for _ in range(self.c.warmup if warmup is None else warmup):
            self.start_together()
            timed_run()
        out = []
        for _ in range(self.c.repeats):
            self.start_together()
            out.append(timed_run())
            self.sample_clock()
        return out

    # -- phases ----------------------------------------------------------------------------

    def compute(self):
        def run():
            start = self.ops.mark()
            self.gemms()
            end = self.ops.mark()
            return (self.ops.seconds(start, end),)
        return [s for (s,) in self.repeat(run)]

    def check_allreduce(self, buf):
        """Each rank adds rank + 1: the sum is p(p+1)/2 everywhere (exact in FP32)."""
        buf.fill_(float(self.rank + 1))
        self.ops.allreduce(buf)
        self.ops.sync()
        want = self.world * (self.world + 1) / 2
        if not bool((buf == want).all()):
            raise RuntimeError(f"all-reduce of {buf.numel() * 4} bytes gave a wrong sum on "
                               f"rank {self.rank}; timing discarded")
        buf.zero_()

    def allreduce_sweep(self):
        rows = []
        for nbytes in self.c.allreduce_bytes:
            buf = self.grads_view(nbytes)
            self.check_allreduce(buf)

            def run(buf=buf):
                start = self.ops.mark()
                for _ in range(self.c.iters):
                    self.ops.allreduce(buf)
                end = self.ops.mark()
                return (self.ops.seconds(start, end) / self.c.iters,)
            rows.append({"nbytes": nbytes, "iters": self.c.iters,
                         "samples": [s for (s,) in self.repeat(run, warmup=1)]})
        return rows

    def grads_view(self, nbytes: int):
        if nbytes // 4 > self.grads.numel():
            self.grads = self.torch.zeros(nbytes // 4, device=self.ops.device,
                                          dtype=self.torch.float32)
        return self.grads[: nbytes // 4]

    def buckets(self, bucket_bytes: int) -> list[list[int]]:
        """Layers per bucket in the order they are launched.  GEMM ``j`` of the chain plays
        layer ``n − 1 − j`` of the backward pass (backward runs last layer first)."""
        return system.gradient_buckets([self.c.grad_bytes_per_layer] * self.c.n_layers,
                                       bucket_bytes)

    def overlapped(self, bucket_bytes: int):
        n, per = self.c.n_layers, self.grad_elems
        grads = self.grads_view(n * per * 4)
        groups = self.buckets(bucket_bytes)
        last = {g[-1]: g for g in groups}          # layer whose backward closes the bucket

        def bucket_view(g):                          # the bucket's layers are contiguous
            lo, hi = min(g), max(g)
            return grads[lo * per:(hi + 1) * per]

        def run():
            start = self.ops.mark()
            for j in range(n):
                layer = n - 1 - j
                self.gemm(j)
                if layer in last:
                    self.ops.allreduce_on_comm(bucket_view(last[layer]))
            compute_done = self.ops.mark()
            self.ops.join()
            end = self.ops.mark()
            return self.ops.seconds(start, end), self.ops.seconds(start, compute_done)

        # correctness first: every layer's gradients summed exactly once
        grads.fill_(float(self.rank + 1))
        run()
        self.ops.sync()
        want = self.world * (self.world + 1) / 2
        if not bool((grads == want).all()):
            raise RuntimeError(f"bucketed all-reduce ({binary_bytes(bucket_bytes)} buckets) left a wrong "
                               f"sum "
                               f"on rank {self.rank}; timing discarded")
        grads.zero_()
        samples = self.repeat(run)
        return {"bucket_bytes": bucket_bytes, "buckets": groups,
                "total_samples": [t for t, _ in samples],
                "compute_samples": [c for _, c in samples]}

    def contention(self, compute_s: float):
        """GEMMs while all-reduces of ``contention_bytes`` run back to back beside them for
        longer than the GEMMs take (count from the time of one all-reduce alone)."""
        nbytes = self.c.contention_bytes
        buf = self.grads_view(nbytes)
        self.check_allreduce(buf)

        def alone():
            start = self.ops.mark()
            for _ in range(self.c.iters):
                self.ops.allreduce(buf)
            end = self.ops.mark()
            return (self.ops.seconds(start, end) / self.c.iters,)
        ar = sorted(s for (s,) in self.repeat(alone, warmup=1))
        # every rank must issue the same number of all-reduces: agree on the slowest estimate
        t = self.torch.tensor([compute_s, ar[len(ar) // 2]], dtype=self.torch.float64,
                              device=self.ops.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        slowest_compute, slowest_ar = (float(v) for v in t.tolist())
        count = max(2, math.ceil(1.25 * slowest_compute / max(slowest_ar, 1e-9)) + 1)
        count = min(count, 1000)

        def run():
            start = self.ops.mark()
            ends = [self.ops.allreduce_on_comm(buf) for _ in range(count)]
            # the compute is timed from here: while the host was queueing the all-reduces the
            # compute stream sat idle, and that wait is not the GEMMs' slowdown
            compute_start = self.ops.mark()
            self.gemms()
            compute_done = self.ops.mark()
            self.ops.join()
            end = self.ops.mark()
            t0 = self.ops.seconds(start, compute_start)
            t1 = self.ops.seconds(start, compute_done)
            return (t0, max(t1 - t0, 1e-9), [self.ops.seconds(start, e) for e in ends],
                    self.ops.seconds(start, end))
        samples = self.repeat(run)
        return {"allreduce_bytes": nbytes, "count": count, "allreduce_alone_samples": ar,
                "compute_start_samples": [s[0] for s in samples],
                "compute_samples": [s[1] for s in samples],
                "comm_end_samples": [s[2] for s in samples],
                "total_samples": [s[3] for s in samples]}


def _gather(dist, value) -> list:
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def _nvml_by_uuid(uuid: str):
    """NVML readings of the GPU with CUDA UUID ``uuid`` (None when NVML is missing)."""
    import ctypes

    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != 0:
            return None
        handle = ctypes.c_void_p()
        text = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
        if lib.nvmlDeviceGetHandleByUUID(text.encode(), ctypes.byref(handle)) != 0:
            return None
        reader = nvml.Nvml(lib, handle)
        return reader if reader.sample() is not None else None
    except (OSError, AttributeError):
        return None


def _rank_meta(torch, device, backend: str) -> dict:
    meta = {"host": socket.gethostname(), "pid": os.getpid(), "device": str(device)}
    if backend == "nccl":
        p = torch.cuda.get_device_properties(device)
        meta.update(name=p.name, uuid=str(p.uuid), sms=p.multi_processor_count,
                    cc=f"{p.major}.{p.minor}", memory_bytes=int(p.total_memory))
    else:
        meta.update(name="CPU (gloo test path)")
    return meta


def measure_overlap_raw(config: OverlapConfig, backend: str) -> dict:
    """Run every phase on this rank of an initialised process group; every rank returns the
    same record (each rank's samples under ``"by_rank"``)."""
    import torch
    import torch.distributed as dist

    switch_off_multicast()
    rank = dist.get_rank()
    if backend == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
        ops = _CudaOps(torch, dist, device)
    else:
        # one thread: the ranks share the CPU, and idle intra-op threads spinning beside
        # gloo's own would make every timing a measure of oversubscription
        torch.set_num_threads(1)
        device = torch.device("cpu")
        ops = _CpuOps(torch, dist, device)
    run = _Run(torch, dist, ops, config)
    meta = _rank_meta(torch, device, backend)
    if backend == "nccl":
        run.clock = _nvml_by_uuid(meta["uuid"])

    began = time.monotonic()

    def done(what):          # progress on rank 0's stdout (the device tool's log)
        if rank == 0:
            print(f"[overlap] {what} done at {duration(time.monotonic() - began)}", flush=True)

    compute = run.compute()
    done("(a) compute alone")
    allreduce = run.allreduce_sweep()
    done("(b) all-reduce sweep")
    overlap = []
    for b in config.bucket_bytes:
        overlap.append(run.overlapped(b))
        done(f"(c) overlap with {binary_bytes(b)} buckets")
    ordered = sorted(compute)
    contention = run.contention(ordered[len(ordered) // 2])
    done("(d) contention")
    ops.barrier()
    meta["clock"] = nvml.summarize(run.clock_samples)
    mine = {"meta": meta, "compute_samples": compute, "allreduce": allreduce,
            "overlap": overlap, "contention": contention}
    by_rank = _gather(dist, mine)
    return {"rank": rank, "by_rank": by_rank}
