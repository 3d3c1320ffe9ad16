"""What the actor-critic family's plugins (actor-critic, a2c, a3c) share in their tests: a learner
built on a toy spec, hand-made rollouts, and the unit tests every member must pass.

A member's test module defines a ``family`` fixture returning its ``Family`` and imports the shared
tests by name, so pytest collects them there::

    from rlf_plugin_actor_critic.testing import Family, test_the_policy_moves_towards_positive_advantages

    @pytest.fixture
    def family():
        return Family("a2c", A2CConfig, build_agent, build_learner, actor_lr="actor_lr", critic_lr="critic_lr")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

import rlf

OBS = spaces.Box(-1.0, 1.0, (2,), np.float32)


SPARSE = ["env.scenario='sparse-10x10'"]
"""The predator-prey scenario the family's learning tests use (capture is rare for random play)."""


def random_baseline(algorithm: str, overrides: list[str], episodes: int = 300, seed: int = 0) -> dict[str, float]:
    """Capture rate, mean steps to capture and mean length of uniformly random learners, played
    through the env's own PettingZoo API: no rlf training machinery and no other algorithm involved
    (needs rlf-plugin-predator-prey, which each member's test extra installs)."""
    from rlf_plugin_predator_prey import capture_summary, random_play

    resolved = rlf.resolve(algorithm, "predator-prey", overrides=overrides)
    return capture_summary(random_play(resolved.env, episodes, seed))


def tail_stats(rows: list[dict[str, float]], count: int) -> dict[str, float]:
    """Capture rate and mean steps to capture over the last ``count`` training episodes."""
    last = rows[-count:]
    captured = [r["steps_to_capture"] for r in last if r["capture"] == 1.0]
    return {"capture": float(np.mean([r["capture"] for r in last])),
            "steps_to_capture": float(np.mean(captured)) if captured else float("inf")}


@dataclass(frozen=True)
class Family:
    algorithm: str
    config: type
    build_agent: Callable[..., Any]
    build_learner: Callable[..., Any]
    actor_lr: str = "lr"
    """The setting that sets the actor's learning rate (one ``lr`` for both, or ``actor_lr``)."""
    critic_lr: str = "lr"
    defaults: dict[str, Any] = field(default_factory=dict)
    """Settings every toy learner gets unless a test sets them (A3C: no worker processes)."""
    strategy: str = "on-policy"
    """The strategy family it registers (``spec.family``)."""

    def make_pair(self, obs_space=OBS, n_actions=2, agent_ids=("a",), device="cpu", **config):
        spec = rlf.EnvSpec("toy", agent_ids, {a: obs_space for a in agent_ids},
                           {a: spaces.Discrete(n_actions) for a in agent_ids}, len(agent_ids) > 1, 8)
        context = rlf.BuildContext(env_spec=spec, config=self.config(**{**self.defaults, **config}),
                                   run=rlf.RunConfig(algorithm=self.algorithm, env="toy"), seed=0, device=device)
        agent = self.build_agent(context)
        return agent, self.build_learner(context, agent)


def rollout(obs, actions, advantages, returns, alive=None, agent="a"):
    """A Rollout of (T, N) arrays where only what the learner reads matters."""
    zeros = np.zeros(actions.shape, dtype=np.float32)
    alive = np.ones(actions.shape, dtype=bool) if alive is None else alive
    one = {agent: None}

    def per(value):
        return dict.fromkeys(one, value)

    return rlf.Rollout(obs=per(obs), next_obs=per(obs), actions=per(actions), rewards=per(zeros),
                       terminated=per(zeros.astype(bool)), dones=per(zeros.astype(bool)), alive=per(alive),
                       extras=per({}), values=per(zeros), next_values=per(zeros),
                       advantages=per(advantages.astype(np.float32)), returns=per(returns.astype(np.float32)))


def probs(agent, obs):
    with torch.no_grad():
        logits, _ = agent.nets["a"](agent.inputs("a", obs))
    return torch.softmax(logits, -1).numpy()


