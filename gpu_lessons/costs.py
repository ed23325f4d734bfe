"""Cost models of common kernels: how many FLOPs they do and how many bytes they move.

Each function returns a :class:`KernelCost` whose ``intensity = flops / bytes`` (FLOP/byte) places
the kernel on a roofline (see :mod:`gpu_lessons.roofline`).  Conventions, used throughout:

* a multiply-add counts as **2 FLOPs** (as ``torch.utils.flop_counter`` counts matmuls and
  convolutions); :func:`conv2d_macs_no_input` keeps the often-quoted count, which takes
  multiply-adds for FLOPs and leaves out the input, and says so (docs/misconceptions.md, M16);
* ``bytes`` is DRAM traffic under a stated model, usually the *compulsory* traffic (every tensor
  moved once).  Real kernels move at least this much, so the intensity here is an upper bound;
* element sizes come from ``dtype`` (:data:`DTYPE_BYTES`).

>>> axpy(1_000_000)
KernelCost('axpy', 2 MFLOP, 12 MB, 0.167 FLOP/byte)
"""

from __future__ import annotations

import html
import math
import numbers
from dataclasses import dataclass

from . import _validate
from ._format import Table, binary_bytes
from ._format import intensity as _intensity
from ._format import si as _si
from ._math import cdiv

