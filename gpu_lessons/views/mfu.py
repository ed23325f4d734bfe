"""MFU calculator: a transformer's FLOPs per component, the 6N and PaLM estimates, MFU and HFU.

Every number comes from :mod:`gpu_lessons.mfu`: FLOPs from :func:`transformer_flops`, the
estimates from :func:`compare_estimates`, parameters from :func:`parameter_count`, MFU and HFU
from :func:`mfu`.  The readout names the peak it divides by; on a GeForce card the
FP16-accumulate peak is twice the FP32-accumulate one, and dividing by it halves the MFU of a
mixed-precision training run (the RTX 4090 example, docs/misconceptions.md, M18).
"""

from __future__ import annotations

import html

import ipywidgets as widgets
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Span
from bokeh.plotting import figure

from .. import _validate
from .. import mfu as _mfu
from .._format import flop_rate, percent, si
from ..hardware import catalog, gpu
from ..transformer import PRESETS, Preset
from ._base import LAYOUT, PALETTE, STYLE, Explorer, dropdown, log_slider, slider

#: Labels of the precisions an MFU can be quoted against (``mfu.MFU_PRECISIONS``).
PRECISION_LABELS = {"bf16": "BF16 tensor", "fp16": "FP16 tensor", "tf32": "TF32 tensor",
                    "fp32": "FP32 (CUDA cores)", "fp8": "FP8 tensor"}

ESTIMATES = ("exact (FlopCounterMode)", "6N", "6N + 12·L·H·Q·T (PaLM)")

_MFU_COLORS = {"MFU": PALETTE[0], "estimate": PALETTE[5], "HFU": PALETTE[2],
               "other peak": PALETTE[3]}