@pytest.mark.parametrize("normalize", [True, False])
def test_the_policy_moves_towards_positive_advantages(family, normalize):
    agent, learner = family.make_pair(normalize_returns=normalize, **{family.actor_lr: 1e-3})
    obs = np.zeros((1, 8, 2), dtype=np.float32)
    actions = np.tile([0, 1], 4)[None]
    advantages = np.where(actions == 1, 5.0, -5.0)
    before = probs(agent, obs[0])[0, 1]
    assert before == pytest.approx(0.5, abs=0.05)  # the small policy-head gain starts near uniform
    for _ in range(100):
        metrics = learner.learn(rollout(obs, actions, advantages, advantages))
    assert probs(agent, obs[0])[0, 1] > 0.9
    assert {"policy_loss", "value_loss", "entropy", "grad_norm"} <= set(metrics)
    assert learner.updates == 100


def test_the_critic_learns_normalised_returns_but_answers_in_reward_units(family):
    agent, learner = family.make_pair(normalize_returns=True, **{family.critic_lr: 3e-3})
    obs = np.array([[[1.0, 0.0], [0.0, 1.0]] * 4], dtype=np.float32)  # (1, 8, 2): two states
    returns = np.tile([250.0, -50.0], 4)[None]
    for _ in range(400):
        learner.learn(rollout(obs, np.zeros((1, 8), dtype=np.int64), np.zeros((1, 8)), returns))
    values = agent.value({"a": obs[0, :2]})["a"]
    np.testing.assert_allclose(values, [250.0, -50.0], rtol=0.05, atol=5.0)
    normalizer = agent.normalizers["a"]
    assert normalizer.mean == pytest.approx(100.0) and normalizer.std == pytest.approx(150.0)
    assert agent.act({"a": obs[0, :2]}).extras["a"]["value"] == pytest.approx(values)


def test_new_return_statistics_leave_the_critic_s_answers_in_reward_units_unchanged(family):
    agent, _ = family.make_pair(normalize_returns=True)
    obs = {"a": np.random.default_rng(0).uniform(-1, 1, (16, 2)).astype(np.float32)}
    before = agent.value(obs)["a"]
    for returns in ([-5.0, -5.0, -5.0], [300.0, -120.0, 7.0], np.random.default_rng(1).normal(-40, 90, 500)):
        agent.observe_returns("a", np.asarray(returns))
        np.testing.assert_allclose(agent.value(obs)["a"], before, rtol=1e-4, atol=1e-3)
    assert agent.normalizers["a"].count == 506


def test_rows_where_the_agent_was_not_alive_do_not_touch_the_update(family):
    obs = np.random.default_rng(0).uniform(-1, 1, (2, 8, 2)).astype(np.float32)
    actions = np.tile([0, 1], 8).reshape(2, 8)
    advantages = np.linspace(-3, 3, 16).reshape(2, 8)
    alive = np.ones((2, 8), dtype=bool)
    alive[1, 4:] = False
    poisoned_adv, poisoned_ret = advantages.copy(), advantages.copy()
    poisoned_adv[~alive], poisoned_ret[~alive] = np.nan, np.inf
    masked_agent, masked = family.make_pair(normalize_returns=True)
    masked.learn(rollout(obs, actions, poisoned_adv, poisoned_ret, alive))
    clean_agent, clean = family.make_pair(normalize_returns=True)
    clean.learn(rollout(obs[alive][None], actions[alive][None], advantages[alive][None], advantages[alive][None]))
    for (name, p), q in zip(masked_agent.nets["a"].named_parameters(), clean_agent.nets["a"].parameters(),
                            strict=True):
        assert torch.isfinite(p).all(), name
        torch.testing.assert_close(p, q, msg=name)
    assert masked_agent.normalizers["a"].count == 12


def test_an_agent_absent_from_a_whole_rollout_is_skipped(family):
    agent, learner = family.make_pair(agent_ids=("hunter", "prey"))
    obs = np.zeros((1, 8, 2), dtype=np.float32)
    actions = np.zeros((1, 8), dtype=np.int64)
    data = {"hunter": np.ones((1, 8)), "prey": np.ones((1, 8))}
    alive = {"hunter": np.ones((1, 8), dtype=bool), "prey": np.zeros((1, 8), dtype=bool)}
    zeros = {a: np.zeros((1, 8), dtype=np.float32) for a in data}
    batch = rlf.Rollout(obs={a: obs for a in data}, next_obs={a: obs for a in data},
                        actions={a: actions for a in data}, rewards=zeros,
                        terminated={a: z.astype(bool) for a, z in zeros.items()},
                        dones={a: z.astype(bool) for a, z in zeros.items()}, alive=alive, extras={a: {} for a in data},
                        values=zeros, next_values=zeros, advantages=data, returns=data)
    prey_before = [p.clone() for p in agent.nets["prey"].parameters()]
    metrics = learner.learn(batch)
    assert "policy_loss/hunter" in metrics and "policy_loss/prey" not in metrics
    for before, after in zip(prey_before, agent.nets["prey"].parameters(), strict=True):
        assert torch.equal(before, after)


