"""Transformer FLOPs and parameters: what one training step of a GPT costs, counted exactly.

Conventions (the same as ``torch.utils.flop_counter.FlopCounterMode``):

* a matmul (m x k) @ (k x n) is 2·m·n·k FLOPs: one multiply-add is 2 FLOPs;
* only matmuls count: embeddings, norms, softmax, activations, the loss are ~0 next to them;
* causal masking is not discounted: the full s x s score matrix is counted;
* backward = 2 x forward (one matmul for the input gradient, one for the weight gradient),
  so training = 3 x forward; full activation recomputation adds one more forward of every
  transformer layer (the LM head is not recomputed), which is HFU, not MFU.

The model is a standard pre-LN GPT with an untied LM head; per layer, for batch b, sequence s,
width h, MLP width i, H query heads and K key/value heads of size d (H·d = h usually):

    QKV projections    2·b·s·h·(H + 2K)·d      (6·b·s·h² for plain multi-head attention)
    output projection  2·b·s·H·d·h             (2·b·s·h²)
    scores  Q·Kᵀ       2·b·H·s²·d              (2·b·s²·h)
    attention · V      2·b·H·s²·d              (2·b·s²·h)
    MLP up, down       2·b·s·h·i each          (a gated MLP, e.g. SwiGLU, adds a gate: 3 GEMMs)
    LM-head logits     2·b·s·h·V               (once, not per layer)

That is 8·b·s·h² + 4·b·s²·h for attention and 4·b·s·h·i (6·b·s·h·i gated) for the MLP, the
corrected forms of the often-quoted 4sh² + 2s²h and 8shi (docs/misconceptions.md, M29 and M30;
Megatron-LM, Narayanan et
al. 2021, arXiv 2104.04473, and Korthikanti et al. 2022, arXiv 2205.05198).  The counts
equal FlopCounterMode's on a torch model (``tools/reference/transformer_flops.py``).

>>> f = transformer_flops(batch=8, seq_len=1024, d_model=768, n_layers=12, d_ff=3072,
...                       vocab_size=50257, n_heads=12)
>>> f.training == 3 * f.forward
True
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _validate
from ._format import Readout, Row, Table
from ._format import percent as _pct
from ._format import si as _si

#: The components of :class:`TransformerFlops`, in the order of a forward pass.
COMPONENTS = ("qkv", "attn_out", "attn_scores", "attn_values", "mlp_up", "mlp_gate",
              "mlp_down", "logits")

COMPONENT_LABELS = {
    "qkv": "QKV projections",
    "attn_out": "attention output projection",
    "attn_scores": "attention scores Q·Kᵀ",
    "attn_values": "attention · V",
    "mlp_up": "MLP up",
    "mlp_gate": "MLP gate",
    "mlp_down": "MLP down",
    "logits": "LM-head logits",
}

#: The formula of each component, for tables and hover text (symbols as in the module docstring).
FORMULAS = {
    "qkv": "2·b·s·h·(H+2K)·d × L",
    "attn_out": "2·b·s·H·d·h × L",
    "attn_scores": "2·b·H·s²·d × L",
    "attn_values": "2·b·H·s²·d × L",
    "mlp_up": "2·b·s·h·i × L",
    "mlp_gate": "2·b·s·h·i × L",
    "mlp_down": "2·b·s·i·h × L",
    "logits": "2·b·s·h·V",
}


# -- argument checks ---------------------------------------------------------------------------

def _heads(d_model: int, n_heads, n_kv_heads, head_dim) -> tuple[int, int, int]:
    """Check and complete (H, K, d): query heads, key/value heads, head size."""
    n_heads = _validate.integer("n_heads", n_heads, low=1)
    if head_dim is None:
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads} "
                             "(or pass head_dim)")
        head_dim = d_model // n_heads
    head_dim = _validate.integer("head_dim", head_dim, low=1)
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    n_kv_heads = _validate.integer("n_kv_heads", n_kv_heads, low=1, high=n_heads)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads} "
                         "(each key/value head serves n_heads/n_kv_heads query heads)")
    return n_heads, n_kv_heads, head_dim


# -- exact FLOP count ---------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class TransformerFlops(Table):
    """Matmul FLOPs of one step of a pre-LN GPT, per component, summed over layers (forward).

    ``forward``, ``backward`` (= 2 x forward), ``training`` (= 3 x forward) and
    ``training_recompute`` (training + one more forward of every transformer layer: the
    hardware FLOPs of full activation recomputation) are totals for the whole batch.
    """

    batch: int
    seq_len: int
    d_model: int
    n_layers: int
    d_ff: int
    vocab_size: int
    n_heads: int
    gated_mlp: bool
    n_kv_heads: int
    head_dim: int
    qkv: int
    attn_out: int
    attn_scores: int
    attn_values: int
    mlp_up: int
    mlp_gate: int
    mlp_down: int
    logits: int

    @property
    def components(self) -> dict[str, int]:
        """Forward FLOPs per component (the gate only for a gated MLP)."""
        return {c: getattr(self, c) for c in COMPONENTS if c != "mlp_gate" or self.gated_mlp}

    @property
    def shares(self) -> dict[str, float]:
        """Each component's share of the forward FLOPs (component / forward; they sum to 1)."""
        fwd = self.forward
        return {c: v / fwd for c, v in self.components.items()}

    @property
    def tokens(self) -> int:
        """Tokens in one step: batch x seq_len."""
        return self.batch * self.seq_len

    @property
    def attention(self) -> int:
        """Attention FLOPs, forward: projections 8·b·s·h² plus core 4·b·s²·h (x layers)."""
        return self.qkv + self.attn_out + self.attn_scores + self.attn_values

    @property
    def mlp(self) -> int:
        """MLP FLOPs, forward: 4·b·s·h·i, or 6·b·s·h·i gated (x layers)."""
        return self.mlp_up + self.mlp_gate + self.mlp_down

    @property
    def layers_forward(self) -> int:
        """Forward FLOPs of the transformer layers alone (everything but the LM head)."""
        return self.attention + self.mlp

    @property
    def forward(self) -> int:
        return self.layers_forward + self.logits

    @property
    def backward(self) -> int:
        """2 x forward: each matmul needs one for the input gradient and one for the weights."""
        return 2 * self.forward

    @property
    def training(self) -> int:
        """Model FLOPs of a training step: forward + backward = 3 x forward (MFU counts this)."""
        return self.forward + self.backward

    @property
    def recomputation(self) -> int:
        """Extra FLOPs of full activation recomputation: one more forward of every layer."""
        return self.layers_forward

    @property
    def training_recompute(self) -> int:
        """Hardware FLOPs of a step with full recomputation (HFU counts this)."""
        return self.training + self.recomputation

    @property
    def forward_per_token(self) -> float:
        return self.forward / self.tokens

    @property
    def training_per_token(self) -> float:
        return self.training / self.tokens

    def parameters(self, **kw) -> ParameterCount:
        """:func:`parameter_count` for this shape (keywords: bias, norm, n_positions, tied)."""
        kw.setdefault("n_positions", self.seq_len)
        return parameter_count(d_model=self.d_model, n_layers=self.n_layers, d_ff=self.d_ff,
                               vocab_size=self.vocab_size, n_heads=self.n_heads,
                               n_kv_heads=self.n_kv_heads, head_dim=self.head_dim,
                               gated_mlp=self.gated_mlp, **kw)

    def _shape(self) -> str:
        extra = ""
        if self.n_kv_heads != self.n_heads:
            extra += f", n_kv_heads={self.n_kv_heads}"
        if self.head_dim * self.n_heads != self.d_model:
            extra += f", head_dim={self.head_dim}"
        return (f"batch={self.batch}, seq_len={self.seq_len}, d_model={self.d_model}, "
                f"n_layers={self.n_layers}, d_ff={self.d_ff}, vocab_size={self.vocab_size}, "
                f"n_heads={self.n_heads}{extra}, gated_mlp={self.gated_mlp}")

    def __repr__(self) -> str:
        return (f"TransformerFlops({self._shape()}): forward {_si(self.forward, 'FLOP')}, "
                f"training {_si(self.training, 'FLOP')} (3 × forward), "
                f"with recomputation {_si(self.training_recompute, 'FLOP')}; "
                f"{_si(self.training_per_token, 'FLOP')}/token for training")

    def table(self):
        """Each matmul's FLOPs and share of the forward pass, then forward, backward and
        training."""
        fwd = self.forward
        shares = self.shares
        rows = [(COMPONENT_LABELS[c], FORMULAS[c], _si(v, "FLOP"), _pct(shares[c]))
                for c, v in self.components.items()]
        rows += [
            ("forward", "sum", _si(fwd, "FLOP"), _pct(1)),
            ("backward", "2 × forward", _si(self.backward, "FLOP"), _pct(2)),
            ("training (MFU)", "3 × forward", _si(self.training, "FLOP"), _pct(3)),
            ("training with full recomputation (HFU)", "+ forward of the layers",
             _si(self.training_recompute, "FLOP"), _pct(self.training_recompute / fwd)),
            ("training per token", "training / (b·s)", _si(self.training_per_token, "FLOP"),
             ""),
        ]
        return (f"Matmul FLOPs per step: {self._shape()}",
                ("component", "formula", "FLOPs", "% of forward"), rows)


