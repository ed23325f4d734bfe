"""Every explorer in ``gpu_lessons.views.EXPLORERS``: its factory resolves, builds an explorer
with no arguments (the state a lesson shows first), and updates from its controls without a
warning.  How fast they update is measured, not asserted: ``tools/bench_views.py``, with the
figures in ``docs/measured/views_benchmark.md``."""

import importlib
import math

import pytest

from gpu_lessons.views import EXPLORERS, load
from gpu_lessons.views._base import Explorer


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_registered_explorer_builds_and_updates(name):
    module, factory = EXPLORERS[name].split(":")
    assert module.startswith("gpu_lessons.views.")
    assert load(name) is getattr(importlib.import_module(module), factory)
    ex = load(name)()
    assert isinstance(ex, Explorer) and ex.title and ex.controls
    assert "gpu-lessons-explorer" in ex._dom_classes   # what the browser test looks for
    ex.last_update_ms = float("nan")
    ex.update()
    assert ex.warning.value == ""
    # update() times itself for tools/bench_views.py (speed is measured there, never asserted)
    assert math.isfinite(ex.last_update_ms)


def test_unknown_explorer_is_a_key_error():
    with pytest.raises(KeyError):
        load("no such explorer")