def test_sampling_is_reproducible_from_the_saved_state(family):
    agent, _ = family.make_pair(n_actions=5)
    obs = {"a": np.zeros((64, 2), dtype=np.float32)}
    state = agent.state_dict()
    first = agent.act(obs).actions["a"]
    agent.load_state_dict(state)
    assert np.array_equal(agent.act(obs).actions["a"], first)
    assert len(set(first.tolist())) > 2  # it really samples
    greedy = agent.act(obs, explore=False)
    assert len(set(greedy.actions["a"].tolist())) == 1
    np.testing.assert_allclose(np.exp(greedy.extras["a"]["log_prob"]), probs(agent, obs["a"]).max(1), rtol=1e-5)


def test_a_checkpoint_of_other_settings_is_refused_in_one_line(family):
    source, _ = family.make_pair(normalize_returns=False)
    for other in ({"hidden_sizes": [32]}, {"normalize_returns": True}):
        agent, _ = family.make_pair(**other)
        with pytest.raises(rlf.CheckpointError, match="hidden_sizes, normalize_returns") as error:
            agent.load_state_dict(source.state_dict())
        assert "\n" not in str(error.value)


def test_observations_are_encoded_by_their_space(family):
    agent, _ = family.make_pair(obs_space=spaces.Discrete(6))
    assert agent.inputs("a", np.array([0, 5])).tolist() == np.eye(6)[[0, 5]].tolist()
    low, high = np.array([-9.0, 0.0, -np.inf], dtype=np.float32), np.array([9.0, 4.0, np.inf], dtype=np.float32)
    box = spaces.Box(low, high)
    agent, _ = family.make_pair(obs_space=box)
    encoded = agent.inputs("a", np.array([[9.0, 0.0, 123.0], [-9.0, 2.0, -5.0]], dtype=np.float32)).numpy()
    np.testing.assert_allclose(encoded, [[1.0, -1.0, 123.0], [-1.0, 0.0, -5.0]])
    with pytest.raises(rlf.IncompatibleError, match="Box or Discrete"):
        family.make_pair(obs_space=spaces.MultiBinary(2))
    # a Tuple's parts side by side, each as it would be alone
    agent, _ = family.make_pair(obs_space=spaces.Tuple((spaces.Discrete(2), box)))
    encoded = agent.inputs("a", (np.array([1]), np.array([[9.0, 0.0, 123.0]], dtype=np.float32))).numpy()
    np.testing.assert_allclose(encoded, [[0.0, 1.0, 1.0, -1.0, 123.0]])


def test_continuous_actions_are_refused_with_a_hint(family, tmp_path):
    algo = rlf.make(family.algorithm, "gym:Pendulum-v1", overrides=["steps=10", "progress=false",
                                                                  f"run_dir='{tmp_path}'"])
    with pytest.raises(rlf.IncompatibleError, match="discrete"):
        algo.train()


# -- the family's end-to-end checks: each member calls them with its own measured budget -------------


def make_run(algorithm: str, tmp_path, env: str, *overrides: str):
    return rlf.make(algorithm, env, overrides=["progress=false", f"run_dir='{tmp_path}'", *overrides])


