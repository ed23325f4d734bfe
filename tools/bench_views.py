"""Time every explorer's update (model call + data-source update) across its controls.

    .venv/bin/python tools/bench_views.py            # prints a markdown table
    .venv/bin/python tools/bench_views.py --md FILE  # also writes it to FILE

For each explorer in ``gpu_lessons.views.EXPLORERS`` it builds the default explorer, then moves
every control through a handful of values (a slider's minimum, middle and maximum; up to six
menu entries), recording ``Explorer.last_update_ms`` for each move.  The widget front end is not
involved: this measures the Python side of an update, which is what a learner waits for.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import ipywidgets as widgets

from gpu_lessons.views import EXPLORERS, load


def control_values(control) -> list:
    """A few values that exercise a control, ending where it started."""
    start = control.value
    if isinstance(control, (widgets.IntSlider, widgets.FloatSlider, widgets.FloatLogSlider)):
        lo, hi = control.min, control.max
        mid = (lo + hi) / 2 if not isinstance(control, widgets.IntSlider) else (lo + hi) // 2
        if isinstance(control, widgets.FloatLogSlider):
            lo, hi = control.base ** control.min, control.base ** control.max
            mid = control.base ** ((control.min + control.max) / 2)
        values = [lo, mid, hi]
    elif isinstance(control, (widgets.Dropdown, widgets.ToggleButtons, widgets.RadioButtons)):
        values = [v for _, v in control._options_labels_values()][:6] if hasattr(
            control, "_options_labels_values") else list(control.options)[:6]
        values = [v[1] if isinstance(v, tuple) else v for v in values]
    elif isinstance(control, widgets.Checkbox):
        values = [not start]
    elif isinstance(control, widgets.SelectMultiple):
        opts = [o[1] if isinstance(o, tuple) else o for o in control.options]
        values = [tuple(opts[:2]), tuple(opts[:1])]
    else:
        values = []
    return [*values, start]


def bench(name: str) -> dict:
    t0 = time.perf_counter()
    explorer = load(name)()
    build_ms = (time.perf_counter() - t0) * 1e3
    times = []
    for control in explorer.controls.values():
        for value in control_values(control):
            try:
                control.value = value
            except Exception:  # a value the widget itself rejects (e.g. outside options)
                continue
            times.append(explorer.last_update_ms)
    times = [t for t in times if t == t]  # drop NaN (no update happened)
    return {"name": name, "build_ms": build_ms, "updates": len(times),
            "median_ms": statistics.median(times) if times else float("nan"),
            "max_ms": max(times) if times else float("nan")}


def table(rows: list[dict]) -> str:
    lines = [f"Explorer update times on {platform.node() or 'this machine'} "
             f"({platform.processor() or platform.machine()}), "
             f"{time.strftime('%Y-%m-%d', time.gmtime())}; Python side only.", "",
             "| explorer | first build (ms) | updates timed | median update (ms) | slowest update (ms) |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['build_ms']:.0f} | {r['updates']} | {r['median_ms']:.1f} | "
              f"{r['max_ms']:.1f} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--md", help="write the table to this markdown file")
    args = parser.parse_args()
    rows = [bench(name) for name in EXPLORERS]
    text = table(rows)
    print(text)
    if args.md:
        with open(args.md, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
