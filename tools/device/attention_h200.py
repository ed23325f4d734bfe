"""The attention puzzles' worked kernels on an H200: FlashAttention beside PyTorch's, decoding
beside the copy bandwidth.

    PYTHONUNBUFFERED=1 python3 tools/device/attention_h200.py OUT.json
    python3 tools/device/attention_h200.py --dry

The worked kernel (``solutions/puzzle_kernels.py``: 64 queries a block of four warps, K and V
tiles of 64 keys through shared memory by cp.async, ``t.ldmatrix`` and ``t.mma`` for both
products, the online softmax in registers), translated by ``to_cuda`` and timed with
``gpu_lessons.kernels.run_on_gpu`` (default build, median of 10 CUDA-event timings after 2
warm-ups), at sequence 4096, head dimension 128, 32 heads, batch 1, bfloat16 in, float32 out;
beside it ``torch.nn.functional.scaled_dot_product_attention`` with the flash backend forced
(bfloat16 out, median of 10 after 3 warm-ups).  TFLOP/s count 4 seq² d heads FLOPs (two
products, a multiply-add 2 FLOPs).  The error is the largest ``|o - ref|`` against a float32
reference of the same inputs (the puzzle's tolerance is 0.01 + 0.01 |ref|).  The run also
records the H200's device-to-device copy bandwidth of 1 GB (CuPy, bytes read + written), the
roof of the decode_attention worked kernel: one query a head against a 1 GiB bfloat16 KV cache
(256 heads, sequence 8,192, d = 128: batch 8 of 32 heads), its rate the KV bytes read over its
time (the query and the output are 0.1 % more).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from gpu_lessons import kernels  # noqa: E402

SEQ, HEADS, D = 4096, 32, 128


DECODE_SEQ, DECODE_HEADS = 8192, 256


def _worked():
    spec = importlib.util.spec_from_file_location("pk", ROOT / "solutions" / "puzzle_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.flash_attention_kernel, mod.decode_attention_kernel


def _inputs(seq, heads, rng):
    n = heads * seq * D
    q, k, v = (rng.standard_normal(n).astype(ml_dtypes.bfloat16) for _ in range(3))
    return q, k, v, np.zeros(n, np.float32)


def _reference(q, k, v, seq, heads):
    Q, K, V = (x.astype(np.float32).reshape(heads, seq, D) for x in (q, k, v))
    s = Q @ K.transpose(0, 2, 1) / np.float32(np.sqrt(D))
    p = np.exp(s - s.max(axis=2, keepdims=True))
    return (p / p.sum(axis=2, keepdims=True)) @ V


def _decode_reference(q, k, v, seq, heads):
    Q = q.astype(np.float32).reshape(heads, 1, D)
    K, V = (x.astype(np.float32).reshape(heads, seq, D) for x in (k, v))
    s = Q @ K.transpose(0, 2, 1) / np.float32(np.sqrt(D))
    p = np.exp(s - s.max(axis=2, keepdims=True))
    return (p / p.sum(axis=2, keepdims=True)) @ V


def _median_events(torch, fn, runs=13, skip=3):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(runs):
        start.record()
        fn()
        end.record()
        end.synchronize()
        if i >= skip:
            times.append(start.elapsed_time(end) * 1e-3)
    return float(np.median(times)), times


def main(argv):
    kernel, decode = _worked()
    source = inspect.getsource(kernel)
    decode_source = inspect.getsource(decode)
    rng = np.random.default_rng(0)
    if "--dry" in argv:
        q, k, v, o = _inputs(128, 2, rng)
        kernels.run(kernel, (2, 2), 128, q, k, v, o, 128, 2)
        err = float(np.abs(o.reshape(2, 128, D) - _reference(q, k, v, 128, 2)).max())
        print("simulated seq 128, 2 heads, largest error", err)
        print(kernels.compile(kernel, q, k, v, o, 128, 2, arch="sm_90"))
        _, k, v, _ = _inputs(128, 2, rng)
        q, o = k[:2 * D].copy(), np.zeros(2 * D, np.float32)
        kernels.run(decode, 2, 256, q, k, v, o, 128, 2)
        err = float(np.abs(o.reshape(2, 1, D) - _decode_reference(q, k, v, 128, 2)).max())
        print("decode simulated seq 128, 2 heads, largest error", err)
        print(kernels.compile(decode, q, k, v, o, 128, 2, arch="sm_90"))
        return
    import cupy as cp
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    record = {"what": __doc__.strip().splitlines()[0], "how": "tools/device/attention_h200.py",
              "gpu": torch.cuda.get_device_name(0), "cupy": cp.__version__,
              "torch": torch.__version__, "driver": cp.cuda.runtime.driverGetVersion(),
              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "kernel_source": source,
              "kernel_sha256": hashlib.sha256(source.encode()).hexdigest(),
              "decode_kernel_source": decode_source,
              "decode_kernel_sha256": hashlib.sha256(decode_source.encode()).hexdigest()}
    q, k, v, o = _inputs(SEQ, HEADS, rng)
    run = kernels.run_on_gpu(kernel, (SEQ // 64, HEADS), 128, q, k, v, o, SEQ, HEADS,
                             repeats=10, exact=False)
    tq, tk, tv = (torch.from_numpy(x.view(np.int16).reshape(1, HEADS, SEQ, D)).cuda()
                  .view(torch.bfloat16) for x in (q, k, v))
    ref = torch.softmax(tq.float() @ tk.float().transpose(-1, -2) / D ** 0.5, -1) @ tv.float()
    ref = ref.cpu().numpy().reshape(HEADS, SEQ, D)
    err = float(np.abs(o.reshape(HEADS, SEQ, D) - ref).max())
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        sdpa, sdpa_times = _median_events(
            torch, lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv))
        sdpa_out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)
    sdpa_err = float(np.abs(sdpa_out.float().cpu().numpy().reshape(HEADS, SEQ, D) - ref).max())
    flops = 4 * SEQ * SEQ * D * HEADS
    mine = run.timing.median
    record["flash"] = {
        "seq": SEQ, "heads": HEADS, "head_dim": D, "batch": 1, "flops": flops,
        "kernel_s": mine, "kernel_samples_s": list(run.timing.samples),
        "kernel_tflops": flops / mine / 1e12, "registers": run.registers_per_thread,
        "sdpa_flash_s": sdpa, "sdpa_flash_samples_s": sdpa_times,
        "sdpa_flash_tflops": flops / sdpa / 1e12, "of_sdpa_flash": sdpa / mine,
        "max_abs_error": err, "sdpa_max_abs_error": sdpa_err}
    print(f"  flash: kernel {flops / mine / 1e12:.1f} TFLOP/s, SDPA flash "
          f"{flops / sdpa / 1e12:.1f} TFLOP/s ({sdpa / mine:.1%}), error {err:.2e}")
    n = 2 ** 30
    src = cp.zeros(n, cp.uint8)
    dst = cp.empty_like(src)
    tdst, tsrc = torch.as_tensor(dst, device="cuda"), torch.as_tensor(src, device="cuda")
    copy, copy_times = _median_events(torch, lambda: tdst.copy_(tsrc))
    record["copy"] = {"bytes": n, "s": copy, "samples_s": copy_times,
                      "gb_per_s": 2 * n / copy / 1e9, "bytes_counted": "read + write"}
    print(f"  copy of 1 GiB: {2 * n / copy / 1e9:.0f} GB/s (read + write)")
    seq, heads = DECODE_SEQ, DECODE_HEADS
    q = rng.standard_normal(heads * D).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal(heads * seq * D).astype(ml_dtypes.bfloat16)
    v = rng.standard_normal(heads * seq * D).astype(ml_dtypes.bfloat16)
    o = np.zeros(heads * D, np.float32)
    drun = kernels.run_on_gpu(decode, heads, 256, q, k, v, o, seq, heads, repeats=10,
                              exact=False)
    tq = torch.from_numpy(q.view(np.int16).reshape(heads, 1, D)).cuda().view(torch.bfloat16)
    tk, tv = (torch.from_numpy(x.view(np.int16).reshape(heads, seq, D)).cuda()
              .view(torch.bfloat16) for x in (k, v))
    dref = torch.softmax(tq.float() @ tk.float().transpose(-1, -2) / D ** 0.5, -1) @ tv.float()
    derr = float(np.abs(o.reshape(heads, 1, D) - dref.cpu().numpy()).max())
    kv_bytes = 2 * heads * seq * D * 2
    dt = drun.timing.median
    record["decode"] = {"seq": seq, "heads": heads, "head_dim": D, "kv_bytes": kv_bytes,
                        "kernel_s": dt, "kernel_samples_s": list(drun.timing.samples),
                        "gb_per_s": kv_bytes / dt / 1e9, "registers": drun.registers_per_thread,
                        "of_copy": kv_bytes / dt / 1e9 / record["copy"]["gb_per_s"],
                        "max_abs_error": derr}
    print(f"  decode: {kv_bytes / dt / 1e9:.0f} GB/s of KV, "
          f"{record['decode']['of_copy']:.1%} of the copy, error {derr:.2e}")
    Path(argv[1]).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main(sys.argv)