#: Bytes per element.  IEEE 754 binary64/32/16; bfloat16 is 16 bits; FP8 (E4M3 and E5M2) is
#: 8 bits (Micikevicius et al., "FP8 Formats for Deep Learning", arXiv 2209.05433).  TF32 is a
#: tensor-core compute mode on FP32 data, so it is stored as "fp32".
DTYPE_BYTES = {"fp64": 8, "fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype`` (one of :data:`DTYPE_BYTES`)."""
    if not isinstance(dtype, str):
        raise TypeError(f"dtype must be a string such as 'fp32', got {dtype!r} "
                        f"({type(dtype).__name__})")
    return DTYPE_BYTES[_validate.choice("dtype", dtype, DTYPE_BYTES)]


@dataclass(frozen=True, repr=False)
class KernelCost(Table):
    """Work and traffic of one kernel: ``flops`` (FLOPs), ``bytes`` (bytes moved to/from DRAM),
    ``intensity = flops / bytes`` (FLOP/byte), ``notes`` (the model and its source) and
    ``parts`` (``(label, flops, bytes)`` rows that sum to the totals).

    Build one for your own kernel with ``KernelCost("my kernel", flops, bytes)``; the intensity
    is computed when left out and checked when given.
    """

    name: str
    flops: float
    bytes: float
    intensity: float | None = None
    notes: str = ""
    parts: tuple[tuple[str, float, float], ...] = ()

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string, got {self.name!r}")
        flops = _count("flops", self.flops)
        nbytes = _count("bytes", self.bytes)
        if nbytes == 0:
            raise ValueError("bytes must be > 0: a kernel that moves no data has no arithmetic "
                             "intensity (FLOP/byte)")
        intensity = flops / nbytes
        if self.intensity is not None:
            given = _validate.real("intensity", self.intensity, low=0.0)
            if not math.isclose(given, intensity, rel_tol=1e-9):
                raise ValueError(f"intensity={given!r} disagrees with flops / bytes = "
                                 f"{flops} / {nbytes} = {intensity!r} FLOP/byte")
        object.__setattr__(self, "flops", flops)
        object.__setattr__(self, "bytes", nbytes)
        object.__setattr__(self, "intensity", intensity)
        object.__setattr__(self, "parts", tuple(
            (str(label), _count("parts flops", f), _count("parts bytes", b))
            for label, f, b in self.parts))

    def __repr__(self) -> str:
        return (f"KernelCost({self.name!r}, {_si(self.flops, 'FLOP')}, {_si(self.bytes, 'B')}, "
                f"{_intensity(self.intensity)})")

    def table(self):
        """The total and each part: FLOPs, bytes and (for the total) FLOP/byte."""
        rows = [("total", _si(self.flops, "FLOP"), _si(self.bytes, "B"),
                 _intensity(self.intensity))]
        rows += [(label, _si(f, "FLOP") if f else "–", _si(b, "B") if b else "–", "")
                 for label, f, b in self.parts]
        return self.name, ("", "FLOPs", "bytes", "intensity"), rows

    def _repr_html_(self) -> str:
        notes = f"<p><small>{html.escape(self.notes)}</small></p>" if self.notes else ""
        return super()._repr_html_() + notes


# -- elementwise and reductions ------------------------------------------------------------------

def elementwise(n, *, flops_per_element=1, reads=1, writes=1, dtype="fp32",
                name="elementwise") -> KernelCost:
    """A streaming kernel over ``n`` elements: ``flops = f * n``,
    ``bytes = (reads + writes) * n * s`` with ``s`` the element size.

    ``c = a + b`` is ``f = 1, reads = 2, writes = 1``: 1/12 FLOP/byte in FP32.  Every element is
    touched once, so no cache can help: the traffic is compulsory.
    """
    n = _validate.integer("n", n, low=1)
    f = _validate.real("flops_per_element", flops_per_element, low=0.0)
    reads = _validate.integer("reads", reads, low=0)
    writes = _validate.integer("writes", writes, low=0)
    if reads + writes == 0:
        raise ValueError("reads and writes are both 0: the kernel must move some data")
    s = dtype_bytes(dtype)
    flops = _exact(f * n)
    return KernelCost(
        name, flops, (reads + writes) * n * s,
        notes=f"{n:,} elements of {dtype} ({binary_bytes(s)}): {_si(f, 'FLOP')}, {reads} read(s) "
              f"and "
              f"{writes} write(s) per element",
        parts=(("arithmetic", flops, 0), ("reads", 0, reads * n * s),
               ("writes", 0, writes * n * s)))


def axpy(n, dtype="fp32") -> KernelCost:
    """``y = a*x + y`` over ``n`` elements: 2 FLOPs (a multiply-add) and 3 accesses per element
    (read x, read y, write y), i.e. 2 FLOP per 12 bytes = 1/6 FLOP/byte in FP32.

    Source: BLAS level-1 SAXPY; the scalar ``a`` stays in a register.
    """
    cost = elementwise(n, flops_per_element=2, reads=2, writes=1, dtype=dtype, name="axpy")
    return KernelCost("axpy", cost.flops, cost.bytes,
                      notes=f"y = a*x + y, {cost.notes}", parts=cost.parts)


def reduction(n, dtype="fp32") -> KernelCost:
    """Sum of ``n`` elements: ``n - 1`` additions (any reduction tree combines n values into one
    with n - 1 adds), reading ``n * s`` bytes and writing one element.  ≈ 1/4 FLOP/byte in FP32.
    """
    n = _validate.integer("n", n, low=1)
    s = dtype_bytes(dtype)
    return KernelCost(
        "reduction (sum)", n - 1, (n + 1) * s,
        notes=f"sum of {n:,} {dtype} values: n - 1 adds; read n elements, write 1",
        parts=(("adds", n - 1, 0), ("read input", 0, n * s), ("write result", 0, s)))


# -- GEMM ----------------------------------------------------------------------------------------

def gemm(m, n, k, dtype="fp32") -> KernelCost:
    """``C = A @ B`` with A m×k, B k×n: ``2·m·n·k`` FLOPs and the *compulsory* traffic
    ``(m·k + k·n + m·n) · s`` (each matrix moved once).  No kernel can move less, so this is the
    highest intensity a GEMM can reach: ``2N/(3s)`` FLOP/byte for square N.
    """
    m, n, k = _validate.dimensions(m=m, n=n, k=k)
    s = dtype_bytes(dtype)
    return _gemm_cost("GEMM (each operand moved once)", m, n, k, s, m * k, k * n,
                      f"{m}×{k} @ {k}×{n} in {dtype}: compulsory traffic, every matrix "
                      "read or written exactly once")


def gemm_naive(m, n, k, dtype="fp32") -> KernelCost:
    """The textbook one-thread-per-output kernel with every operand loaded from DRAM: each of the
    ``m·n`` outputs reads a row of A and a column of B (``2k`` loads) and writes once, so
    ``bytes = (2·m·n·k + m·n) · s`` and intensity ≈ ``1/s``: 0.25 FLOP/byte in FP32.

    Source: Kirk & Hwu, *Programming Massively Parallel Processors* (4th ed.), ch. 5
    ("compute to global memory access ratio" of the simple matmul kernel: 0.25 OP/B).
    """
    m, n, k = _validate.dimensions(m=m, n=n, k=k)
    s = dtype_bytes(dtype)
    return _gemm_cost("GEMM naive (no reuse)", m, n, k, s, m * n * k, m * n * k,
                      f"{m}×{k} @ {k}×{n} in {dtype}: every multiply-add loads its A and B "
                      "element from DRAM (no cache reuse)")


def gemm_tiled(m, n, k, *, tile=None, tile_m=None, tile_n=None, dtype="fp32") -> KernelCost:
    """Shared-memory tiled GEMM: each thread block computes a ``tile_m × tile_n`` tile of C,
    stepping along k and staging the A and B tiles it needs in shared memory.

    Derivation.  The ``⌈m/tile_m⌉ · ⌈n/tile_n⌉`` blocks each read a ``tile_m × k`` strip of A and a
    ``k × tile_n`` strip of B (edge blocks read only the in-bounds part).  So every element of A
    is read once per block column (``⌈n/tile_n⌉`` times), every element of B once per block row
    (``⌈m/tile_m⌉`` times), and C is written once::

        bytes = s · (m·k·⌈n/tile_n⌉ + k·n·⌈m/tile_m⌉ + m·n)

    For square ``N`` and ``T × T`` tiles that is ``s·(2N³/T + N²)``: tiling cuts the A and B
    traffic by the tile size, and intensity grows from ``1/s`` to ≈ ``T/s`` — 0.25 → 4 FLOP/byte
    for 16×16 FP32 tiles (Kirk & Hwu, PMPP 4th ed., ch. 5, "A tiled matrix multiplication
    kernel").  ``tile = 1`` is the naive kernel; a tile as large as C is :func:`gemm`.  The k-step
    of the tile changes shared-memory size, not DRAM traffic; caches (L2) are ignored.
    """
    m, n, k = _validate.dimensions(m=m, n=n, k=k)
    if tile is not None:
        if tile_m is not None or tile_n is not None:
            raise ValueError("give either tile (square tiles) or tile_m and tile_n, not both")
        tile_m = tile_n = _validate.integer("tile", tile, low=1)
    elif tile_m is None or tile_n is None:
        raise ValueError("gemm_tiled needs tile=T (square) or both tile_m and tile_n; "
                         f"got tile_m={tile_m!r}, tile_n={tile_n!r}")
    tile_m = _validate.integer("tile_m", tile_m, low=1)
    tile_n = _validate.integer("tile_n", tile_n, low=1)
    s = dtype_bytes(dtype)
    col_blocks, row_blocks = cdiv(n, tile_n), cdiv(m, tile_m)
    return _gemm_cost(f"GEMM tiled {tile_m}×{tile_n}", m, n, k, s,
                      m * k * col_blocks, k * n * row_blocks,
                      f"{m}×{k} @ {k}×{n} in {dtype}, {tile_m}×{tile_n} block tiles: A read "
                      f"{col_blocks}×, B read {row_blocks}×, C written once (PMPP ch. 5)")


def _gemm_cost(name, m, n, k, s, a_reads, b_reads, notes) -> KernelCost:
    flops = 2 * m * n * k
    return KernelCost(name, flops, (a_reads + b_reads + m * n) * s, notes=notes,
                      parts=(("multiply-adds (2 FLOPs each)", flops, 0), ("read A", 0, a_reads * s),
                             ("read B", 0, b_reads * s), ("write C", 0, m * n * s)))


# -- convolution ---------------------------------------------------------------------------------

def conv_output_size(x, k, *, padding=0, stride=1, dilation=1) -> int:
    """Output side ``M = ⌊(X + 2·padding − dilation·(K − 1) − 1) / stride⌋ + 1``.

    With ``dilation = 1`` this is the usual ``M = (X − K + 2·Padding)/Stride + 1``, floored.
    We floor, as PyTorch does (``torch.nn.Conv2d`` documentation, "Shape"): when the division is
    not exact the window simply never reaches the last rows/columns.  A window that does not fit
    even once is refused.
    """
    x = _validate.integer("x", x, low=1)
    k = _validate.integer("k", k, low=1)
    padding = _validate.integer("padding", padding, low=0)
    stride = _validate.integer("stride", stride, low=1)
    dilation = _validate.integer("dilation", dilation, low=1)
    span = dilation * (k - 1) + 1
    if x + 2 * padding < span:
        raise ValueError(f"k={k}: the kernel (span {span} with dilation {dilation}) is larger than "
                         f"the padded input (x + 2·padding = {x + 2 * padding}); no output")
    return (x + 2 * padding - span) // stride + 1


def conv2d_macs_no_input(x, k, c_in, c_out, *, padding=0, stride=1) -> KernelCost:
    """The often-quoted conv-layer formulas, unchanged (square input and kernel, FP32, one image)::

        "FLOPs" = M²·K²·Cin·Cout            (really multiply-adds: FLOPs are 2× this)
        bytes   = (K²·Cin·Cout + M²·Cout)·4  (weights + output; the input map is left out)

    Kept to compare with :func:`conv2d`, which corrects both (docs/misconceptions.md, M16).  ``M`` is floored
    as in :func:`conv_output_size`.
    """
    x, k = _validate.integer("x", x, low=1), _validate.integer("k", k, low=1)
    c_in = _validate.integer("c_in", c_in, low=1)
    c_out = _validate.integer("c_out", c_out, low=1)
    out = conv_output_size(x, k, padding=padding, stride=stride)
    macs = out * out * k * k * c_in * c_out
    weights, output = k * k * c_in * c_out * 4, out * out * c_out * 4
    return KernelCost(
        "conv2d (often-quoted formulas: multiply-adds as 'FLOPs', input not read)", macs,
        weights + output,
        notes="the often-quoted numbers: 'FLOPs' here counts multiply-adds (real FLOPs are 2×) "
              "and bytes omit reading the input map X²·Cin (docs/misconceptions.md, M16)",
        parts=(("multiply-adds (counted as FLOPs)", macs, 0), ("weights", 0, weights),
               ("output", 0, output)))


def conv2d(x, k, c_in, c_out, *, padding=0, stride=1, dilation=1, groups=1, batch=1,
           dtype="fp32") -> KernelCost:
    """A 2-D convolution layer (no bias), corrected from the often-quoted formulas (M16)::

        M     = ⌊(X + 2·padding − dilation·(K − 1) − 1) / stride⌋ + 1      (per side)
        FLOPs = 2 · batch · M_h·M_w · K_h·K_w · (Cin/groups) · Cout
        bytes = s · (K_h·K_w·(Cin/groups)·Cout + batch·X_h·X_w·Cin + batch·M_h·M_w·Cout)

    ``x``, ``k``, ``padding``, ``stride`` and ``dilation`` take an int (square) or an
    ``(height, width)`` pair.  FLOPs are counted as ``torch.utils.flop_counter`` counts
    convolutions (2 per multiply-add; the bias add is not counted); MobileNets (arXiv 1704.04861,
    eq. 2) counts the same multiply-adds once.  Bytes are compulsory traffic: weights, input map
    and output map each moved once (zero padding is not read from memory).
    """
    (xh, xw), (kh, kw) = _pair("x", x), _pair("k", k)
    (ph, pw), (sh, sw) = _pair("padding", padding, low=0), _pair("stride", stride)
    dh, dw = _pair("dilation", dilation)
    c_in = _validate.integer("c_in", c_in, low=1)
    c_out = _validate.integer("c_out", c_out, low=1)
    groups = _validate.integer("groups", groups, low=1)
    batch = _validate.integer("batch", batch, low=1)
    if c_in % groups or c_out % groups:
        raise ValueError(f"groups={groups} must divide both c_in={c_in} and c_out={c_out}")
    s = dtype_bytes(dtype)
    mh = conv_output_size(xh, kh, padding=ph, stride=sh, dilation=dh)
    mw = conv_output_size(xw, kw, padding=pw, stride=sw, dilation=dw)
    macs = batch * mh * mw * kh * kw * (c_in // groups) * c_out
    weights = kh * kw * (c_in // groups) * c_out * s
    inputs = batch * xh * xw * c_in * s
    outputs = batch * mh * mw * c_out * s
    notes = (f"{batch}×{c_in}×{xh}×{xw} input, {c_out} filters {kh}×{kw}, groups {groups}, "
             f"output {mh}×{mw}, {dtype}; FLOPs = 2 × multiply-adds; bytes = weights + input "
             "+ output, each moved once")
    if sh > dh * (kh - 1) + 1 or sw > dw * (kw - 1) + 1:
        notes += "; stride > kernel span skips input pixels, yet the whole input map is counted"
    return KernelCost("conv2d", 2 * macs, weights + inputs + outputs, notes=notes,
                      parts=(("multiply-adds (2 FLOPs each)", 2 * macs, 0), ("weights", 0, weights),
                             ("input map", 0, inputs), ("output map", 0, outputs)))


# -- attention -----------------------------------------------------------------------------------

def attention(q_len, kv_len, *, n_heads, head_dim, batch=1, n_kv_heads=None, causal=False,
              dtype="fp16", name="attention") -> KernelCost:
    """The attention core ``O = softmax(Q·Kᵀ/√d)·V`` for ``q_len`` queries over ``kv_len`` keys::

        FLOPs = 2·b·h·q·L·d  (Q·Kᵀ)  +  2·b·h·q·L·d  (A·V)        = 4·b·h·q·L·d
        bytes = s · (b·h·q·d  (read Q)  +  2·b·h_kv·L·d  (read K, V)  +  b·h·q·d  (write O))

    (b batch, h query heads, h_kv key/value heads — fewer with grouped-query attention, d head
    dim, s element size).  The traffic is that of a fused kernel that never writes the q×L score
    matrix to DRAM (FlashAttention, arXiv 2205.14135); softmax and scaling FLOPs are not counted,
    as ``torch.utils.flop_counter`` does not count them.  With ``causal=True`` only the unmasked
    query-key pairs are counted (the flop counter does not discount the mask; default False).
    """
    q_len = _validate.integer("q_len", q_len, low=1)
    kv_len = _validate.integer("kv_len", kv_len, low=1)
    n_heads = _validate.integer("n_heads", n_heads, low=1)
    head_dim = _validate.integer("head_dim", head_dim, low=1)
    batch = _validate.integer("batch", batch, low=1)
    n_kv_heads = n_heads if n_kv_heads is None else _validate.integer("n_kv_heads", n_kv_heads,
                                                                      low=1)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads} "
                         "(each key/value head serves a whole group of query heads)")
    if q_len > kv_len:
        raise ValueError(f"q_len={q_len} exceeds kv_len={kv_len}: the queries attend to the "
                         "cached keys plus their own, so kv_len >= q_len")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    s = dtype_bytes(dtype)
    # causal: new query i (0-based) sees the kv_len - q_len cached keys and i + 1 new ones
    pairs = (q_len * (kv_len - q_len) + q_len * (q_len + 1) // 2) if causal else q_len * kv_len
    matmul = 2 * batch * n_heads * pairs * head_dim
    q_bytes = batch * n_heads * q_len * head_dim * s
    kv_bytes = batch * n_kv_heads * kv_len * head_dim * s
    kv = "" if n_kv_heads == n_heads else f" ({n_kv_heads} KV heads)"
    return KernelCost(
        name, 2 * matmul, q_bytes + 2 * kv_bytes + q_bytes,
        notes=f"batch {batch}, {n_heads} heads{kv} × {head_dim} dims, {q_len} queries over "
              f"{kv_len} keys{', causal' if causal else ''}, {dtype}; fused kernel: the score "
              "matrix stays on chip",
        parts=(("Q·Kᵀ", matmul, 0), ("A·V", matmul, 0), ("read Q", 0, q_bytes),
               ("read K", 0, kv_bytes), ("read V", 0, kv_bytes), ("write O", 0, q_bytes)))


def attention_prefill(seq_len, *, n_heads, head_dim, batch=1, n_kv_heads=None, causal=False,
                      dtype="fp16") -> KernelCost:
    """Prefill: all ``seq_len`` prompt tokens attend at once (q = L = seq_len).

    Intensity ≈ ``4·s²·d / (4·s·d·bytes) = seq_len / bytes`` with full heads: 1024 FLOP/byte at
    2048 tokens in FP16 — far above any GPU's ridge, so compute-bound.
    """
    seq_len = _validate.integer("seq_len", seq_len, low=1)
    return attention(seq_len, seq_len, n_heads=n_heads, head_dim=head_dim, batch=batch,
                     n_kv_heads=n_kv_heads, causal=causal, dtype=dtype,
                     name="attention prefill")


def attention_decode(context_len, *, n_heads, head_dim, batch=1, n_kv_heads=None,
                     dtype="fp16") -> KernelCost:
    """Decode: one new token per sequence attends to ``context_len`` cached keys and values.

    Each cached K and V element is read once and used in one multiply-add, so intensity is
    ``4·L·d / (bytes·(2·L·d + 2·d)) ≈ 2 / bytes`` — ≈ 1 FLOP/byte in FP16, at any batch size
    (every sequence has its own cache).  That is far below every ridge point: decode attention
    is memory-bound, which corrects the claim that score computation in LLM inference sits
    near the compute roof (docs/misconceptions.md, M17).  Grouped-query attention raises it by
    ``n_heads / n_kv_heads``.  The K and V of the new token are written by the projection
    kernel, not here.
    """
    context_len = _validate.integer("context_len", context_len, low=1)
    return attention(1, context_len, n_heads=n_heads, head_dim=head_dim, batch=batch,
                     n_kv_heads=n_kv_heads, dtype=dtype, name="attention decode")


# -- helpers -------------------------------------------------------------------------------------

def _count(name, value):
    """A non-negative FLOP or byte count; integral values stay exact ints."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if isinstance(value, numbers.Integral):
        value = int(value)
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
        return value
    return _exact(_validate.real(name, value, low=0.0))


def _exact(value: float):
    return int(value) if float(value).is_integer() else float(value)


def _pair(name, value, *, low=1) -> tuple[int, int]:
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise ValueError(f"{name} must be an int or a (height, width) pair, got {value!r}")
        return (_validate.integer(f"{name}[0]", value[0], low=low),
                _validate.integer(f"{name}[1]", value[1], low=low))
    v = _validate.integer(name, value, low=low)
    return v, v
