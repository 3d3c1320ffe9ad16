"""rlf.testing: the state-tree and CSV helpers plugins' tests use."""

import numpy as np
import pytest

from rlf.testing import all_finite, assert_trees_equal, read_csv


def test_trees_compare_by_structure_and_value_and_name_the_difference():
    tree = {"net": {"w": np.arange(3.0)}, "steps": 4, "rng": [1, (2, 3)]}
    assert_trees_equal(tree, {"net": {"w": np.arange(3.0)}, "steps": 4, "rng": [1, (2, 3)]})
    with pytest.raises(AssertionError, match=r"state\.net\.w"):
        assert_trees_equal(tree, {"net": {"w": np.array([0.0, 1.0, 5.0])}, "steps": 4, "rng": [1, (2, 3)]})
    with pytest.raises(AssertionError, match=r"state\.rng\[1\]\[0\]"):
        assert_trees_equal(tree, {"net": {"w": np.arange(3.0)}, "steps": 4, "rng": [1, (9, 3)]})
    with pytest.raises(AssertionError, match="keys"):
        assert_trees_equal(tree, {"net": {"w": np.arange(3.0)}, "steps": 4})


def test_all_finite_looks_into_every_float():
    assert all_finite({"a": [np.ones(2), 1.5, "text", np.arange(3)]})
    assert not all_finite({"a": [np.array([1.0, np.nan])]})
    assert not all_finite({"a": {"b": float("inf")}})


def test_read_csv_leaves_out_cells_of_columns_added_later(tmp_path):
    path = tmp_path / "episodes.csv"
    path.write_text("episode,return,capture\n1,2.5,\n2,-1,1\n")
    assert read_csv(path) == [{"episode": 1.0, "return": 2.5}, {"episode": 2.0, "return": -1.0, "capture": 1.0}]
