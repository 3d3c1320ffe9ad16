"""PPO with memory (algo.memory): the recurrent agent's contract with the on-policy strategy, the update's
sequences, checkpoints, and learning a task no memoryless policy can. Exact kill -9 resume:
tests/reliability/test_exact_resume.py, case ppo-lstm."""

from __future__ import annotations

import csv

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces
from ppo_helpers import make_pair, single_spec
from pydantic import ValidationError
from rlf_plugin_ppo import PPOConfig
from rlf_plugin_ppo.recurrent import RecurrentActorCritic, Sequences

from rlf import Resume, Rollout, compute_gae
from rlf.cli.commands import main

A = "agent"
OBS = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)


def recurrent_pair(memory="lstm", num_envs=3, **config):
    config = {"memory": memory, "memory_size": 8, "hidden_sizes": [8], **config}
    return make_pair(single_spec(obs_space=OBS, num_envs=num_envs), **config)


def acted_rollout(agent, steps=12, seed=0, end_rate=0.2) -> Rollout:
    """A rollout collected as the core's on-policy strategy does it: act, step, value of truncated final
    observations before ``reset_state``, ``reset_state`` for the envs whose episode ended."""
    rng = np.random.default_rng(seed)
    n = agent.spec.num_envs
    columns = {name: [] for name in ("obs", "next_obs", "actions", "rewards", "terminated", "dones")}
    extras: dict[str, list] = {}
    obs = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    for _ in range(steps):
        acting = agent.act({A: obs})
        next_obs = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
        ended = rng.random(n) < end_rate
        for name, value in (("obs", obs), ("next_obs", next_obs), ("actions", acting.actions[A]),
                            ("rewards", rng.normal(size=n).astype(np.float32)), ("terminated", ended),
                            ("dones", ended)):
            columns[name].append(value)
        for key, value in acting.extras[A].items():
            extras.setdefault(key, []).append(value)
        if ended.any():
            agent.reset_state(ended)
        obs = rng.uniform(-1, 1, (n, 3)).astype(np.float32)  # a fresh episode's first observation
    stacked = {name: np.stack(values) for name, values in columns.items()}
    extras = {key: np.stack(values) for key, values in extras.items()}
    values = extras["value"].astype(np.float32)
    next_values = np.concatenate([values[1:], agent.value({A: obs})[A][None]])
    advantages, returns = compute_gae(stacked["rewards"], values, next_values, stacked["terminated"],
                                      stacked["dones"], 0.99, 0.95)
    per = {name: {A: array} for name, array in stacked.items()}
    return Rollout(per["obs"], per["next_obs"], per["actions"], per["rewards"], per["terminated"], per["dones"],
                   {A: np.ones((steps, n), dtype=bool)}, {A: extras}, {A: values}, {A: next_values},
                   {A: advantages}, {A: returns})


def test_sequences_cut_the_rollout_and_mark_fresh_states_inside_them():
    dones = np.zeros((5, 2), dtype=bool)
    dones[1, 0] = True  # env 0's episode ends at step 1: step 2 starts fresh
    dones[3, 1] = True  # env 1's at step 3: step 4, the first of a sequence, is fresh in its stored state
    alive = np.ones((5, 2), dtype=bool)
    layout = Sequences.of(dones, alive, 2)
    # sequences (time-major): starts 0, 2, 4 for envs 0 and 1; rows index the flattened (T*N) rollout
    assert layout.starts.tolist() == [0, 1, 4, 5, 8, 9]
    assert layout.rows[:, 0].tolist() == [0, 2] and layout.rows[:, 3].tolist() == [5, 7]
    assert layout.valid[:, 4].tolist() == [True, False]  # the last sequence has one real step, then padding
    assert layout.resets.sum() == 0  # both ends fall on a sequence's last step
    whole = Sequences.of(dones, alive, 0)
    assert whole.count == 2 and whole.resets[:, 0].tolist() == [False, False, True, False, False]
    assert whole.resets[:, 1].tolist() == [False, False, False, False, True]