def transformer_flops(batch, seq_len, d_model, n_layers, d_ff, vocab_size, n_heads,
                      gated_mlp=False, *, n_kv_heads=None, head_dim=None) -> TransformerFlops:
    """Matmul FLOPs of a pre-LN GPT with an untied LM head, as FlopCounterMode counts them.

    ``n_kv_heads`` (grouped-query attention) and ``head_dim`` (when n_heads x head_dim is not
    d_model) are optional; the defaults are plain multi-head attention.  Formulas: see the
    module docstring.  Checked against torch.utils.flop_counter on 11 small models, forward and
    forward + backward (``tests/data/torch_transformer_flops.json``).
    """
    b = _validate.integer("batch", batch, low=1)
    s = _validate.integer("seq_len", seq_len, low=1)
    h = _validate.integer("d_model", d_model, low=1)
    L = _validate.integer("n_layers", n_layers, low=1)
    i = _validate.integer("d_ff", d_ff, low=1)
    V = _validate.integer("vocab_size", vocab_size, low=1)
    gated = _validate.flag("gated_mlp", gated_mlp)
    H, K, d = _heads(h, n_heads, n_kv_heads, head_dim)
    mlp = 2 * b * s * h * i * L
    return TransformerFlops(
        batch=b, seq_len=s, d_model=h, n_layers=L, d_ff=i, vocab_size=V, n_heads=H,
        gated_mlp=gated, n_kv_heads=K, head_dim=d,
        qkv=2 * b * s * h * (H + 2 * K) * d * L,
        attn_out=2 * b * s * H * d * h * L,
        # GQA shares K/V heads but every query head still scores all s keys.
        attn_scores=2 * b * H * s * s * d * L,
        attn_values=2 * b * H * s * s * d * L,
        mlp_up=mlp,
        mlp_gate=mlp if gated else 0,
        mlp_down=mlp,
        logits=2 * b * s * h * V,
    )


