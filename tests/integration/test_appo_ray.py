"""APPO's actors hosted by Ray: the actor-learner strategy takes the ray collector's actor pool unchanged
(here, where every plugin is installed together; the appo env has no Ray)."""

import csv
import logging
import multiprocessing as mp

import ray

import rlf


def rows(path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_ray_hosts_the_actors(tmp_path):
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=4, include_dashboard=False, object_store_memory=128 * 1024**2,
             logging_level=logging.WARNING)
    try:
        algo = rlf.make("appo", "gym:CartPole-v1", preset=True, overrides=[
            "progress=false", f"run_dir='{tmp_path}'", "checkpoint_interval=0", "log_interval=512",
            "steps=2048", "algo.actors=2", "vector=ray"])
        algo.train()
        assert mp.active_children() == []  # no local actor processes: the actors were Ray's
        assert algo.strategy.learner.updates == 2048 // 128
        # Ray's pool queues two calls per actor, each carrying the weights pushed by then
        assert all(0 <= float(row["staleness"]) <= 16 for row in rows(tmp_path / "metrics.csv"))
        assert len(rows(tmp_path / "episodes.csv")) > 10
    finally:
        ray.shutdown()
