"""``rlf plot``: learning curves from run directories, one line per group (algorithm and setting) with
a band over seeds. matplotlib is an optional extra (``pip install 'rlf[plot]'``), imported only here.

Each run's metric is smoothed with a trailing moving average over ``smooth`` episodes, then linearly
interpolated onto a common grid of env steps (or wall seconds) that spans the range every seed of the
group covers, so seeds are averaged at equal x rather than at equal episode index. The line is the mean
over seeds; the band is the range (min to max) over seeds, the honest spread with 2-5 seeds, where a
standard error would claim more than the data supports.

``plot_profile`` draws performance profiles instead (``rlf plot --profile``): per group, the fraction of
its runs whose score (the mean of the last N episodes) exceeds each threshold, with a pointwise bootstrap
band over runs (Agarwal et al. 2021): a whole distribution of run scores where a table gives one number.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rlf.experiments.results import ResultsError, Run, group_runs, metric_series, run_scores, with_source

X_AXES = ("steps", "wall")
GRID_POINTS = 200


def smooth_series(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average; the first ``window - 1`` points average what exists so far."""
    values = np.asarray(values, dtype=float)
    if window <= 1 or len(values) == 0:
        return values
    sums = np.cumsum(np.concatenate([[0.0], values]))
    index = np.arange(1, len(values) + 1)
    start = np.maximum(index - window, 0)
    return (sums[index] - sums[start]) / (index - start)


def run_curve(run: Run, metric: str, x: str = "steps", smooth: int = 10, source: str = "train"
              ) -> tuple[np.ndarray, np.ndarray]:
    """(x, smoothed metric) of one run; x is the env step (or wall second) at which each episode ended."""
    table = run.table(source)
    rows, values = metric_series([row for row in table if "env_step" in row], metric, source)
    if not rows and table:
        columns = sorted({k for row in table for k in row} - {"env_step", "episode"})
        raise ResultsError(f"metric {metric!r} is not logged by run {run.path}; it has: {', '.join(columns)}")
    steps = np.array([row["env_step"] for row in rows], dtype=float)
    values = smooth_series(values, smooth)
    if x == "wall":
        known_steps, known_wall = run.progress()
        if len(known_steps) < 2:
            raise ResultsError(f"run {run.path} has no metrics.csv rows to time it by; use --x steps")
        steps = np.interp(steps, known_steps, known_wall)  # episodes after the last log row: clamped
    return steps, values


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never needs a display
        import matplotlib.pyplot as plt
    except ImportError:
        raise ResultsError("plotting needs matplotlib: pip install 'rlf[plot]'") from None
    return plt


def _save(figure, output: Path, dpi: int) -> None:
    from rlf.storage.checkpoint import atomic_write

    output = Path(output)
    fmt = output.suffix.lstrip(".").lower() or None
    # a new file renamed into place: a link at the name is replaced, never written through
    atomic_write(output, lambda handle: figure.savefig(handle, dpi=dpi, format=fmt))


def plot_profile(runs: Sequence[Run], output: Path, metric: str = "return", source: str = "train", last: int = 100,
                 reps: int = 2000, title: str | None = None, dpi: int = 110,
                 note: Callable[[str], None] | None = None) -> dict[str, int]:
    """Write the performance profiles of every group to ``output``; returns the runs drawn per group label."""
    from rlf.experiments.stats import performance_profile

    plt = _pyplot()
    scored = [(group, run_scores(group.runs, metric, source, last)) for group in group_runs(with_source(runs, source, note))]
    scored = [(group, scores) for group, scores in scored if len(scores)]
    if not scored:
        raise ResultsError(f"none of the runs has finished an episode with {metric!r} yet; nothing to plot")
    every = np.concatenate([scores for _, scores in scored])
    span = max(float(every.max() - every.min()), 1e-9)
    thresholds = np.linspace(every.min() - 0.05 * span, every.max() + 0.05 * span, GRID_POINTS)
    figure, axes = plt.subplots(figsize=(8, 4.8))
    drawn: dict[str, int] = {}
    try:
        for index, (group, scores) in enumerate(scored):
            color = f"C{index % 10}"
            profile = performance_profile([scores], thresholds, reps=reps)
            axes.plot(thresholds, profile["fraction"], color=color, linewidth=1.6,
                      label=f"{group.label} (n={len(scores)})", drawstyle="steps-post")
            axes.fill_between(thresholds, profile["low"], profile["high"], color=color, alpha=0.2, linewidth=0,
                              step="post")
            drawn[group.label] = len(scores)
        axes.set_xlabel(f"{metric}: score of a run (mean of its last {last} episodes) above")
        axes.set_ylabel("fraction of runs")
        axes.set_ylim(-0.02, 1.02)
        axes.set_title(title or f"Performance profiles of {metric} (95 % bootstrap bands over runs)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8, loc="best")
        figure.tight_layout()
        _save(figure, output, dpi)
    finally:
        plt.close(figure)
    return drawn


def plot_runs(runs: Sequence[Run], output: Path, metric: str = "return", x: str = "steps", smooth: int = 10,
              source: str = "train", title: str | None = None, dpi: int = 110,
              note: Callable[[str], None] | None = None) -> dict[str, int]:
    """Write the figure to ``output`` (format from its suffix: .png, .svg, .pdf); returns the number of
    grid points drawn per group label."""
    if x not in X_AXES:
        raise ResultsError(f"unknown x axis {x!r}; use steps or wall")
    if smooth < 1:
        raise ResultsError("--smooth must be at least 1 (1 = no smoothing)")
    plt = _pyplot()
    groups = group_runs(with_source(runs, source, note))
    figure, axes = plt.subplots(figsize=(8, 4.8))
    drawn: dict[str, int] = {}
    try:
        for group in groups:
            curves = [run_curve(run, metric, x, smooth, source) for run in group.runs]
            curves = [(cx, cy) for cx, cy in curves if len(cx)]
            if not curves:
                continue
            color = f"C{len(drawn) % 10}"  # groups with nothing to draw yet take no colour
            label = f"{group.label} (n={len(curves)})"
            low, high = max(cx[0] for cx, _ in curves), min(cx[-1] for cx, _ in curves)
            if len(curves) == 1 or high <= low:
                cx, cy = max(curves, key=lambda c: len(c[0]))
                axes.plot(cx, cy, color=color, label=label, linewidth=1.6)
                drawn[group.label] = len(cx)
                continue
            grid = np.linspace(low, high, GRID_POINTS)
            stacked = np.stack([np.interp(grid, cx, cy) for cx, cy in curves])
            axes.plot(grid, stacked.mean(axis=0), color=color, label=label, linewidth=1.6)
            axes.fill_between(grid, stacked.min(axis=0), stacked.max(axis=0), color=color, alpha=0.2, linewidth=0)
            drawn[group.label] = len(grid)
        if not drawn:
            raise ResultsError(f"none of the runs has finished an episode with {metric!r} yet; nothing to plot")
        axes.set_xlabel("env steps" if x == "steps" else "wall time (s)")
        where = {"train": "training episodes", "eval": "periodic evaluation", "final": "final evaluation",
                 "final-stochastic": "final stochastic evaluation",
                 "final-fixed-start": "final evaluation from the fixed start",
                 "learner": "learner, per log interval"}[source]
        axes.set_ylabel(f"{metric} ({where}, moving average of {smooth})" if smooth > 1 else f"{metric} ({where})")
        axes.set_title(title or f"{metric} per {'env step' if x == 'steps' else 'wall second'}")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8, loc="best")
        figure.tight_layout()
        _save(figure, output, dpi)
    finally:
        plt.close(figure)
    return drawn