class MfuExplorer(Explorer):
    title = "MFU: Model FLOPs Utilization = model FLOPs per second / dense peak FLOP/s"

    def __init__(self, model="gpt2-small", *, gpu_name="A100 SXM4 80GB", n_gpus=1,
                 tokens_per_s=1.5e5, precision="bf16", accumulate="fp32", recompute=False,
                 batch=8):
        _validate.choice("model", model, PRESETS)
        p = PRESETS[model]
        g = gpu(gpu_name)
        n_gpus = _validate.integer("n_gpus", n_gpus, low=1, high=1_000_000)
        tokens_per_s = _validate.positive("tokens_per_s", tokens_per_s)
        _validate.choice("precision", precision, _mfu.MFU_PRECISIONS)
        _validate.choice("accumulate", accumulate, ("fp32", "fp16"))
        if not isinstance(recompute, bool):
            raise TypeError(f"recompute must be True or False, got {recompute!r}")
        batch = _validate.integer("batch", batch, low=1, high=4096)

        controls = {
            "preset": dropdown("model preset (sets the sliders)",
                               [(q.label, key) for key, q in PRESETS.items()], model),
            "d_model": slider("d_model", p.d_model, p.head_dim, 16384, p.head_dim,
                              unit=f"width; heads of {p.head_dim}"),
            "n_layers": slider("layers", p.n_layers, 1, 128, 1, unit="count"),
            "d_ff": slider("MLP width d_ff", p.d_ff, 64, 65536, 64, unit="units"),
            "seq_len": slider("sequence length", p.seq_len, 128, 32768, 128, unit="tokens"),
            "batch": slider("batch", batch, 1, 4096, 1, unit="sequences/step"),
            "tokens_per_s": log_slider("throughput", tokens_per_s, 1, 8,
                                       unit="tokens/s, whole job"),
            "gpu": dropdown("GPU", list(catalog()), g.name),
            "n_gpus": widgets.BoundedIntText(value=n_gpus, min=1, max=1_000_000,
                                             description="number of GPUs (count)", style=STYLE,
                                             layout=LAYOUT),
            "precision": dropdown("training precision",
                                  [(PRECISION_LABELS[k], k) for k in _mfu.MFU_PRECISIONS],
                                  precision),
            "accumulate": dropdown("tensor-core accumulate",
                                   [("FP32 accumulate (mixed-precision training)", "fp32"),
                                    ("FP16 accumulate", "fp16")], accumulate),
            "recompute": widgets.Checkbox(value=recompute, style=STYLE, layout=LAYOUT,
                                          description="full activation recomputation (HFU)"),
        }

        self.breakdown = ColumnDataSource(dict(component=[], tflop=[], flops=[], flops_text=[],
                                               share=[], formula=[]))
        self.estimates = ColumnDataSource(dict(estimate=[], gflop=[], error=[], color=[]))
        self.utilization = ColumnDataSource(dict(label=[], percent=[], peak=[], color=[]))

        # Initial factors, so the first render already has its categories; _update replaces them.
        fig1 = figure(y_range=FactorRange(*_mfu.COMPONENT_LABELS.values()), width=460,
                      height=320, toolbar_location=None,
                      x_axis_label="forward FLOPs per step (TFLOP)",
                      title="forward matmul FLOPs by component")
        fig1.hbar(y="component", right="tflop", height=0.7, color=PALETTE[0],
                  source=self.breakdown)
        fig1.add_tools(HoverTool(tooltips=[
            ("component", "@component"), ("formula", "@formula"),
            ("forward", "@flops_text per step"), ("share", "@share{0.0%} of forward")]))

        fig2 = figure(y_range=FactorRange(*ESTIMATES[::-1]), width=330, height=320, toolbar_location=None,
                      x_axis_label="training FLOPs per token (GFLOP)",
                      title="exact count vs estimates")
        fig2.hbar(y="estimate", right="gflop", height=0.7, color="color",
                  source=self.estimates)
        fig2.add_tools(HoverTool(tooltips=[("", "@estimate"),
                                           ("per token", "@gflop{0,0.000} GFLOP"),
                                           ("vs exact", "@error{+0.0%}")]))

        fig3 = figure(y_range=FactorRange("MFU (exact count)"), width=400, height=320,
                      toolbar_location=None, x_axis_label="% of dense peak", title="MFU and HFU")
        fig3.hbar(y="label", right="percent", height=0.7, color="color",
                  source=self.utilization)
        fig3.add_layout(Span(location=100, dimension="height", line_color="black",
                             line_dash="dashed"))
        fig3.add_tools(HoverTool(tooltips=[("", "@label"), ("value", "@percent{0.00} %"),
                                           ("peak used", "@peak")]))
        self.figures_by_name = {"breakdown": fig1, "estimates": fig2, "utilization": fig3}

        bad, good = _mfu.rtx4090_mfu_example("fp16"), _mfu.rtx4090_mfu_example("fp32")
        notes = (f"The RTX 4090 example (4 GPUs, 0.1 TFLOP/step × 50 steps/s) divided by "
                 f"{flop_rate(bad.peak_flops_per_gpu)} per GPU, the FP16-accumulate "
                 f"peak: MFU {percent(bad.mfu)}. Mixed-precision training accumulates in "
                 f"FP32, where the RTX 4090 peaks at {flop_rate(good.peak_flops_per_gpu)}: MFU "
                 f"{percent(good.mfu)}. Peaks are dense (never 2:4 sparse).")
        super().__init__(controls, [fig1, fig2, fig3], notes=notes)

    def _on_change(self, change):
        if change["owner"] is self.controls["preset"]:
            self.apply_preset(change["new"])  # sets the sliders, then updates once
        else:
            self.update()

    def apply_preset(self, key: str) -> None:
        """Set the shape sliders to preset ``key`` (one of :data:`PRESETS`)."""
        p = PRESETS[_validate.choice("preset", key, PRESETS)]
        c = self.controls
        with self.quietly():
            c["preset"].value = key
            d = c["d_model"]
            d.step = p.head_dim
            d.min = p.head_dim
            d.value = p.d_model
            d.description = f"d_model (width; heads of {p.head_dim})"
            c["n_layers"].value = p.n_layers
            c["d_ff"].value = p.d_ff
            c["seq_len"].value = p.seq_len
        self.update()

    @property
    def preset(self) -> Preset:
        return PRESETS[self.controls["preset"].value]

    def flops(self) -> _mfu.TransformerFlops:
        """:func:`transformer_flops` for the current sliders (heads of the preset's size)."""
        c, p = self.controls, self.preset
        d_model = c["d_model"].value
        if d_model % p.head_dim:
            raise ValueError(f"d_model={d_model} must be a multiple of the head size "
                             f"{p.head_dim} of {p.label}")
        return _mfu.transformer_flops(c["batch"].value, c["seq_len"].value, d_model,
                                      c["n_layers"].value, c["d_ff"].value, p.vocab_size,
                                      d_model // p.head_dim, p.gated_mlp)

    def accumulate(self) -> str:
        """The accumulate type used: the control's choice where the GPU has a separate
        FP16-accumulate peak for the chosen precision, else FP32."""
        c = self.controls
        g = gpu(c["gpu"].value)
        distinguishes = c["precision"].value == "fp16" and "fp16_acc16" in g.peak_tflops
        return c["accumulate"].value if distinguishes else "fp32"

    def _update(self):
        c, p = self.controls, self.preset
        f = self.flops()
        g = gpu(c["gpu"].value)
        precision, acc = c["precision"].value, self.accumulate()
        c["accumulate"].disabled = not (precision == "fp16" and "fp16_acc16" in g.peak_tflops)
        common = dict(gpu=g, tokens_per_s=c["tokens_per_s"].value, precision=precision,
                      n_gpus=c["n_gpus"].value)
        u = _mfu.mfu(f, accumulate=acc, recompute=c["recompute"].value, **common)
        est = _mfu.compare_estimates((f.seq_len,), d_model=f.d_model, n_layers=f.n_layers,
                                     d_ff=f.d_ff, vocab_size=f.vocab_size, n_heads=f.n_heads,
                                     gated_mlp=f.gated_mlp, bias=p.bias, norm=p.norm)
        u6 = _mfu.mfu(est.six_n[0], accumulate=acc, **common)
        upalm = _mfu.mfu(est.palm[0], accumulate=acc, **common)
        other = None
        if not c["accumulate"].disabled:
            other = _mfu.mfu(f, accumulate="fp16" if acc == "fp32" else "fp32", **common)
        params = f.parameters(bias=p.bias, norm=p.norm,
                              n_positions=f.seq_len if p.learned_positions else 0,
                              tied_embeddings=p.tied_embeddings)

        comps = f.components
        labels = [_mfu.COMPONENT_LABELS[k] for k in comps]
        self.figures_by_name["breakdown"].y_range.factors = labels[::-1]
        self.breakdown.data = dict(
            component=labels, tflop=[v * 1e-12 for v in comps.values()],
            flops=[float(v) for v in comps.values()],
            flops_text=[si(v, "FLOP") for v in comps.values()],
            share=[f.shares[k] for k in comps],
            formula=[_mfu.FORMULAS[k] for k in comps])

        self.estimates.data = dict(
            estimate=list(ESTIMATES), gflop=[est.exact[0] * 1e-9, est.six_n[0] * 1e-9,
                                   est.palm[0] * 1e-9],
            error=[0.0, est.six_n_error[0], est.palm_error[0]],
            color=[PALETTE[0], PALETTE[5], PALETTE[5]])

        rows = [("MFU (exact count)", u.mfu, u, "MFU"), ("MFU by 6N", u6.mfu, u6, "estimate"),
                ("MFU by 6N + 12·L·H·Q·T", upalm.mfu, upalm, "estimate"),
                ("HFU (with recomputation)" if c["recompute"].value else "HFU (no recomputation)",
                 u.hfu, u, "HFU")]
        if other is not None:
            rows.append((f"MFU, {_acc_text(other.accumulate)} peak", other.mfu, other,
                         "other peak"))
        self.figures_by_name["utilization"].y_range.factors = [r[0] for r in rows][::-1]
        self.utilization.data = dict(
            label=[r[0] for r in rows], percent=[r[1] * 100 for r in rows],
            peak=[_peak_text(r[2]) for r in rows], color=[_MFU_COLORS[r[3]] for r in rows])

        self.result = u
        self.set_readout(_readout(p, f, params, u, est, other))


def mfu_explorer(model="gpt2-small", *, gpu="A100 SXM4 80GB", n_gpus=1, tokens_per_s=1.5e5,
                 precision="bf16", accumulate="fp32", recompute=False,
                 batch=8) -> MfuExplorer:
    """The MFU calculator, starting from preset ``model`` (a key of :data:`PRESETS`) trained on
    ``n_gpus`` × ``gpu`` at ``tokens_per_s`` (whole job).  ``precision`` and ``accumulate`` pick
    the dense peak MFU divides by; ``recompute`` adds full activation recomputation to HFU."""
    return MfuExplorer(model, gpu_name=gpu, n_gpus=n_gpus, tokens_per_s=tokens_per_s,
                       precision=precision, accumulate=accumulate, recompute=recompute,
                       batch=batch)


# -- readout ------------------------------------------------------------------------------------

def _acc_text(acc: str) -> str:
    return "FP16-accumulate" if acc == "fp16" else "FP32-accumulate"


def _peak_text(u: _mfu.Utilization) -> str:
    return (f"{flop_rate(u.peak_flops_per_gpu)} per GPU ({u.precision} dense, "
            f"{_acc_text(u.accumulate)})")


def _readout(p: Preset, f: _mfu.TransformerFlops, params: _mfu.ParameterCount,
             u: _mfu.Utilization, est: _mfu.EstimateComparison, other) -> str:
    red = PALETTE[3]
    shape = (f"Model (preset {html.escape(p.label)}): d_model {f.d_model}, {f.n_layers} layers, "
             f"{f.n_heads} heads × {f.head_dim}, d_ff {f.d_ff}{' (gated)' if f.gated_mlp else ''}, "
             f"vocabulary {f.vocab_size:,}; {f.batch} × {f.seq_len} tokens/step. "
             f"N = {params.non_embedding:,} non-embedding parameters "
             f"({params.total:,} in all).")
    flops = (f"Training FLOPs: {si(f.training, 'FLOP')}/step = 3 × forward "
             f"{si(f.forward, 'FLOP')}; {si(f.training_per_token, 'FLOP')}/token"
             + (f"; with recomputation {si(f.training_recompute, 'FLOP')}/step"
                if u.hfu != u.mfu else "") + ".")
    util = (f"{u.n_gpus} × {html.escape(u.gpu)}, peak used: <b>{_peak_text(u)}</b>, "
            f"{si(u.peak_flops, 'FLOP/s')} in all. Achieved "
            f"{si(u.achieved_flops_per_gpu, 'FLOP/s')} of model FLOPs per GPU → "
            f"<b>MFU {percent(u.mfu)}</b>, HFU {percent(u.hfu)}.")
    if u.mfu > 1:
        util += (f" <span style='color:{red}'>Above 100 %: impossible. Check the peak (sparse, "
                 "precision, accumulate type), the GPU count or the throughput.</span>")
    estimates = (f"Per token: exact {si(est.exact[0], 'FLOP')}, 6N {si(est.six_n[0], 'FLOP')} "
                 f"({percent(est.six_n_error[0], signed=True)}), 6N + 12·L·H·Q·T "
                 f"{si(est.palm[0], 'FLOP')} ({percent(est.palm_error[0], signed=True)}).")
    lines = [shape, flops, util, estimates]
    if other is not None:
        verdict = ("the FP16-accumulate mistake: it halves MFU" if other.accumulate == "fp16"
                   else "training accumulates in FP32, so quote that peak")
        lines.append(f"<span style='color:{red}'>This GPU has two FP16 peaks. Against the "
                     f"{_peak_text(other)} the same run reads MFU {percent(other.mfu)} — "
                     f"{verdict}.</span>")
    return "<br>".join(lines)
