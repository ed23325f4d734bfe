"""The blind set's kernels compute what NumPy computes, in the simulator at a small size."""

import numpy as np
import pytest
from blind_kernels import CASES

from gpu_lessons.kernels import run, to_cuda


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_blind_kernel_matches_numpy(case):
    grid, block, args = case.make(case.small)
    run(case.kernel, grid, block, *args)
    case.check(args)


def test_blind_kernels_translate_under_their_own_names():
    # the device script matches ncu's rows to kernels by these names
    names = set()
    for case in CASES:
        _, _, args = case.make(case.small)
        names.add(to_cuda(case.kernel, *args).kernel_name)
    assert names == {c.kernel.__name__ for c in CASES}
    assert all(n.startswith("blind_") for n in names)


def test_a_wrong_kernel_fails_its_check():
    case = next(c for c in CASES if c.name == "stencil5")
    grid, block, args = case.make(case.small)
    run(case.kernel, grid, block, *args)
    args[1][100] += np.float32(1e-3)
    with pytest.raises(AssertionError):
        case.check(args)
