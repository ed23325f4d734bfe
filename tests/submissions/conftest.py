# These notebooks are deliberately broken (endless loops, os._exit): tests/grading/test_grade.py runs
# them through the grader with time limits.  Never let `pytest --nbval` execute them directly.
collect_ignore_glob = ["*.ipynb"]