def check_predator_learns(algorithm: str, tmp_path, *overrides: str, steps_ratio: float):
    """A predator chasing a random prey (the sparse 10x10 scenario) catches sooner and more often than a
    random predator: in training (the last 200 episodes, ``steps_to_capture`` within ``steps_ratio`` of
    random's) and greedily; the curves and losses reach the core's CSVs."""
    from rlf.testing import read_csv

    algo = make_run(algorithm, tmp_path, "predator-prey", *SPARSE, "seed=0", "log_interval=2000", *overrides)
    algo.train()
    baseline = random_baseline(algorithm, SPARSE)
    assert baseline["capture"] < 0.4
    episodes = read_csv(tmp_path / "episodes.csv")
    late = tail_stats(episodes, 200)
    assert late["capture"] >= baseline["capture"] + 0.4
    assert late["steps_to_capture"] <= steps_ratio * baseline["steps_to_capture"]
    greedy = algo.evaluate(episodes=50)
    assert greedy["capture"] >= 0.9
    assert greedy["steps_to_capture"] <= 0.5 * baseline["steps_to_capture"]
    columns = set().union(*episodes)  # steps_to_capture is only written for episodes that captured
    assert {"episode", "return/predator_0", "return", "length", "capture", "steps_to_capture"} <= columns
    metrics = read_csv(tmp_path / "metrics.csv")
    assert len(metrics) >= 10
    assert {"policy_loss", "value_loss", "entropy", "grad_norm"} <= set(metrics[-1])
    return algo


def check_finite_on_the_3v3_grid(algorithm: str, tmp_path, *overrides: str):
    """450+ episodes of the 3v3 grid with both teams learning keep every metric, weight and return
    statistic finite (the source's A3C overflowed its return normaliser within ~450 episodes)."""
    from rlf.testing import all_finite, read_csv

    algo = make_run(algorithm, tmp_path, "predator-prey", "env.scenario='grid-3v3'", "env.learners='all'",
                    "env.max_steps=25", "steps=12000", "log_interval=500", *overrides)
    algo.train()
    assert algo.counters["episodes"] >= 450
    metrics = read_csv(tmp_path / "metrics.csv")
    agents = [f"{team}_{i}" for team in ("predator", "prey") for i in range(3)]
    assert {f"value_loss/{a}" for a in agents} <= set(metrics[-1])
    for row in metrics:
        assert all(np.isfinite(value) for value in row.values()), row
    state = algo.strategy.state_dict()
    assert all_finite(state["agent"]) and all_finite(state["learner"])
    for agent_id, normalizer in algo.strategy.agent.normalizers.items():
        assert normalizer.count > 0 and np.isfinite(normalizer.std) and normalizer.std > 1.0, agent_id
    return algo


def test_registration_is_light_and_complete(family):
    import subprocess
    import sys

    code = ("import sys; from rlf.plugins.loading import load_registry; spec = load_registry(strict=True).algorithm("
            f"{family.algorithm!r}); assert 'torch' not in sys.modules, 'torch imported at discovery'; "
            "print(spec.family, spec.action_spaces, spec.multi_agent, spec.config.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [family.strategy, "('discrete',)", "True", family.config.__name__]


def check_one_line_config_error(algorithm: str, override: str, needle: str) -> None:
    with pytest.raises(rlf.ConfigError, match=needle) as error:
        rlf.make(algorithm, "gym:CartPole-v1", overrides=[override])
    assert "\n" not in str(error.value)


GOAL_CELLS = "gym:rlf.envs.goal_cells:GoalCells-v0"
"""A Dict observation (a 16x16x1 uint8 image and a 4-vector), from the core (rlf.envs.goal_cells)."""


def check_dict_observations(algorithm: str, tmp_path) -> None:
    """Dict observations reach the agent and the learner whole, with in-process and subprocess envs: both
    parts encoded side by side (uint8 bounds onto [-1, 1]), rollouts learned from, numbers finite, and a
    checkpoint of such a run continues."""
    from rlf.testing import all_finite, read_csv

    for vector in ("sync", "async"):
        run = tmp_path / vector
        algo = make_run(algorithm, run, GOAL_CELLS, "steps=256", "num_envs=4", "seed=0", f"vector={vector}",
                        "log_interval=64", "loggers=['csv']")
        algo.train()
        agent = algo.strategy.agent
        encoded = agent.inputs("agent", {"image": np.full((3, 16, 16, 1), 255, np.uint8),
                                         "vector": np.ones((3, 4), np.float32)})
        assert tuple(encoded.shape) == (3, 16 * 16 + 4) and float(encoded.min()) == 1.0
        rows = read_csv(run / "metrics.csv")
        assert rows and all(all_finite(row) for row in rows)
        assert all_finite(algo.strategy.weights())
        assert algo.evaluate(episodes=2)["episodes"] == 2
        again = rlf.load(run)
        again.train(steps=320)
        assert again.counters["env_steps"] >= 320