# -- parameters ---------------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class ParameterCount(Readout):
    """Parameters of a pre-LN GPT, split the way scaling-law papers need them.

    ``non_embedding`` (Kaplan et al. 2020's N; PaLM App. B's N) excludes the token and
    position embeddings and the LM head; it includes biases and norm weights.
    ``matmul_weights`` counts only the weights that multiply activations (layer GEMMs and
    the LM head): 6 x matmul_weights + 12·L·H·d·s is the exact training FLOPs per token.
    """

    layer_weights: int
    layer_biases: int
    norms: int
    token_embedding: int
    position_embedding: int
    lm_head: int

    @property
    def non_embedding(self) -> int:
        return self.layer_weights + self.layer_biases + self.norms

    @property
    def embedding(self) -> int:
        return self.token_embedding + self.position_embedding

    @property
    def total(self) -> int:
        return self.non_embedding + self.embedding + self.lm_head

    @property
    def matmul_weights(self) -> int:
        return self.layer_weights + self.lm_head

    def readout_title(self) -> str:
        return "Parameters"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("layer weights (GEMMs)", self.layer_weights),
                Row("layer biases", self.layer_biases), Row("norms", self.norms),
                Row("non-embedding N", self.non_embedding),
                Row("token embedding", self.token_embedding),
                Row("position embedding", self.position_embedding),
                Row("LM head (untied)", self.lm_head), Row("total", self.total))