@pytest.mark.parametrize("memory", ["lstm", "gru"])
@pytest.mark.parametrize("sequence_length", [0, 5])
@pytest.mark.parametrize("memory_critic", [True, False])
def test_the_update_re_runs_exactly_the_policy_that_acted(memory, sequence_length, memory_critic):
    agent, learner = recurrent_pair(memory, memory_critic=memory_critic, sequence_length=sequence_length)
    rollout = acted_rollout(agent)
    network = agent.networks[A]
    layout = Sequences.of(rollout.dones[A], rollout.alive[A], sequence_length)
    obs = torch.as_tensor(rollout.obs[A].reshape(-1, 3))
    memory_rows = torch.as_tensor(rollout.extras[A]["memory"].reshape(-1, network.width)[layout.starts])
    with torch.no_grad():
        logits, values = network.sequence(obs[torch.as_tensor(layout.rows.reshape(-1))], memory_rows,
                                          torch.as_tensor(layout.resets, dtype=torch.float32))
    keep = layout.valid.reshape(-1)
    rows = layout.rows.reshape(-1)[keep]
    log_probs = torch.log_softmax(logits[torch.as_tensor(keep)], -1).numpy()
    acted = rollout.actions[A].reshape(-1)[rows]
    np.testing.assert_allclose(log_probs[np.arange(len(rows)), acted],
                               rollout.extras[A]["log_prob"].reshape(-1)[rows], atol=1e-5)
    np.testing.assert_allclose(values.numpy()[keep], rollout.values[A].reshape(-1)[rows], atol=1e-5)
    assert sorted(rows.tolist()) == list(range(rollout.obs[A].shape[0] * 3))  # every step, once
    metrics = learner.learn(rollout)
    # the first minibatch scores the rollout with the policy that acted: ratio 1, nothing clipped
    assert np.isfinite(metrics["policy_loss"]) and metrics["approx_kl"] >= 0


def test_memory_carries_the_past_and_resets_only_where_an_episode_ended():
    agent, _ = recurrent_pair()
    obs = np.full((3, 3), 0.5, dtype=np.float32)
    first = agent.act({A: obs}, explore=False).extras[A]
    assert np.all(first["memory"] == 0)  # every env starts fresh
    before = agent.memory[A].clone()
    value = agent.value({A: obs})[A]
    assert torch.equal(agent.memory[A], before)  # a value estimate does not advance the state
    assert value.shape == (3,)
    agent.reset_state(np.array([False, True, False]))
    second = agent.act({A: obs}, explore=False).extras[A]["memory"]
    assert np.all(second[1] == 0) and np.all(second[0] != 0) and np.array_equal(second[0], second[2])
    # the same observation from another state gives another value: the policy reads its memory
    assert not np.isclose(agent.act({A: obs}, explore=False).extras[A]["value"][1],
                          agent.act({A: obs}, explore=False).extras[A]["value"][1])


def test_memory_is_in_the_checkpoint_and_fresh_episodes_drop_it():
    agent, _ = recurrent_pair()
    rng = np.random.default_rng(1)
    for _ in range(4):
        agent.act({A: rng.uniform(-1, 1, (3, 3)).astype(np.float32)})
    state = agent.state_dict()
    assert state["memory"][A].shape == (3, agent.networks[A].width)
    copy, _ = recurrent_pair(seed=9)
    copy.load_state_dict(state)
    probe = {A: rng.uniform(-1, 1, (3, 3)).astype(np.float32)}
    np.testing.assert_array_equal(copy.act(probe).extras[A]["memory"], agent.act(probe).extras[A]["memory"])
    copy.on_resume(Resume(env_step=0, iterations=0, episodes=0, episodes_restored=False))
    assert np.all(copy.act(probe).extras[A]["memory"] == 0)
    # an evaluation acts on one env: its rows start from zeros, not from training's eight
    assert np.all(agent.act({A: probe[A][:1]}).extras[A]["memory"] == 0)


def test_recurrent_settings_are_checked_in_one_line():
    with pytest.raises(ValidationError, match="algo.backend='numpy' has no recurrent policy"):
        PPOConfig(memory="lstm", backend="numpy")
    with pytest.raises(ValidationError):
        PPOConfig(memory="rnn")
    agent, _ = recurrent_pair()
    assert isinstance(agent.networks[A], RecurrentActorCritic) and not agent.rows_independent
    with pytest.raises(NotImplementedError, match="feed-forward export"):
        agent.export_policy(A)


