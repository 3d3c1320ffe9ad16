"""Random play, the baseline the learning tests of the algorithm plugins compare against."""

import math

from rlf_plugin_predator_prey import PredatorPreyConfig, capture_summary, random_play


def test_random_play_is_seeded_and_reports_every_episode():
    config = PredatorPreyConfig(scenario="chase-1v1")
    rows = random_play(config, episodes=30, seed=3)
    assert rows == random_play(config, episodes=30, seed=3)
    assert rows != random_play(config, episodes=30, seed=4)
    assert len(rows) == 30 and all({"length", "capture"} <= set(row) for row in rows)
    summary = capture_summary(rows)
    captured = [row for row in rows if row["capture"] == 1.0]
    assert summary["capture"] == len(captured) / 30
    assert summary["steps_to_capture"] == sum(row["length"] for row in captured) / len(captured)
    assert summary["length"] == sum(row["length"] for row in rows) / 30
    # the env's own count agrees with the episode length when the capture threshold ends it
    assert all(row["steps_to_capture"] == row["length"] for row in captured)


def test_a_summary_of_nothing_captured_is_nan_not_an_error():
    summary = capture_summary([{"length": 100.0, "capture": 0.0}])
    assert summary["capture"] == 0.0 and math.isnan(summary["steps_to_capture"])
    assert all(math.isnan(v) for v in capture_summary([]).values())
