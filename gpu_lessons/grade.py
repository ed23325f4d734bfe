"""The grader's former home, kept so ``from gpu_lessons.grade import grade`` still works.

The grader is the package :mod:`gpu_lessons.grading`; the command line is
``gpu-lessons grade`` (:mod:`gpu_lessons.cli`).
"""

from .grading.results import STATUSES, Grades, Row
from .grading.runner import grade
from .grading.submissions import DEFAULT_ID_PATTERN, find_submissions

__all__ = ["DEFAULT_ID_PATTERN", "STATUSES", "Grades", "Row", "find_submissions", "grade"]