def parameter_count(*, d_model, n_layers, d_ff, vocab_size, n_heads=None, gated_mlp=False,
                    n_kv_heads=None, head_dim=None, bias=True, norm="layernorm",
                    n_positions=0, tied_embeddings=False) -> ParameterCount:
    """Parameters of a pre-LN GPT: ``n_layers`` x [norm, attention, norm, MLP], final norm.

    Per layer: QKV h·(H + 2K)·d, output H·d·h, MLP 2·h·i (3·h·i gated), with biases if
    ``bias``; a LayerNorm has 2·h parameters (h without bias), an RMSNorm h.  Embeddings:
    V·h tokens plus ``n_positions``·h learned positions (0 for RoPE models); an untied LM head
    adds V·h.  GPT-2 small (h=768, 12 layers, i=3072, V=50257, 1024 positions, tied): 124,439,808;
    Llama-2 7B (h=4096, 32 layers, SwiGLU i=11008, V=32000, RMSNorm, no bias, untied):
    6,738,415,616.
    """
    h = _validate.integer("d_model", d_model, low=1)
    L = _validate.integer("n_layers", n_layers, low=1)
    i = _validate.integer("d_ff", d_ff, low=1)
    V = _validate.integer("vocab_size", vocab_size, low=1)
    P = _validate.integer("n_positions", n_positions, low=0)
    gated = _validate.flag("gated_mlp", gated_mlp)
    bias = _validate.flag("bias", bias)
    tied = _validate.flag("tied_embeddings", tied_embeddings)
    _validate.choice("norm", norm, ("layernorm", "rmsnorm"))
    if n_heads is None:
        if n_kv_heads is not None or head_dim is not None:
            raise ValueError("n_heads is needed when n_kv_heads or head_dim is given")
        n_heads = 1  # parameter counts of plain multi-head attention do not depend on it
    H, K, d = _heads(h, n_heads, n_kv_heads, head_dim)
    n_mlp = 3 if gated else 2
    weights = L * (h * (H + 2 * K) * d + H * d * h + n_mlp * h * i)
    biases = L * ((H + 2 * K) * d + h + (n_mlp - 1) * i + h) if bias else 0
    per_norm = h * (2 if norm == "layernorm" and bias else 1)
    return ParameterCount(layer_weights=weights, layer_biases=biases,
                          norms=(2 * L + 1) * per_norm, token_embedding=V * h,
                          position_embedding=P * h, lm_head=0 if tied else V * h)


# -- published model shapes ----------------------------------------------------------------------

@dataclass(frozen=True)
class Preset:
    """A model shape with the source of every number."""

    label: str
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    vocab_size: int
    seq_len: int
    gated_mlp: bool
    bias: bool
    norm: str
    learned_positions: bool
    tied_embeddings: bool
    source: str

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


_GPT2 = ("Radford et al. 2019, 'Language Models are Unsupervised Multitask Learners', Table 2 "
         "(layers, d_model; vocabulary 50,257; context 1024); heads from the released "
         "configs (Hugging Face openai-community/{}: n_head {}); MLP width 4·d_model")

