"""Chapter 04 exercise questions (see gpu_lessons.questions for how to add one)."""

QUESTIONS = ()
