"""A Ray cluster simulated on this machine (Ray's own cluster utilities): a head node without env
resources and two worker nodes that offer them. Envs and off-policy actors run only where their resources are, and a
training run survives losing a whole worker node mid-run."""

import logging
import threading
import time

import numpy as np
import pytest
from rlf_plugin_ray import RayCollectorConfig, RayVector

import rlf
from rlf.envs.gym import GymEnvConfig, make_gym_env
from rlf.testing import read_csv

CARTPOLE = rlf.EnvFactory(make_gym_env, GymEnvConfig(id="CartPole-v1"))
SMALL_STORE = 80 * 1024**2


@pytest.fixture(scope="module")
def cluster():
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    # A dead node is noticed after ~1.5 s instead of Ray's default ~30 s.
    health = {"health_check_period_ms": 500, "health_check_failure_threshold": 3}
    made = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "object_store_memory": SMALL_STORE, "_system_config": health})
    workers = [made.add_node(num_cpus=4, resources={"env_node": 4}, object_store_memory=SMALL_STORE)
               for _ in range(2)]
    made.wait_for_nodes()
    ray.init(address=made.address, logging_level=logging.WARNING)
    yield made, workers
    ray.shutdown()
    made.shutdown()


def test_envs_are_placed_only_on_the_worker_nodes_that_offer_their_resources(cluster):
    made, workers = cluster
    worker_ids = {node.node_id for node in workers}
    assert made.head_node.node_id not in worker_ids
    envs = RayVector("gym:CartPole-v1", CARTPOLE, 4, RayCollectorConfig(
        envs_per_actor=1, resources={"env_node": 1}, scheduling="spread"))
    try:
        placement = envs.placement
        assert set(placement) == worker_ids  # on both workers, never on the head
        assert sorted(placement.count(node) for node in worker_ids) == [2, 2]
        envs.reset(seed=0)
        batch = envs.step({"agent": np.zeros(4, dtype=np.int64)})
        assert batch.obs["agent"].shape == (4, 4)
    finally:
        envs.close()


class Placement(rlf.Callback):
    """Records where the run's off-policy actors run, while they run."""

    def __init__(self):
        self.nodes: list[str] = []

    def on_start(self, trainer):
        self.nodes = list(trainer.strategy.pool.placement)


def test_off_policy_actors_run_on_the_worker_nodes_and_feed_the_learner(cluster, tmp_path):
    import ray

    made, workers = cluster
    alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    live_workers = {node.node_id for node in workers} & alive  # (another test removes a worker)
    placement = Placement()
    algo = rlf.make("dqn", "gym:CartPole-v1", overrides=[
        "steps=512", "num_envs=2", "seed=0", "progress=false", "checkpoint_interval=0", "algo.actors=2",
        "algo.min_replay_size=64", "algo.batch_size=32", "algo.hidden_sizes=[32]", "algo.actor_sync_interval=128",
        "vector=ray", "collector.resources={env_node = 1}", "collector.scheduling='spread'",
        f"run_dir='{tmp_path}'"])
    algo.train(callbacks=[placement])
    assert live_workers and set(placement.nodes) == live_workers  # spread over the workers, never on the head
    learner = algo.strategy.learner
    assert learner.env_steps == 512 and learner.train_steps > 0 and len(learner.buffers["agent"]) == 512


def test_training_survives_losing_a_worker_node_mid_run(cluster, tmp_path):
    from rlf_plugin_ray.testing import FlakyEnvPlugin

    from rlf.plugins import load_registry

    made, workers = cluster
    signals = tmp_path / "signals"
    signals.mkdir()
    algo = rlf.make("ppo", "flaky", registry=load_registry(extra_plugins=[("flaky", FlakyEnvPlugin())]), overrides=[
        "steps=800", "num_envs=4", "seed=2", "algo.rollout_steps=16", "progress=false", "log_interval=64",
        "vector=ray", "collector.envs_per_actor=1", "collector.resources={env_node = 1}",
        "collector.scheduling='spread'", "collector.max_restarts=2", "collector.restart_timeout_s=60",
        f"env.signals='{signals}'", "env.hold_at=40",
        f"run_dir='{tmp_path / 'run'}'"])
    failures = []

    def train():
        try:
            algo.train()
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            failures.append(exc)

    runner = threading.Thread(target=train)
    runner.start()
    try:
        deadline = time.monotonic() + 180
        while not (signals / "held").exists():  # one env holds its 40th step: the run is mid-rollout
            assert runner.is_alive() and time.monotonic() < deadline, failures
            time.sleep(0.1)
        envs = algo.strategy.envs
        lost, kept = workers[1], workers[0]
        on_lost = envs.placement.count(lost.node_id)
        assert on_lost == 2
        made.remove_node(lost, allow_graceful=False)
    finally:
        (signals / "go").touch()
        runner.join(timeout=300)
    assert not runner.is_alive() and not failures, failures
    assert algo.counters["env_steps"] == 800
    assert envs.placement == [kept.node_id] * 4  # the lost node's actors came back on the other one
    last = read_csv(tmp_path / "run" / "metrics.csv")[-1]
    # both lost envs restart; each drops its episode if that had taken a step: an untrained CartPole
    # episode lasts ~20 steps, so one of the two may have just reset when the node went (1 or 2)
    assert last["env_restarts"] == 2.0 and 1.0 <= last["episodes_dropped"] <= 2.0

