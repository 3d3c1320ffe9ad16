"""Averages of metric rows, as the logs and the progress bar show them."""

from __future__ import annotations

import math


def average_metrics(rows: list[dict[str, float]]) -> dict[str, float]:
    """Mean of each key over the rows that have it."""
    if rows:
        keys = rows[0].keys()
        if all(row.keys() == keys for row in rows):  # the common case (a learner reporting each step)
            return {key: math.fsum([row[key] for row in rows]) / len(rows) for key in keys}
    totals: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.items():
            totals.setdefault(key, []).append(float(value))
    return {key: math.fsum(values) / len(values) for key, values in totals.items()}


def episode_means(rows) -> dict[str, float]:
    if not rows:
        return {}
    means = average_metrics(list(rows))
    means.pop("episode", None)
    return {f"mean_{k}" if not k.startswith("mean") else k: v for k, v in means.items()}
