import os

import pytest
from hypothesis import HealthCheck, settings

# Property tests: deterministic in CI, no per-example deadline (2 shared cores are noisy).
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def _control_extremes(w):
    """The first and last value an explorer's control offers (a menu, a slider, a checkbox)."""
    if hasattr(w, "options"):
        return [o[1] if isinstance(o, tuple) else o for o in (w.options[0], w.options[-1])]
    if hasattr(w, "min"):
        return [w.min, w.max]
    return [not w.value, w.value]  # a checkbox


@pytest.fixture
def control_extremes():
    """``control_extremes(widget)``: the first and last value a control offers, for tests that
    drive every control of an explorer to its ends."""
    return _control_extremes