#: Model shapes the MFU calculator offers, each number with its source.
#: GPT-2: LayerNorm with biases, learned positions, tied embeddings.
#: Llama 2: SwiGLU (gated MLP), RMSNorm, no biases, rotary positions, untied head.
PRESETS = {
    "gpt2-small": Preset("GPT-2 small (124M)", 768, 12, 12, 3072, 50257, 1024, False, True,
                         "layernorm", True, True, _GPT2.format("gpt2", 12)),
    "gpt2-medium": Preset("GPT-2 medium (355M)", 1024, 24, 16, 4096, 50257, 1024, False, True,
                          "layernorm", True, True, _GPT2.format("gpt2-medium", 16)),
    "gpt2-large": Preset("GPT-2 large (774M)", 1280, 36, 20, 5120, 50257, 1024, False, True,
                         "layernorm", True, True, _GPT2.format("gpt2-large", 20)),
    "gpt2-xl": Preset("GPT-2 XL (1.5B)", 1600, 48, 25, 6400, 50257, 1024, False, True,
                      "layernorm", True, True, _GPT2.format("gpt2-xl", 25)),
    "llama-2-7b": Preset("Llama-2-7B", 4096, 32, 32, 11008, 32000, 4096, True, False,
                         "rmsnorm", False, False,
                         "Touvron et al. 2023, 'Llama 2', arXiv 2307.09288, Table 1 (context "
                         "4096) and the released config (Hugging Face meta-llama/Llama-2-7b-hf: "
                         "hidden 4096, intermediate 11008, 32 layers, 32 heads, 32 KV heads, "
                         "vocabulary 32,000)"),
    "gpt3-175b": Preset("GPT-3 175B", 12288, 96, 96, 49152, 50257, 2048, False, True,
                        "layernorm", True, True,
                        "Brown et al. 2020, 'Language Models are Few-Shot Learners', arXiv "
                        "2005.14165, Table 2.1 (96 layers, d_model 12288, 96 heads of 128, "
                        "context 2048; MLP width 4·d_model; GPT-2's 50,257-token vocabulary)"),
}

# -- estimates: 6N and PaLM's 6N + 12·L·H·Q·T ----------------------------------------------------

def six_n_flops_per_token(n_params) -> float:
    """Training FLOPs per token ≈ 6N (Kaplan et al. 2020, §2.1): 2N forward + 4N backward.

    Ignores attention over the sequence; with N = non-embedding parameters it also ignores
    the LM head (2·h·V per token forward), which dominates small models with big vocabularies.
    """
    return 6.0 * _validate.real("n_params", n_params, low=0)


def palm_flops_per_token(n_params, n_layers, n_heads, head_dim, seq_len) -> float:
    """Training FLOPs per token = 6N + 12·L·H·Q·T (PaLM, arXiv 2204.02311, App. B).

    N non-embedding parameters, L layers, H heads, Q head size, T sequence length.  The
    attention term is 3 x (Q·Kᵀ + A·V) = 3 x 4·T·H·Q per token per layer, with no causal
    discount, exactly what FlopCounterMode counts.
    """
    n = _validate.real("n_params", n_params, low=0)
    L = _validate.integer("n_layers", n_layers, low=1)
    H = _validate.integer("n_heads", n_heads, low=1)
    Q = _validate.integer("head_dim", head_dim, low=1)
    T = _validate.integer("seq_len", seq_len, low=1)
    return 6.0 * n + 12.0 * L * H * Q * T


