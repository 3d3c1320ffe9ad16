"""The table, the state keys and tie-breaking: the storage every tabular plugin builds on."""

import random

import numpy as np
import pytest
from rlf_plugin_iql import QTable, StateKeys, greedy

from rlf import ConfigError
from rlf.storage import checkpoint


def test_rows_start_at_zero_and_survive_growth():
    table = QTable(3, capacity=2)
    assert table.find((0, 0)) is None
    assert table.max_q((0, 0)) == 0.0
    rows = [table.row((i, -i)) for i in range(10)]
    assert rows == list(range(10))
    assert len(table) == 10
    table.values[4, 2] = 7.5
    for i in range(10, 100):
        table.row((i, -i))
    assert table.row((4, -4)) == 4  # an existing key keeps its row
    assert table.values[4].tolist() == [0.0, 0.0, 7.5]
    assert table.max_q((4, -4)) == 7.5
    assert np.all(table.values[10:100] == 0.0)


def test_state_dict_is_a_keys_matrix_and_a_values_matrix(tmp_path):
    table = QTable(5)
    for key, action, value in [((1, 2), 0, 1.5), ((-3, 4), 4, -2.0), ((0, 0), 2, 9.0)]:
        table.values[table.row(key), action] = value
    state = table.state_dict()
    assert state["keys"].shape == (3, 2) and state["keys"].dtype.kind == "i"
    assert state["values"].shape == (3, 5)
    checkpoint.save(tmp_path / "t.rlf", {"table": state})  # arrays only: no pickle involved
    restored = QTable(5)
    restored.load_state_dict(checkpoint.load(tmp_path / "t.rlf")["table"])
    assert restored.index == table.index
    assert np.array_equal(restored.values[:3], table.values[:3])
    restored.values[restored.row((7, 7)), 1] = 1.0  # and it keeps growing after a load
    assert len(restored) == 4


@pytest.mark.parametrize("keys", [[(1, 2), (3,)], [("a",), ("b",)], [((1, 2), (3, 4))]])
def test_keys_that_do_not_form_a_numeric_matrix_are_refused_at_save(keys):
    table = QTable(2)
    for key in keys:
        table.row(key)
    with pytest.raises(TypeError, match="flat tuples of numbers"):
        table.state_dict()


def test_empty_table_round_trips():
    restored = QTable(4)
    restored.load_state_dict(QTable(4).state_dict())
    assert len(restored) == 0


def test_a_full_table_is_a_config_error_that_names_the_fix():
    table = QTable(2, capacity=2, max_states=3, full_hint="raise algo.max_table_mib")
    for i in range(3):
        table.row((i,))
    with pytest.raises(ConfigError, match="raise algo.max_table_mib"):
        table.row((3,))


def test_greedy_breaks_ties_uniformly_and_is_exact_otherwise():
    rng = random.Random(0)
    assert all(greedy([0.0, 3.0, 1.0], rng) == 1 for _ in range(50))
    picks = [greedy([2.0, 0.0, 2.0, 2.0], rng) for _ in range(3000)]
    counts = np.bincount(picks, minlength=4)
    assert counts[1] == 0
    assert all(800 < c < 1200 for c in counts[[0, 2, 3]])


class Encoder:
    def __init__(self):
        self.batches = 0

    def hashable(self, obs):
        return (int(obs[0]) * 10,)


class BatchEncoder(Encoder):
    def hashable_batch(self, batch):
        self.batches += 1
        return [(int(row[0]) * 100,) for row in batch]


def test_state_keys_use_the_env_encoder_and_fall_back_to_the_values():
    batch = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    assert StateKeys({"encoder": Encoder()})(batch) == [(10,), (30,)]
    encoder = BatchEncoder()
    assert StateKeys({"encoder": encoder})(batch) == [(100,), (300,)] and encoder.batches == 1
    assert StateKeys({})(batch) == [(1.0, 2.0), (3.0, 4.0)]
    assert StateKeys(None)(np.zeros((1, 2, 2)))[0] == (0.0, 0.0, 0.0, 0.0)
