"""The shared argument checks (``gpu_lessons._validate``): every message names the parameter,
the value and what is allowed; arrays come back as the dtype the models compute with."""

import numpy as np
import pytest

from gpu_lessons import _validate as V


def test_int_array_by_hand():
    a = V.int_array("n", [3, 4], low=1, high=8)
    assert a.dtype == np.int64 and a.tolist() == [3, 4]
    assert V.int_array("n", 5).shape == ()                     # a scalar stays a scalar
    assert V.int_array("n", []).tolist() == []                 # an empty list is fine...
    with pytest.raises(ValueError, match="n must not be empty"):
        V.int_array("n", [], nonempty=True)                    # ...unless asked otherwise
    with pytest.raises(ValueError, match=r"n must be >= 1, got 0 \(allowed: 1 to 8\)"):
        V.int_array("n", [0, 4], low=1, high=8)
    with pytest.raises(ValueError, match="n must be <= 8, got 9"):
        V.int_array("n", [9], high=8)
    with pytest.raises(TypeError, match="n must be integers"):
        V.int_array("n", [1.5])
    with pytest.raises(TypeError, match="n must be integers"):
        V.int_array("n", [True, False])
    with pytest.raises(TypeError, match="flat sequence"):
        V.int_array("n", [[1], [2, 3]])                        # ragged
    with pytest.raises(ValueError, match="one-dimensional"):
        V.int_array("n", [[1, 2]], max_ndim=1)
    with pytest.raises(ValueError, match="signed 64-bit"):
        V.int_array("n", np.array([2**63], dtype=np.uint64))


def test_real_array_by_hand():
    a = V.real_array("t", [0, 2.5], low=0.0)
    assert a.dtype == float and a.tolist() == [0.0, 2.5]
    with pytest.raises(ValueError, match=r"t must be finite and >= 0, got -1\.0 at index 1"):
        V.real_array("t", [1, -1], low=0.0)
    with pytest.raises(ValueError, match=r"t must be finite and > 0, got 0\.0"):
        V.real_array("t", 0, low=0.0, low_open=True)
    with pytest.raises(ValueError, match="t must be finite, got nan"):
        V.real_array("t", [float("nan")])
    with pytest.raises(TypeError, match="t must be a number"):
        V.real_array("t", "fast")
    with pytest.raises(TypeError, match="t must be a number"):
        V.real_array("t", True)


def test_dimensions_and_launch_dims():
    assert V.dimensions(m=2, n=3.0, k=4) == (2, 3, 4)         # 3.0 is a whole number
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        V.dimensions(m=2, k=0)
    assert V.launch_dims("grid", 7) == (7, 1, 1)
    assert V.launch_dims("block", (16, 16)) == (16, 16, 1)
    assert V.launch_dims("grid", np.int64(3)) == (3, 1, 1) and V.launch_dims("grid", 2.0) == (2, 1, 1)
    with pytest.raises(TypeError, match=r"grid must be a positive int or a tuple of 1 to 3 "
                                        r"positive ints \(x, y, z\), got \(1, 1, 1, 1\)"):
        V.launch_dims("grid", (1, 1, 1, 1))
    with pytest.raises(TypeError, match="grid must be a positive int"):
        V.launch_dims("grid", "64")
    with pytest.raises(ValueError, match=r"block\.y must be <= 1024, got 2048"):
        V.launch_dims("block", (1, 2048), high=1024)
    # one limit per axis, as CUDA's maxThreadsDim: z stops at 64
    assert V.launch_dims("block", (1024, 1, 64), high=(1024, 1024, 64)) == (1024, 1, 64)
    with pytest.raises(ValueError, match=r"block\.z must be <= 64, got 65 \(allowed: 1 to 64\)"):
        V.launch_dims("block", (1, 1, 65), high=(1024, 1024, 64))
    with pytest.raises(ValueError, match=r"grid\.x must be >= 1, got 0"):
        V.launch_dims("grid", 0)
    with pytest.raises(TypeError, match=r"grid\.x must be an integer, got 2\.5"):
        V.launch_dims("grid", 2.5)


def test_shape():
    assert V.shape("shape", 256) == (256,)
    assert V.shape("shape", (2, np.int32(128))) == (2, 128)
    with pytest.raises(ValueError, match=r"shape\[1\] must be >= 1, got 0"):
        V.shape("shape", [2, 0])
    with pytest.raises(TypeError, match="shape must be a positive int or a tuple of positive ints"):
        V.shape("shape", ())
    with pytest.raises(TypeError, match=r"shape\[0\] must be an integer"):
        V.shape("shape", ("8",))
