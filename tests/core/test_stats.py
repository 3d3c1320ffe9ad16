"""rlf.experiments.stats: run-level aggregates, their stratified bootstrap intervals, the probability of
improvement and performance profiles, against hand-computed values and against rliable, the library
that defines them (Agarwal et al. 2021)."""

import numpy as np
import pytest
from rliable import library as rly
from rliable import metrics as rly_metrics

from rlf.experiments import stats


def test_aggregates_by_hand():
    scores = np.array([1.0, 2.0, 3.0, 4.0, 100.0, 5.0, 6.0, 7.0])
    assert stats.aggregate_mean([scores]) == pytest.approx(16.0)
    assert stats.aggregate_median([scores]) == pytest.approx(4.5)
    assert stats.aggregate_iqm([scores]) == pytest.approx(np.mean([3.0, 4.0, 5.0, 6.0]))  # 2 cut at each end
    # the mean is over tasks of each task's mean: a task with few runs weighs as much as one with many
    assert stats.aggregate_mean([np.array([0.0]), np.array([10.0, 10.0, 10.0])]) == pytest.approx(5.0)
    assert np.isnan(stats.aggregate_iqm([]))


def test_probability_of_improvement_counts_pairs_and_ties_half():
    x, y = np.array([3.0, 5.0]), np.array([1.0, 3.0, 7.0])
    # pairs: 3>1, 3=3 (half), 3<7, 5>1, 5>3, 5<7: 3.5 of 6
    assert stats.probability_of_improvement([x], [y]) == pytest.approx(3.5 / 6)
    assert stats.probability_of_improvement([y], [x]) == pytest.approx(2.5 / 6)
    assert stats.probability_of_improvement([x], [x]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="same tasks"):
        stats.probability_of_improvement([x, x], [y])


@pytest.mark.parametrize("runs, tasks", [(5, 1), (10, 3)])
def test_point_estimates_and_intervals_agree_with_rliable(runs, tasks):
    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(runs, tasks)) * np.arange(1, tasks + 1) + rng.normal(size=tasks)
    other = matrix + rng.normal(0.3, 0.5, size=(runs, tasks))
    columns = [matrix[:, t] for t in range(tasks)]
    mine = stats.interval_estimates(columns, reps=4000, seed=0, statistics=("mean", "iqm"))
    points, intervals = rly.get_interval_estimates(
        {"a": matrix}, lambda m: np.array([rly_metrics.aggregate_mean(m), rly_metrics.aggregate_iqm(m)]), reps=4000)
    spread = matrix.std()
    for index, name in enumerate(("mean", "iqm")):
        assert mine[name]["value"] == pytest.approx(points["a"][index])
        low, high = intervals["a"][:, index]
        # different random draws of the same stratified percentile bootstrap: the bounds agree closely
        assert mine[name]["ci"][0] == pytest.approx(low, abs=0.1 * spread)
        assert mine[name]["ci"][1] == pytest.approx(high, abs=0.1 * spread)
    ours = stats.improvement_estimate([other[:, t] for t in range(tasks)], columns, reps=2000)
    theirs_point, theirs_ci = rly.get_interval_estimates(
        {"b,a": (other, matrix)}, rly_metrics.probability_of_improvement, reps=2000)
    assert ours["value"] == pytest.approx(float(np.ravel(theirs_point["b,a"])[0]))
    assert ours["ci"][0] == pytest.approx(float(np.ravel(theirs_ci["b,a"])[0]), abs=0.06)
    assert ours["ci"][1] == pytest.approx(float(np.ravel(theirs_ci["b,a"])[1]), abs=0.06)


def test_intervals_are_over_runs_and_reproducible():
    scores = np.array([10.0, 11.0, 30.0, 12.0, 9.0])
    first = stats.interval_estimates(scores, reps=500, seed=3)
    assert first == stats.interval_estimates(scores, reps=500, seed=3)
    for name, estimate in first.items():
        low, high = estimate["ci"]
        assert 9.0 <= low <= estimate["value"] <= high <= 30.0, name
    # one run: no spread to resample
    assert stats.interval_estimates(np.array([4.0]), reps=50)["iqm"] == {"value": 4.0, "ci": (4.0, 4.0)}


def test_performance_profile_is_the_fraction_of_runs_above_each_threshold():
    profile = stats.performance_profile([np.array([1.0, 2.0, 3.0, 4.0])], np.array([0.0, 2.0, 4.0]), reps=200)
    assert profile["fraction"] == pytest.approx([1.0, 0.5, 0.0])
    assert np.all(profile["low"] <= profile["fraction"]) and np.all(profile["fraction"] <= profile["high"])
    # rliable's profile of the same runs (score > tau)
    theirs, _ = rly.create_performance_profile({"a": np.array([[1.0], [2.0], [3.0], [4.0]])}, np.array([0.0, 2.0, 4.0]))
    assert profile["fraction"] == pytest.approx(theirs["a"])


def test_permutation_p_value_is_the_exact_mann_whitney_test():
    from scipy.stats import mannwhitneyu, permutation_test

    x, y = np.array([3.0, 5.0, 9.0, 2.5, 7.0]), np.array([1.0, 4.0, 0.0, 2.0, 6.0])
    exact = mannwhitneyu(x, y, alternative="greater", method="exact").pvalue
    assert stats.permutation_p_value([x], [y]) == pytest.approx(exact)
    # the smallest p each design can give: every X run above every Y run
    assert stats.permutation_p_value(np.arange(5.0) + 10, np.arange(5.0)) == pytest.approx(1 / 252)
    assert stats.permutation_p_value(np.array([5.0, 6.0]), np.array([0.0, 1.0])) == pytest.approx(1 / 6)
    assert stats.permutation_p_value(np.ones(3), np.ones(3)) == pytest.approx(1.0)  # all tied: no evidence
    # with ties (scipy's "exact" U distribution assumes none), against scipy's permutation test of U
    x, y = np.array([3.0, 5.0, 9.0, 2.0, 7.0]), np.array([1.0, 4.0, 0.0, 2.0, 6.0])
    tied = permutation_test((x, y), lambda a, b: mannwhitneyu(a, b).statistic, permutation_type="independent",
                            alternative="greater", n_resamples=10_000).pvalue
    assert stats.permutation_p_value([x], [y]) == pytest.approx(tied)


def test_permutation_p_value_samples_relabellings_when_there_are_too_many():
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.6, 1.0, 12), rng.normal(0.0, 1.0, 12)  # 2.7 million relabellings
    from scipy.stats import mannwhitneyu

    exact = mannwhitneyu(x, y, alternative="greater", method="exact").pvalue
    sampled = stats.permutation_p_value(x, y, reps=20_000, seed=1)
    assert sampled == stats.permutation_p_value(x, y, reps=20_000, seed=1)  # reproducible from its seed
    assert abs(sampled - exact) < 0.01 and sampled > 0


def test_holm_adjusts_in_step_down_order_and_stays_monotone():
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert stats.holm([0.4, 0.6, 0.9]) == pytest.approx([1.0, 1.0, 1.0])