def test_a_gaussian_policy_with_memory_acts_within_the_bounds_and_learns_from_its_raw_samples():
    agent, learner = make_pair(single_spec(obs_space=OBS, action_space=spaces.Box(-1, 1, (2,), np.float32), num_envs=3),
                               memory="gru", memory_size=8, hidden_sizes=[8])
    acting = agent.act({A: np.zeros((3, 3), np.float32)})
    assert acting.actions[A].shape == (3, 2) and np.all(np.abs(acting.actions[A]) <= 1)
    assert {"raw_action", "memory", "log_prob", "value"} <= set(acting.extras[A])


# -- learning: a task only memory solves ----------------------------------------------------------------
RECALL_ID = "RecallTestCue-v0"


class RecallCue(gymnasium.Env):
    """Step 0 shows a cue (one of two); the next ``delay`` steps show nothing; then a prompt asks for the
    cue: the answer pays 1 if it names the cue, and ends the episode. Without memory the prompt says
    nothing about the cue, so the best memoryless policy answers right half the time (return 0.5)."""

    def __init__(self, delay: int = 3):
        self.delay = delay
        self.observation_space = spaces.Box(0.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def _obs(self) -> np.ndarray:
        obs = np.zeros(3, dtype=np.float32)
        if self._t == 0:
            obs[self._cue] = 1.0
        elif self._t == self.delay + 1:
            obs[2] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t, self._cue = 0, int(self.np_random.integers(2))
        return self._obs(), {}

    def step(self, action):
        answering = self._t == self.delay + 1
        reward = float(answering and int(action) == self._cue)
        self._t += 1
        return self._obs(), reward, answering, False, {}


if RECALL_ID not in gymnasium.registry:
    gymnasium.register(RECALL_ID, entry_point=RecallCue)


@pytest.mark.parametrize(("memory", "learns"), [("lstm", True), ("none", False)])
def test_an_lstm_policy_learns_to_recall_a_cue_that_a_memoryless_one_cannot(memory, learns, tmp_path):
    run = tmp_path / "run"
    assert main(["train", "ppo", "--env", f"gym:{__name__}:{RECALL_ID}", "--steps", "12288", "--seed", "0",
                 "--no-progress", "--set", "num_envs=8", "--set", "algo.rollout_steps=32",
                 "--set", "algo.minibatches=2", "--set", "algo.epochs=8", "--set", "algo.lr=0.003",
                 "--set", f"algo.memory='{memory}'", "--set", "algo.memory_size=16", "--set", "algo.hidden_sizes=[16]",
                 "--set", "eval_interval=12288", "--set", "eval_episodes=40", "--set", "loggers=['csv']",
                 "--set", "vector=sync", "--run-dir", str(run)]) == 0
    with open(run / "eval.csv") as handle:
        final = float(list(csv.DictReader(handle))[-1]["return"])
    if learns:
        assert final >= 0.9, final  # perfect recall is 1.0
    else:
        assert final <= 0.75, final  # the prompt alone is worth 0.5 at best


def test_overlap_and_export_with_memory_from_the_command_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "ppo", "--env", "gym:rlf.envs.cartpole_positions:CartPolePositions-v1", "--steps", "512",
                 "--no-progress", "--set", "num_envs=2", "--set", "algo.rollout_steps=32", "--set", "algo.memory='gru'",
                 "--set", "algo.memory_size=8", "--set", "algo.overlap_update=true", "--set", "loggers=['csv']",
                 "--run-dir", str(run)]) == 0
    capsys.readouterr()
    assert main(["export", str(run), str(tmp_path / "agent.onnx")]) == 2
    error = capsys.readouterr().err.strip()
    assert "feed-forward export has no input" in error and "\n" not in error
    assert not (tmp_path / "agent.onnx").exists()
    assert main(["export", str(run), str(tmp_path / "agent.rlf")]) == 0
