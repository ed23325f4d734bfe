"""Reference FLOP counts for ``gpu_lessons.mfu``, measured with PyTorch's own counter.

Builds small pre-LN GPT models in plain torch and counts their matmul FLOPs with
``torch.utils.flop_counter.FlopCounterMode`` (2 FLOPs per multiply-add), forward and
forward + backward, then writes ``tests/data/torch_transformer_flops.json``.  The tests compare
``gpu_lessons.mfu.transformer_flops`` with every config in that file, so the package's formulas
are checked against an independent counter rather than against themselves.

torch is not a dependency of the course; run this from a throwaway environment::

    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch numpy
    /tmp/torchenv/bin/python tools/reference/transformer_flops.py

The model (one block, repeated ``n_layers`` times; x is the residual stream)::

    x = wte[tokens] + wpe[positions]                       (no FLOPs counted: lookups)
    x = x + proj(attention(qkv(norm1(x))))                 causal self-attention
    x = x + down(act(up(norm2(x))))                        GELU MLP, or
    x = x + down(silu(gate(norm2(x))) * up(norm2(x)))     SwiGLU MLP (gated)
    logits = lm_head(norm_f(x))                            untied LM head

How the attention core is written changes what FlopCounterMode sees, and the file records it:

* ``explicit``: ``q @ k^T`` and ``softmax(...) @ v`` as ``torch.matmul`` -> two ``aten.bmm``
  forward (4*b*s^2*h FLOPs), four backward: backward = 2x forward exactly.  The causal mask
  is applied with ``masked_fill``, so masked-out scores are still counted (the counter never
  discounts causality).
* ``sdpa_math``: ``F.scaled_dot_product_attention`` forced onto the MATH backend: it decomposes
  into the same ``bmm`` calls, so the count equals ``explicit``.
* ``sdpa`` with the default CPU backend dispatches to
  ``aten._scaled_dot_product_flash_attention_for_cpu``, which has no FLOP formula in
  FlopCounterMode: the attention core counts as 0 FLOPs, forward and backward.  Recorded under
  ``observations`` so a test can pin that fact.
* On CUDA the fused kernels (``_scaled_dot_product_flash_attention`` / ``_efficient_`` /
  ``_cudnn_``) are counted by ``sdpa_flop_count`` (2 bmm forward) and
  ``sdpa_backward_flop_count`` (5 bmm: it adds the recomputation of ``q @ k^T``), so the
  attention core's backward counts 2.5x its forward there.  This script runs on the CPU, so it
  evaluates those two formulas directly on the config's shapes and records the numbers.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import pathlib
import platform
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "torch_transformer_flops.json"

# Small shapes so the whole script runs in well under a minute on two cores.  They vary batch,
# sequence, width, heads (incl. grouped-query and head_dim != d_model/n_heads), MLP width
# (i = 4h and not), vocabulary, gating, norm type and bias, and the attention implementation.
CONFIGS = [
    dict(name="tiny", batch=2, seq_len=16, d_model=32, n_layers=2, d_ff=128, vocab_size=100,
         n_heads=4),
    dict(name="one-layer", batch=1, seq_len=64, d_model=64, n_layers=1, d_ff=256,
         vocab_size=257, n_heads=2),
    dict(name="narrow-mlp", batch=3, seq_len=32, d_model=48, n_layers=3, d_ff=96,
         vocab_size=50, n_heads=6),
    dict(name="attention-heavy", batch=4, seq_len=128, d_model=32, n_layers=2, d_ff=64,
         vocab_size=1000, n_heads=1),
    dict(name="sdpa-math", batch=2, seq_len=48, d_model=64, n_layers=2, d_ff=256,
         vocab_size=300, n_heads=4, attention="sdpa_math"),
    dict(name="gpt2-width", batch=1, seq_len=64, d_model=768, n_layers=1, d_ff=3072,
         vocab_size=50257, n_heads=12),
    dict(name="swiglu-tiny", batch=2, seq_len=16, d_model=32, n_layers=2, d_ff=88,
         vocab_size=100, n_heads=4, gated_mlp=True, bias=False, norm="rmsnorm",
         n_positions=0),
    dict(name="swiglu-wide", batch=1, seq_len=96, d_model=64, n_layers=2, d_ff=172,
         vocab_size=300, n_heads=8, gated_mlp=True, bias=False, norm="rmsnorm",
         n_positions=0),
    dict(name="swiglu-gqa", batch=2, seq_len=32, d_model=64, n_layers=2, d_ff=128,
         vocab_size=128, n_heads=8, n_kv_heads=2, gated_mlp=True, bias=False,
         norm="rmsnorm", n_positions=0),
    dict(name="head-dim-16", batch=2, seq_len=24, d_model=40, n_layers=1, d_ff=160,
         vocab_size=77, n_heads=4, head_dim=16),
    dict(name="swiglu-sdpa-math-bias", batch=3, seq_len=20, d_model=24, n_layers=3, d_ff=80,
         vocab_size=64, n_heads=3, gated_mlp=True, attention="sdpa_math"),
]

DEFAULTS = dict(gated_mlp=False, n_kv_heads=None, head_dim=None, bias=True, norm="layernorm",
                n_positions=None, attention="explicit")


class Scores(nn.Module):
    """q @ k^T: its own module so FlopCounterMode reports it as a component."""

    def forward(self, q, k):
        return torch.matmul(q, k.transpose(-2, -1))


class Mix(nn.Module):
    """softmax(scores) @ v."""

    def forward(self, p, v):
        return torch.matmul(p, v)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.h, self.kv = c["n_heads"], c["n_kv_heads"]
        self.dh = c["head_dim"]
        self.qkv = nn.Linear(c["d_model"], (self.h + 2 * self.kv) * self.dh, bias=c["bias"])
        self.proj = nn.Linear(self.h * self.dh, c["d_model"], bias=c["bias"])
        self.scores, self.mix = Scores(), Mix()
        self.mode = c["attention"]

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split([self.h * self.dh, self.kv * self.dh, self.kv * self.dh], -1)
        q = q.view(b, s, self.h, self.dh).transpose(1, 2)
        k = k.view(b, s, self.kv, self.dh).transpose(1, 2)
        v = v.view(b, s, self.kv, self.dh).transpose(1, 2)
        if self.kv != self.h:  # grouped-query: each K/V head serves h/kv query heads
            k = k.repeat_interleave(self.h // self.kv, dim=1)
            v = v.repeat_interleave(self.h // self.kv, dim=1)
        if self.mode == "explicit":
            att = self.scores(q, k) / math.sqrt(self.dh)
            causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~causal, float("-inf")).softmax(-1)
            y = self.mix(att, v)
        elif self.mode == "sdpa_math":
            with sdpa_kernel(SDPBackend.MATH):
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # "sdpa": whatever backend torch picks on this device
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, s, self.h * self.dh))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, i, bias = c["d_model"], c["d_ff"], c["bias"]
        self.gated = c["gated_mlp"]
        self.up = nn.Linear(h, i, bias=bias)
        self.gate = nn.Linear(h, i, bias=bias) if self.gated else None
        self.down = nn.Linear(i, h, bias=bias)

    def forward(self, x):
        if self.gated:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.down(F.gelu(self.up(x)))


def norm(c):
    if c["norm"] == "rmsnorm":
        return nn.RMSNorm(c["d_model"])
    return nn.LayerNorm(c["d_model"], bias=c["bias"])


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm1, self.attn, self.norm2, self.mlp = norm(c), Attention(c), norm(c), MLP(c)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab_size"], c["d_model"])
        self.wpe = nn.Embedding(c["n_positions"], c["d_model"]) if c["n_positions"] else None
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        self.norm_f = norm(c)
        self.lm_head = nn.Linear(c["d_model"], c["vocab_size"], bias=False)  # untied

    def forward(self, tokens):
        x = self.wte(tokens)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm_f(x))


def complete(cfg):
    c = {**DEFAULTS, **cfg}
    c["n_kv_heads"] = c["n_kv_heads"] or c["n_heads"]
    c["head_dim"] = c["head_dim"] or c["d_model"] // c["n_heads"]
    if c["n_positions"] is None:
        c["n_positions"] = c["seq_len"]
    return c


def _plain(counts):
    return {str(op).removeprefix("aten.").split(".")[0]: int(n) for op, n in counts.items()}


# Module-path suffix -> the component name gpu_lessons.mfu uses.
COMPONENT_OF = {"attn.qkv": "qkv", "attn.proj": "attn_out", "attn.scores": "attn_scores",
                "attn.mix": "attn_values", "mlp.up": "mlp_up", "mlp.gate": "mlp_gate",
                "mlp.down": "mlp_down", "lm_head": "logits"}


def components(per_module):
    out = {}
    for path, counts in per_module.items():
        for suffix, name in COMPONENT_OF.items():
            if path.endswith("." + suffix):
                out[name] = out.get(name, 0) + sum(int(n) for n in counts.values())
    return out


def measure(c, seed=0):
    torch.manual_seed(seed)
    model = GPT(c)
    tokens = torch.randint(0, c["vocab_size"], (c["batch"], c["seq_len"]))
    targets = torch.randint(0, c["vocab_size"], (c["batch"], c["seq_len"]))
    with FlopCounterMode(display=False) as fwd:
        logits = model(tokens)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    with FlopCounterMode(display=False) as bwd:
        loss.backward()
    f, b = fwd.get_total_flops(), bwd.get_total_flops()
    per_module = fwd.get_flop_counts()
    params = {
        "total": sum(p.numel() for p in model.parameters()),
        "token_embedding": model.wte.weight.numel(),
        "position_embedding": model.wpe.weight.numel() if model.wpe is not None else 0,
        "lm_head": model.lm_head.weight.numel(),
    }
    return {
        "forward_flops": int(f),
        "backward_flops": int(b),
        "forward_backward_flops": int(f + b),
        "forward_by_op": _plain(per_module["Global"]),
        "backward_by_op": _plain(bwd.get_flop_counts()["Global"]),
        "forward_by_component": components(per_module),
        "parameters": params,
    }


def fused_sdpa_formulas(c):
    """What FlopCounterMode would count for a CUDA fused SDPA kernel, on this config's shapes."""
    b, s, h, d = c["batch"], c["seq_len"], c["n_heads"], c["head_dim"]
    q, kv = (b, h, s, d), (b, c["n_kv_heads"], s, d)
    per_layer_fwd = flop_counter.sdpa_flop_count(q, kv, kv)
    per_layer_bwd = flop_counter.sdpa_backward_flop_count(q, q, kv, kv)
    return {"attention_core_forward_flops": int(per_layer_fwd * c["n_layers"]),
            "attention_core_backward_flops": int(per_layer_bwd * c["n_layers"])}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    start = time.perf_counter()
    results = []
    for cfg in CONFIGS:
        c = complete(cfg)
        results.append({"name": c.pop("name"), "config": c, **measure(c)})
        print(f"{results[-1]['name']:>24}: forward {results[-1]['forward_flops']:,} FLOPs, "
              f"backward {results[-1]['backward_flops']:,} FLOPs")

    # The default CPU SDPA kernel, and the fused-kernel formulas, on one shape.
    probe = complete(dict(CONFIGS[0], name="sdpa-cpu-default", attention="sdpa"))
    probe_name = probe.pop("name")
    observations = {
        "sdpa_cpu_default": {
            "name": probe_name, "config": probe, **measure(probe),
            "note": "F.scaled_dot_product_attention on CPU dispatches to "
                    "aten._scaled_dot_product_flash_attention_for_cpu, which FlopCounterMode "
                    "does not count: the attention core contributes 0 FLOPs here."},
        "sdpa_fused_cuda_formulas": {
            "name": CONFIGS[0]["name"], **fused_sdpa_formulas(complete(CONFIGS[0])),
            "note": "torch.utils.flop_counter.sdpa_flop_count / sdpa_backward_flop_count, "
                    "used for the CUDA flash/efficient/cudnn SDPA ops: backward counts 5 bmm "
                    "(it includes recomputing q @ k^T), i.e. 2.5x the forward attention core."},
    }
    data = {
        "generator": "tools/reference/transformer_flops.py",
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "counter": "torch.utils.flop_counter.FlopCounterMode (2 FLOPs per multiply-add; "
                   "mm/addmm/bmm only: embeddings, norms, softmax, activations count 0)",
        "model": "pre-LN GPT: token (+ learned position) embedding, n_layers x [norm, causal "
                 "self-attention, norm, MLP], final norm, untied LM head without bias",
        "configs": results,
        "observations": observations,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
