"""Where a puzzle's feedback sends the learner: a lesson section, by notebook and heading."""

from __future__ import annotations

from dataclasses import dataclass

NOTEBOOKS = {
    2: "02_threads_warps_sms.ipynb",
    3: "03_memory_hierarchy.ipynb",
    4: "04_cache_lines_coalescing_banks.ipynb",
    5: "05_roofline.ipynb",
    6: "06_occupancy_latency.ipynb",
    7: "07_bottlenecks_playbook.ipynb",
    8: "08_system_level.ipynb",
}


@dataclass(frozen=True)
class Section:
    """A lesson section, named by its notebook and heading text (without the ``#``)."""

    lesson: int
    heading: str

    @property
    def notebook(self) -> str:
        return f"notebooks/{NOTEBOOKS[self.lesson]}"

    def __str__(self) -> str:
        return f"lesson {self.lesson:02d}, “{self.heading}”"
