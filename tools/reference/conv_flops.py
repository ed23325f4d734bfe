"""Record what PyTorch's FLOP counter says about some convolutions and attention shapes.

The numbers become ``tests/data/torch_conv_flops.json``, an independent reference for
``gpu_lessons.costs`` (tests read the JSON; torch is not a dependency of the course).

Run it from a throwaway environment that has torch, e.g.::

    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch
    /tmp/torchenv/bin/python tools/reference/conv_flops.py

Tensors live on the "meta" device: shapes and FLOP counts without doing the arithmetic.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "torch_conv_flops.json"

# keyword arguments of gpu_lessons.costs.conv2d; ints mean square
CONVS = [
    {"label": "seed-style toy layer", "x": 5, "k": 3, "c_in": 2, "c_out": 4},
    {"label": "ResNet-50 conv1", "x": 224, "k": 7, "c_in": 3, "c_out": 64, "stride": 2,
     "padding": 3},
    {"label": "3x3 same conv, batch 8", "x": 56, "k": 3, "c_in": 64, "c_out": 64,
     "padding": 1, "batch": 8},
    {"label": "VGG-16 conv2_1", "x": 112, "k": 3, "c_in": 64, "c_out": 128, "padding": 1},
    {"label": "stride 2 that does not divide (floored)", "x": 224, "k": 3, "c_in": 3,
     "c_out": 32, "stride": 2},
    {"label": "1x1 stride-2 projection", "x": 56, "k": 1, "c_in": 256, "c_out": 512,
     "stride": 2, "batch": 2},
    {"label": "depthwise 3x3", "x": 112, "k": 3, "c_in": 32, "c_out": 32, "padding": 1,
     "groups": 32},
    {"label": "depthwise with channel multiplier 2", "x": 28, "k": 5, "c_in": 16, "c_out": 32,
     "padding": 2, "groups": 16, "batch": 3},
    {"label": "ResNeXt grouped 3x3", "x": 56, "k": 3, "c_in": 128, "c_out": 128,
     "padding": 1, "groups": 32},
    {"label": "rectangular input, kernel, stride", "x": [32, 48], "k": [3, 5], "c_in": 16,
     "c_out": 24, "padding": [1, 2], "stride": [1, 2], "batch": 4},
    {"label": "dilated 3x3", "x": 64, "k": 3, "c_in": 16, "c_out": 16, "padding": 2,
     "dilation": 2},
    {"label": "stride 3, padding 1, odd sizes", "x": 17, "k": 4, "c_in": 5, "c_out": 7,
     "stride": 3, "padding": 1, "batch": 2},
]

# keyword arguments of gpu_lessons.costs.attention
ATTENTION = [
    {"label": "prefill 128 tokens", "q_len": 128, "kv_len": 128, "n_heads": 8, "head_dim": 64},
    {"label": "decode, 4096 cached, batch 4", "q_len": 1, "kv_len": 4096, "n_heads": 32,
     "head_dim": 128, "batch": 4},
    {"label": "decode with GQA (32 query / 8 KV heads)", "q_len": 1, "kv_len": 1024,
     "n_heads": 32, "n_kv_heads": 8, "head_dim": 128, "batch": 2},
    {"label": "chunked prefill: 16 new tokens over 80", "q_len": 16, "kv_len": 80,
     "n_heads": 4, "head_dim": 32},
]


def _pair(v):
    return tuple(v) if isinstance(v, list) else (v, v)


def conv_case(case):
    xh, xw = _pair(case["x"])
    kh, kw = _pair(case["k"])
    groups, batch = case.get("groups", 1), case.get("batch", 1)
    x = torch.empty(batch, case["c_in"], xh, xw, device="meta")
    w = torch.empty(case["c_out"], case["c_in"] // groups, kh, kw, device="meta")
    with FlopCounterMode(display=False) as counter:
        y = F.conv2d(x, w, stride=_pair(case.get("stride", 1)),
                     padding=_pair(case.get("padding", 0)),
                     dilation=_pair(case.get("dilation", 1)), groups=groups)
    return {"args": {k: v for k, v in case.items() if k != "label"}, "label": case["label"],
            "flops": int(counter.get_total_flops()), "output_hw": list(y.shape[2:])}


def attention_case(case):
    """Standard attention written as matmuls: S = Q·Kᵀ, O = softmax(S)·V (K, V repeated for
    grouped-query heads, as Hugging Face's ``repeat_kv`` does)."""
    b, h, d = case.get("batch", 1), case["n_heads"], case["head_dim"]
    hkv = case.get("n_kv_heads", h)
    q = torch.empty(b, h, case["q_len"], d, device="meta")
    k = torch.empty(b, hkv, case["kv_len"], d, device="meta")
    v = torch.empty(b, hkv, case["kv_len"], d, device="meta")
    with FlopCounterMode(display=False) as counter:
        k, v = k.repeat_interleave(h // hkv, dim=1), v.repeat_interleave(h // hkv, dim=1)
        scores = torch.matmul(q, k.transpose(-2, -1)) / d**0.5
        torch.matmul(torch.softmax(scores, dim=-1), v)
    return {"args": {k: v for k, v in case.items() if k != "label"}, "label": case["label"],
            "flops": int(counter.get_total_flops())}


def main(out: Path = OUT) -> None:
    data = {
        "generator": "tools/reference/conv_flops.py",
        "torch_version": torch.__version__,
        "python_version": sys.version.split()[0],
        "date": datetime.date.today().isoformat(),
        "counter": "torch.utils.flop_counter.FlopCounterMode, get_total_flops(); "
                   "2 FLOPs per multiply-add, bias and softmax not counted",
        "conv2d": [conv_case(c) for c in CONVS],
        "attention": [attention_case(c) for c in ATTENTION],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} ({len(data['conv2d'])} convolutions, {len(data['attention'])} "
          f"attention shapes, torch {torch.__version__})")


if __name__ == "__main__":
    main()
