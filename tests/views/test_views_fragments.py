"""The fragment picture lays out kernels.mma_layout: each cell's lane and element are the
model's, and one lane's outline covers exactly its 8 elements of A."""

import pytest
from bokeh.models import ColumnDataSource

from gpu_lessons.kernels import mma_layout
from gpu_lessons.views.fragments import FragmentPicture, fragment_picture


def _cells(fig):
    return next(r.data_source for r in fig.renderers
                if isinstance(r.data_source, ColumnDataSource)
                and "label" in r.data_source.data).data


@pytest.mark.parametrize("operand", ["a", "b", "c"])
def test_every_cell_is_the_model_s_lane_and_element(operand):
    lay = mma_layout(operand)
    cells = _cells(fragment_picture(operand))
    assert len(cells["label"]) == lay.lane.size
    for x, y, label in zip(cells["x"], cells["y"], cells["label"], strict=True):
        assert label == f"L{lay.lane[y, x]}\n{operand}[{lay.element[y, x]}]"


def test_one_lane_is_outlined():
    fig = fragment_picture("a", lane=5)
    cells = _cells(fig)
    mine = {(y, x) for x, y, a in zip(cells["x"], cells["y"], cells["alpha"], strict=True)
            if a == 1.0}
    assert mine == set(mma_layout("a").of_lane(5))     # rows 1 and 9, columns 2, 3, 10, 11
    assert "FragmentPicture(" in repr(FragmentPicture(fig))
    with pytest.raises(ValueError, match="lane"):
        fragment_picture("a", lane=32)