@dataclass(frozen=True, repr=False)
class EstimateComparison(Table):
    """6N and 6N + 12·L·H·Q·T against the exact count, training FLOPs per token, vs seq_len."""

    seq_lens: tuple[int, ...]
    exact: tuple[float, ...]
    six_n: tuple[float, ...]
    palm: tuple[float, ...]
    n_params: int
    include_lm_head: bool

    @property
    def six_n_error(self) -> tuple[float, ...]:
        """Relative error of 6N: estimate / exact - 1 (negative = underestimate)."""
        return tuple(e / x - 1 for e, x in zip(self.six_n, self.exact, strict=True))

    @property
    def palm_error(self) -> tuple[float, ...]:
        return tuple(e / x - 1 for e, x in zip(self.palm, self.exact, strict=True))

    def __repr__(self) -> str:
        worst6 = max(self.six_n_error, key=abs)
        worstp = max(self.palm_error, key=abs)
        return (f"EstimateComparison(N={self.n_params:,}, seq_len {self.seq_lens[0]}.."
                f"{self.seq_lens[-1]}: 6N off by up to {_pct(worst6, signed=True)}, "
                f"6N + 12·L·H·Q·T by up to {_pct(worstp, signed=True)})")

    def table(self):
        """Per sequence length: the exact count, 6N and 6N + 12·L·H·Q·T with their errors."""
        rows = [(s, _si(x, "FLOP"), _si(a, "FLOP"), _pct(ea, signed=True), _si(p, "FLOP"),
                 _pct(ep, signed=True))
                for s, x, a, ea, p, ep in zip(self.seq_lens, self.exact, self.six_n,
                                              self.six_n_error, self.palm, self.palm_error,
                                              strict=True)]
        what = "incl. LM head" if self.include_lm_head else "non-embedding"
        return (f"Training FLOPs per token (N = {self.n_params:,}, {what})",
                ("seq_len", "exact", "6N", "error", "6N + 12·L·H·Q·T", "error"), rows)


def compare_estimates(seq_lens, *, d_model, n_layers, d_ff, vocab_size, n_heads,
                      gated_mlp=False, n_kv_heads=None, head_dim=None, bias=True,
                      norm="layernorm", include_lm_head=False) -> EstimateComparison:
    """How far 6N and PaLM's 6N + 12·L·H·Q·T are from the exact count, for each seq_len.

    N is the non-embedding parameter count (``include_lm_head=True`` adds the LM head's V·h,
    as nanoGPT does through its tied embedding).  6N misses the attention core (grows with
    seq_len) and, without the LM head, the logits; PaLM's formula recovers the first.
    """
    if isinstance(seq_lens, int) and not isinstance(seq_lens, bool):
        seq_lens = (seq_lens,)
    try:
        seq_lens = tuple(seq_lens)
    except TypeError:
        raise TypeError(f"seq_lens must be an int or a sequence of ints, got {seq_lens!r}") \
            from None
    if not seq_lens:
        raise ValueError("seq_lens must not be empty")
    seq_lens = tuple(_validate.integer("seq_lens item", s, low=1) for s in seq_lens)
    _validate.flag("include_lm_head", include_lm_head)
    params = parameter_count(d_model=d_model, n_layers=n_layers, d_ff=d_ff,
                             vocab_size=vocab_size, n_heads=n_heads, gated_mlp=gated_mlp,
                             n_kv_heads=n_kv_heads, head_dim=head_dim, bias=bias, norm=norm)
    n = params.non_embedding + (params.lm_head if include_lm_head else 0)
    # Per token, only the attention core depends on s (linearly): count one token at s = 1
    # and scale the core, instead of rebuilding the count for every s (keeps sliders fast).
    f1 = transformer_flops(1, 1, d_model, n_layers, d_ff, vocab_size, n_heads, gated_mlp,
                           n_kv_heads=n_kv_heads, head_dim=head_dim)
    core = f1.attn_scores + f1.attn_values
    exact = tuple(3.0 * (f1.forward - core + core * s) for s in seq_lens)
    palm = tuple(palm_flops_per_token(n, f1.n_layers, f1.n_heads, f1.head_dim, s)
                 for s in seq_lens)
    return EstimateComparison(seq_lens=seq_lens, exact=exact,
                              six_n=(six_n_flops_per_token(n),) * len(seq_lens),
                              palm=palm, n_params=n, include_lm_head=include_lm_head)


# -- Megatron-LM closed forms (i = 4h, plain multi-head attention) ------------------------------

def megatron_layer_forward_flops(batch, seq_len, d_model) -> float:
    """One layer's forward FLOPs with i = 4h: 24·b·s·h² + 4·b·s²·h (Megatron-LM).

    24bsh² = 8bsh² (QKV + output projections) + 16bsh² (MLP); 4bs²h = Q·Kᵀ + A·V.
    """
    b = _validate.integer("batch", batch, low=1)
    s = _validate.integer("seq_len", seq_len, low=1)
    h = _validate.integer("d_model", d_model, low=1)
    return 24.0 * b * s * h * h + 4.0 * b * s * s * h


