"""algo.overlap_update: PPO learns from a rollout in a worker thread while an acting copy collects the next."""

import pytest
from rlf_plugin_ppo import PPOLearner

import rlf
import rlf.training.on_policy as on_policy
from rlf import Learner
from rlf.errors import ConfigError, PluginRunError
from rlf.storage import checkpoint as ckpt
from rlf.testing import assert_trees_equal
from rlf.training.trainer import Interrupted

# 4 envs x 32 steps: 128 env steps per rollout
SHORT = ["num_envs=4", "vector='sync'", "algo.rollout_steps=32", "algo.epochs=2", "algo.minibatches=2",
         "algo.anneal_lr=false", "progress=false", "algo.overlap_update=true"]


def make(registry, path, steps, *extra):
    return rlf.make("ppo", "gym:CartPole-v1", registry=registry,
                    overrides=[f"steps={steps}", f"run_dir='{path}'", *SHORT, *extra])


def test_a_checkpoint_keeps_the_rollout_waiting_for_its_update(ppo_registry, tmp_path):
    algo = make(ppo_registry, tmp_path / "run", 1024, "checkpoint_interval=512")
    algo.train()
    strategy = algo.strategy
    assert strategy.behaviour is not None and strategy.behaviour is not strategy.agent
    # at 512 three rollouts were learned and the fourth, collected beside the third's update, waited:
    # the checkpoint holds it unlearned, so writing it changed nothing of what the run did next
    periodic = ckpt.load(tmp_path / "run" / "checkpoint-1.rlf")["strategy"]
    assert (periodic["learner"]["updates"], periodic["learner"]["env_steps"]) == (3, 384)
    assert periodic["ahead"]["rewards"]["agent"].shape == (32, 4)
    saved = ckpt.load(tmp_path / "run" / "checkpoint.rlf")["strategy"]
    # the run's last step learns its last rollout: nothing waits at the end
    assert (saved["learner"]["updates"], saved["learner"]["env_steps"]) == (8, 1024) and "ahead" not in saved
    assert strategy._ahead is None and strategy._learning is None
    # the acting copy was given the learner's weights and kept its own (advanced) sampling stream
    assert_trees_equal(saved["agent"]["networks"], strategy.learner.weights()["networks"])
    behaviour_stream = strategy.behaviour.generator.get_state().numpy()
    assert (saved["agent"]["generator"]["state"] == behaviour_stream).all()
    assert (behaviour_stream != strategy.agent.generator.get_state().numpy()).any()  # the learner's copy never acts


def test_resume_is_the_run_that_went_on(ppo_registry, tmp_path):
    """Going on in the same process and resuming from the file give the same weights, optimizer and
    sampling stream."""
    algo = make(ppo_registry, tmp_path / "run", 1024)
    algo.train()
    resumed = rlf.load(tmp_path / "run", registry=ppo_registry)
    algo.train(steps=2048)
    resumed.train(steps=2048)
    assert resumed.strategy.learner.updates == algo.strategy.learner.updates == 16
    for part in ("agent", "learner"):
        assert_trees_equal(resumed.strategy.state_dict()[part], algo.strategy.state_dict()[part], part)


def test_overlap_differs_from_the_synchronous_run_by_one_update_of_lag(ppo_registry, tmp_path):
    overlapped = make(ppo_registry, tmp_path / "a", 512)
    overlapped.train()
    plain = make(ppo_registry, tmp_path / "b", 512, "algo.overlap_update=false")
    plain.train()
    assert overlapped.strategy.learner.updates == plain.strategy.learner.updates == 4
    # the first two rollouts are acted by the same initial weights in both; from the third on they differ
    with pytest.raises(AssertionError):
        assert_trees_equal(overlapped.strategy.learner.weights(), plain.strategy.learner.weights())


def test_learns_cartpole_with_the_preset(ppo_registry, tmp_path):
    algo = rlf.make("ppo", "gym:CartPole-v1", registry=ppo_registry, preset=True, overrides=[
        "steps=30000", "seed=0", f"run_dir='{tmp_path}'", "progress=false", "algo.overlap_update=true",
        "algo.torch_threads=1"])
    algo.train()
    # measured 500 (greedy, 10 episodes) at 30k; a random policy gets ~22
    assert algo.evaluate(episodes=10, seed=100)["return"] >= 300


def test_a_learner_without_weights_is_refused_in_one_line(ppo_registry, tmp_path, monkeypatch):
    monkeypatch.setattr(PPOLearner, "weights", Learner.weights)
    with pytest.raises(ConfigError, match=r"^algo.overlap_update=true: algorithm 'ppo' has no Learner.weights\(\)"
                                          r".*set algo.overlap_update=false$"):
        make(ppo_registry, tmp_path / "run", 512).train()


def test_a_learner_failing_in_its_thread_is_the_plugin_error(ppo_registry, tmp_path, monkeypatch):
    calls = []
    original = PPOLearner.learn

    def failing(self, rollout):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("broken update")
        return original(self, rollout)

    monkeypatch.setattr(PPOLearner, "learn", failing)
    algo = make(ppo_registry, tmp_path / "run", 1024)
    with pytest.raises(PluginRunError, match="learn\\(\\).*broken update"):
        algo.train()
    assert algo.strategy._learning is None  # nothing left running in the worker thread


def test_interrupted_while_collecting_beside_an_update(ppo_registry, tmp_path, monkeypatch):
    """A KeyboardInterrupt that did not wait for the step's end (a second Ctrl-C, a host's own SIGINT
    handler) lands in the main thread mid-collection: the update finishes, the checkpoint holds only
    learned steps, and the run resumes to its budget."""
    calls = []
    original = on_policy.RolloutInProgress.collect

    def interrupting(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:  # the first step collects two rollouts; this is the third step's
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(on_policy.RolloutInProgress, "collect", interrupting)
    algo = make(ppo_registry, tmp_path / "run", 1024)
    with pytest.raises(Interrupted):
        algo.train()
    saved = ckpt.load(tmp_path / "run" / "checkpoint.rlf")
    assert saved["counters"]["env_steps"] == 384  # three rollouts counted ...
    assert saved["strategy"]["learner"]["env_steps"] == 384  # ... and all three learned
    monkeypatch.setattr(on_policy.RolloutInProgress, "collect", original)
    resumed = rlf.load(tmp_path / "run", registry=ppo_registry)
    resumed.train()
    assert resumed.counters["env_steps"] == 1024 and resumed.strategy.learner.env_steps == 1024
