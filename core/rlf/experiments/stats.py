"""Statistics over runs, as Agarwal et al. (2021, "Deep Reinforcement Learning at the Edge of the
Statistical Precipice") recommend for few runs: one score per run, then over runs the mean, the median
and the interquartile mean (IQM) with percentile bootstrap intervals stratified by task, the probability
of improvement between two methods with a one-sided permutation test of it, and performance profiles.

The estimators and the bootstrap follow the rliable library's definitions, and the test suite checks them
against rliable's own output. rliable is not a dependency: it brings arch, statsmodels, scipy, pandas and
seaborn (about 200 MB) into a core whose `rlf compare` needs only numpy. One definition differs on purpose:
rliable's median is the median over *tasks* of each task's mean score, which for the one task a
comparison usually has is just the mean; here the median is taken over every run's score.

Scores are given per task, as a list with one 1-D array of run scores per task (the runs of one task need
not number the same as another's). A comparison of one environment is one task.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

Scores = Sequence[np.ndarray]


def _as_tasks(scores: Scores | np.ndarray) -> list[np.ndarray]:
    if isinstance(scores, np.ndarray) and scores.ndim == 1:
        scores = [scores]
    tasks = [np.asarray(task, dtype=float).ravel() for task in scores]
    return [task for task in tasks if len(task)]


def iqm(values: np.ndarray) -> float:
    """Interquartile mean: drop the lowest and highest quarter (floor(n/4) each), average the rest
    (scipy.stats.trim_mean(values, 0.25), which rliable's IQM is)."""
    values = np.sort(np.asarray(values, dtype=float).ravel())
    cut = len(values) // 4
    return float(values[cut:len(values) - cut].mean()) if len(values) else math.nan


def aggregate_mean(scores: Scores) -> float:
    """The mean over tasks of each task's mean run score."""
    tasks = _as_tasks(scores)
    return float(np.mean([task.mean() for task in tasks])) if tasks else math.nan


def aggregate_median(scores: Scores) -> float:
    """The median of every run's score, pooled over tasks."""
    tasks = _as_tasks(scores)
    return float(np.median(np.concatenate(tasks))) if tasks else math.nan


def aggregate_iqm(scores: Scores) -> float:
    """The IQM of every run's score, pooled over tasks."""
    tasks = _as_tasks(scores)
    return iqm(np.concatenate(tasks)) if tasks else math.nan


AGGREGATES: dict[str, Callable[[Scores], float]] = {
    "mean": aggregate_mean, "median": aggregate_median, "iqm": aggregate_iqm}


def _resample(tasks: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
    """One stratified bootstrap replicate: each task's runs redrawn with replacement, within that task."""
    return [task[rng.integers(0, len(task), len(task))] for task in tasks]


def _percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def interval_estimates(scores: Scores, reps: int = 2000, seed: int = 0, confidence: float = 0.95,
                       statistics: Sequence[str] = ("mean", "median", "iqm")) -> dict[str, dict[str, object]]:
    """Each statistic's point estimate and stratified percentile bootstrap interval over runs:
    ``{"iqm": {"value": v, "ci": (low, high)}, ...}``; NaN where there is no run at all."""
    tasks = _as_tasks(scores)
    if not tasks:
        return {name: {"value": math.nan, "ci": (math.nan, math.nan)} for name in statistics}
    rng = np.random.default_rng(seed)
    draws = {name: np.empty(reps) for name in statistics}
    for rep in range(reps):
        sample = _resample(tasks, rng)
        for name in statistics:
            draws[name][rep] = AGGREGATES[name](sample)
    return {name: {"value": AGGREGATES[name](tasks), "ci": _percentile_interval(draws[name], confidence)}
            for name in statistics}


def probability_of_improvement(x: Scores, y: Scores) -> float:
    """P(X > Y): the chance that a run of X scores above a run of Y of the same task, ties counting half
    (the Mann-Whitney U statistic over the number of pairs), averaged over tasks."""
    xs, ys = _as_tasks(x), _as_tasks(y)
    if len(xs) != len(ys) or not xs:
        raise ValueError("probability of improvement needs the same tasks, each with runs, on both sides")
    per_task = []
    for a, b in zip(xs, ys, strict=True):
        greater = (a[:, None] > b[None, :]).mean()
        ties = (a[:, None] == b[None, :]).mean()
        per_task.append(greater + 0.5 * ties)
    return float(np.mean(per_task))


def improvement_estimate(x: Scores, y: Scores, reps: int = 2000, seed: int = 0,
                         confidence: float = 0.95) -> dict[str, object]:
    """P(X > Y) with a percentile interval from bootstrapping X's and Y's runs independently within each task."""
    xs, ys = _as_tasks(x), _as_tasks(y)
    value = probability_of_improvement(xs, ys)
    rng = np.random.default_rng(seed)
    draws = np.array([probability_of_improvement(_resample(xs, rng), _resample(ys, rng)) for _ in range(reps)])
    return {"value": value, "ci": _percentile_interval(draws, confidence)}


def _u_statistic(x: list[np.ndarray], y: list[np.ndarray]) -> float:
    """Summed over tasks: pairs where the X run scores above the Y run, ties counting half (Mann-Whitney U)."""
    total = 0.0
    for a, b in zip(x, y, strict=True):
        total += float((a[:, None] > b[None, :]).sum() + 0.5 * (a[:, None] == b[None, :]).sum())
    return total


def permutation_p_value(x: Scores, y: Scores, reps: int = 100_000, seed: int = 0) -> float:
    """One-sided p-value of "X's runs score above Y's": the share of relabellings of the runs (within each
    task) whose Mann-Whitney U is at least the observed one. Exact (every relabelling) when there are at most
    ``reps`` of them, as for 5 runs against 5 (252); otherwise ``reps`` random relabellings, counted with the
    observed one so that p is never 0. The smallest p an exact test can give is 1 / (number of
    relabellings): 1/6 for 2 runs against 2, 1/252 for 5 against 5."""
    from itertools import combinations

    xs, ys = _as_tasks(x), _as_tasks(y)
    if len(xs) != len(ys) or not xs:
        raise ValueError("a permutation test needs the same tasks, each with runs, on both sides")
    observed = _u_statistic(xs, ys)
    pooled = [np.concatenate([a, b]) for a, b in zip(xs, ys, strict=True)]
    sizes = [len(a) for a in xs]
    count = math.prod(math.comb(len(p), n) for p, n in zip(pooled, sizes, strict=True))
    if count <= reps:
        from itertools import product

        splits = [list(combinations(range(len(p)), n)) for p, n in zip(pooled, sizes, strict=True)]
        at_least = 0
        for choice in product(*splits):
            px, py = [], []
            for p, chosen in zip(pooled, choice, strict=True):
                mask = np.zeros(len(p), dtype=bool)
                mask[list(chosen)] = True
                px.append(p[mask])
                py.append(p[~mask])
            at_least += _u_statistic(px, py) >= observed - 1e-9
        return at_least / count
    rng = np.random.default_rng(seed)
    at_least = 1
    for _ in range(reps):
        px, py = [], []
        for p, n in zip(pooled, sizes, strict=True):
            order = rng.permutation(len(p))
            px.append(p[order[:n]])
            py.append(p[order[n:]])
        at_least += _u_statistic(px, py) >= observed - 1e-9
    return at_least / (reps + 1)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of p-values tested together (family-wise error), in the given order."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def performance_profile(scores: Scores, thresholds: np.ndarray, reps: int = 0, seed: int = 0,
                        confidence: float = 0.95) -> dict[str, np.ndarray]:
    """The fraction of runs scoring above each threshold (averaged over tasks), and with ``reps`` > 0 its
    pointwise stratified bootstrap interval: ``{"fraction": f, "low": l, "high": h}``."""
    tasks = _as_tasks(scores)
    thresholds = np.asarray(thresholds, dtype=float)

    def fraction(sample: list[np.ndarray]) -> np.ndarray:
        return np.mean([(task[:, None] > thresholds[None, :]).mean(axis=0) for task in sample], axis=0)

    out = {"fraction": fraction(tasks)}
    if reps > 0:
        rng = np.random.default_rng(seed)
        draws = np.stack([fraction(_resample(tasks, rng)) for _ in range(reps)])
        tail = (1 - confidence) / 2 * 100
        out["low"], out["high"] = np.percentile(draws, [tail, 100 - tail], axis=0)
    return out