def megatron_training_flops(batch, seq_len, n_layers, d_model, vocab_size, *,
                            recompute=False) -> float:
    """Training FLOPs of one step, i = 4h, untied logits, as the Megatron-LM papers write it.

    Without recomputation (Korthikanti et al. 2022, arXiv 2205.05198):
        72·b·s·l·h²·(1 + s/(6h) + V/(12·l·h))
    With full activation recomputation (Narayanan et al. 2021, arXiv 2104.04473, eq. 3):
        96·b·s·l·h²·(1 + s/(6h) + V/(16·l·h))
    The V term is 6·b·s·h·V in both: the LM head is not recomputed.
    """
    b = _validate.integer("batch", batch, low=1)
    s = _validate.integer("seq_len", seq_len, low=1)
    l = _validate.integer("n_layers", n_layers, low=1)
    h = _validate.integer("d_model", d_model, low=1)
    V = _validate.integer("vocab_size", vocab_size, low=1)
    if _validate.flag("recompute", recompute):
        return 96.0 * b * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    return 72.0 * b * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))


# -- often-quoted per-layer formulas, and their corrections ---------------------------------------

def attention_multiply_adds(seq_len, d_model) -> int:
    """The often-quoted self-attention cost per layer, 4·s·h² + 2·s²·h: multiply-adds.

    Wrong as FLOPs by a factor 2 (docs/misconceptions.md, M29); see :func:`attention_flops`.
    """
    s = _validate.integer("seq_len", seq_len, low=1)
    h = _validate.integer("d_model", d_model, low=1)
    return 4 * s * h * h + 2 * s * s * h


def attention_flops(seq_len, d_model, *, batch=1) -> int:
    """Self-attention FLOPs per layer, forward: 8·b·s·h² + 4·b·s²·h (Megatron-LM).

    QKV and output projections 4 GEMMs of 2·b·s·h², scores Q·Kᵀ and A·V 2·b·s²·h each.
    """
    s = _validate.integer("seq_len", seq_len, low=1)
    h = _validate.integer("d_model", d_model, low=1)
    b = _validate.integer("batch", batch, low=1)
    return 8 * b * s * h * h + 4 * b * s * s * h


def mlp_flops_doubled(seq_len, d_model, d_ff) -> int:
    """The often-quoted MLP cost per layer, 8·s·h·i: twice the true FLOPs
    (docs/misconceptions.md, M30); see :func:`mlp_flops`."""
    s = _validate.integer("seq_len", seq_len, low=1)
    h = _validate.integer("d_model", d_model, low=1)
    i = _validate.integer("d_ff", d_ff, low=1)
    return 8 * s * h * i


def mlp_flops(seq_len, d_model, d_ff, *, gated=False, batch=1) -> int:
    """MLP FLOPs per layer, forward: 4·b·s·h·i (two GEMMs), 6·b·s·h·i gated (three, SwiGLU)."""
    s = _validate.integer("seq_len", seq_len, low=1)
    h = _validate.integer("d_model", d_model, low=1)
    i = _validate.integer("d_ff", d_ff, low=1)
    b = _validate.integer("batch", batch, low=1)
    return (6 if _validate.flag("gated", gated) else 4) * b * s * h * i


def twice_forward_flops(forward_flops) -> float:
    """"x 2 for forward and backward": undercounts training by a third (docs/misconceptions.md,
    M31); see :func:`training_flops`."""
    return 2.0 * _validate.real("forward_flops", forward_flops, low=0)


def training_flops(forward_flops, *, recompute=False) -> float:
    """Training = forward + backward = 3 x forward (backward ≈ 2 x forward; Kaplan et al.
    2020 §2.1); full activation recomputation adds another forward: 4 x (hardware FLOPs)."""
    f = _validate.real("forward_flops", forward_flops, low=0)
    return (4.0 if _validate.flag("recompute", recompute) else 3.0) * f
