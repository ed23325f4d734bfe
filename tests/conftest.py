import os

from hypothesis import HealthCheck, settings

# Property tests: deterministic in CI, no per-example deadline (2 shared cores are noisy).
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
