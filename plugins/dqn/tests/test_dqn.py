"""DQN's parts: registration, config errors, networks, the learner's update rules and its state."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from gymnasium import spaces
from rlf_plugin_dqn import DQNConfig, FrameReplay, build_agent, build_learner
from rlf_plugin_dqn.model import direct_forward, observation_layout

import rlf
from rlf import BuildContext, ConfigError, EnvSpec, IncompatibleError, RunConfig, Transitions
from rlf.errors import PluginRunError
from rlf.testing import restore_only


def make(registry, env, tmp_path, *settings, algorithm="dqn"):
    return rlf.make(algorithm, env, registry=registry,
                    overrides=["progress=false", f"run_dir='{tmp_path}'", "checkpoint_interval=0", *settings])


def read_rows(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


def vector_spec(agents=("agent",), dim=3, n_actions=2, num_envs=1, metadata=None) -> EnvSpec:
    box = spaces.Box(-10, 10, shape=(dim,), dtype=np.float32)
    return EnvSpec("test", tuple(agents), {a: box for a in agents}, {a: spaces.Discrete(n_actions) for a in agents},
                   len(agents) > 1, num_envs, metadata or {})


def build(spec: EnvSpec, seed=0, **config):
    context = BuildContext(spec, DQNConfig(**config), RunConfig(algorithm="dqn", env="test"), seed, "cpu")
    agent = build_agent(context)
    return agent, build_learner(context, agent)


def transitions(spec: EnvSpec, obs, actions, rewards, next_obs, terminated, truncated=None, alive=None):
    n = spec.num_envs

    def per_agent(value, dtype):
        return {a: np.asarray(value, dtype=dtype).reshape(n, *np.shape(value)[1:]) for a in spec.agent_ids}

    truncated = np.zeros(n, bool) if truncated is None else truncated
    alive = {a: np.ones(n, bool) for a in spec.agent_ids} if alive is None else alive
    return Transitions(per_agent(obs, np.float32), per_agent(actions, np.int64), per_agent(rewards, np.float32),
                       per_agent(next_obs, np.float32), per_agent(terminated, bool), per_agent(truncated, bool),
                       alive, np.asarray(terminated, bool) | np.asarray(truncated, bool))


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


# -- registration and configuration ----------------------------------------------------------------


def test_registered_as_off_policy_dqn_and_the_entry_point_does_not_import_torch():
    spec = rlf.registry().algorithm("dqn")
    assert spec.family == "off-policy" and spec.default_env == "gym:CartPole-v1"
    assert spec.action_spaces == ("discrete",) and spec.multi_agent
    code = ("import sys, rlf; spec = rlf.registry().algorithm('dqn'); "
            "print(spec.config.__name__, 'torch' in sys.modules)")
    env = {**os.environ, "RLF_LOAD_PLUGINS": "dqn", "RLF_STRICT_PLUGINS": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split() == ["DQNConfig", "False"]


@pytest.mark.parametrize(("setting", "message"), [
    ("algo.buffer_size=10", "algo.buffer_size: must be at least batch_size (64) (got 10)"),
    ("algo.hidden_sizes=[0]", "algo.hidden_sizes.0: Input should be greater than or equal to 1"),
    ("algo.gamma=1.5", "algo.gamma: Input should be less than or equal to 1"),
    ("algo.target_update=5", "unknown key 'algo.target_update'; did you mean algo.target_update_interval?"),
    ("algo.exploration.schedule=linear", "algo.exploration.schedule: Input should be"),
])
def test_bad_settings_are_one_line_config_errors(setting, message):
    with pytest.raises(ConfigError) as caught:
        rlf.make("dqn", overrides=[setting])
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_continuous_actions_are_refused(tmp_path):
    with pytest.raises(IncompatibleError, match="supports discrete action spaces"):
        rlf.make("dqn", "gym:Pendulum-v1", overrides=["steps=10", "progress=false", f"run_dir='{tmp_path}'"]).train()


def test_a_cnn_is_refused_for_vector_observations():
    with pytest.raises(ConfigError, match="algo.network='cnn' needs image observations"):
        build(vector_spec(), network="cnn")


# -- networks -------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(4, 84, 84), (84, 84, 4), (4, 40, 40)])
def test_uint8_image_stacks_get_the_nature_cnn_and_frame_replay(shape):
    box = spaces.Box(0, 255, shape=shape, dtype=np.uint8)
    spec = EnvSpec("img", ("agent",), {"agent": box}, {"agent": spaces.Discrete(5)}, False, 2)
    agent, learner = build(spec, buffer_size=100, batch_size=8)
    net = agent.networks["agent"]
    assert net.torso.encoder.image and isinstance(net.torso.body[0][0], torch.nn.Conv2d)
    assert isinstance(learner.buffers["agent"], FrameReplay)
    obs = np.random.default_rng(0).integers(0, 256, size=(3, *shape), dtype=np.uint8)
    assert agent.q_values("agent", obs).shape == (3, 5)
    # the scaling by 1/255 happens inside the network: uint8 in, same result as the float image
    assert torch.allclose(net(torch.as_tensor(obs)), net(torch.as_tensor(obs.astype(np.float32))))


def test_small_images_fall_back_to_the_mlp_and_float_images_get_the_cnn_unscaled():
    # the image rule is rlf.nn's, shared with PPO: any dtype, sides >= 36, at most 16 channels
    small = spaces.Box(0, 255, shape=(4, 10, 10), dtype=np.uint8)
    assert not observation_layout(small, "auto").image
    floats = spaces.Box(0, 1, shape=(4, 84, 84), dtype=np.float32)
    layout = observation_layout(floats, "auto")
    assert layout.image and not layout.pixels and layout.dtype == np.float32
    spec = EnvSpec("img", ("agent",), {"agent": floats}, {"agent": spaces.Discrete(3)}, False, 2)
    agent, learner = build(spec, buffer_size=100, batch_size=8)
    assert agent.networks["agent"].torso.encoder.image and agent.networks["agent"].torso.encoder.scale == 1.0
    assert not isinstance(learner.buffers["agent"], FrameReplay)
    assert learner.buffers["agent"].obs.dtype == np.float32


def test_discrete_observations_are_one_hot_encoded():
    spec = EnvSpec("ids", ("agent",), {"agent": spaces.Discrete(5, start=1)}, {"agent": spaces.Discrete(2)},
                   False, 2)
    agent, learner = build(spec, buffer_size=100, batch_size=8)
    assert agent.networks["agent"].torso.encoder.shape == (5,)
    assert agent.q_values("agent", np.array([1, 5], dtype=np.int64)).shape == (2, 2)
    assert learner.buffers["agent"].obs.dtype == np.int64


def test_dueling_head_averages_advantages_to_zero():
    agent, _ = build(vector_spec(n_actions=4), dueling=True)
    net = agent.networks["agent"]
    obs = torch.randn(16, 3)
    features = net.torso(obs)
    q = net(obs)
    torch.testing.assert_close(q.mean(dim=1, keepdim=True), net.value(features))


def test_the_direct_forward_is_the_networks_own_and_sees_weight_updates():
    agent, learner = build(vector_spec(n_actions=3), hidden_sizes=[16, 8], buffer_size=64, batch_size=8,
                           min_replay_size=8, lr=0.1, backend="fast")
    net = agent.networks["agent"]
    forward = direct_forward(net)
    assert forward is not net  # a plain MLP takes the direct path
    obs = torch.randn(32, 3)
    assert torch.equal(forward(obs), net(obs))  # same ops, same order: equal to the bit
    spec = vector_spec(n_actions=3)
    rng = np.random.default_rng(0)
    for _ in range(8):
        learner.learn(transitions(spec, rng.normal(size=(1, 3)), [1], [1.0], rng.normal(size=(1, 3)), [False]))
    before = forward(obs)
    learner._optimize("agent")  # the optimizer writes the parameters in place
    assert not torch.equal(forward(obs), before)
    assert torch.equal(forward(obs), net(obs))
    target = learner._forward["agent"][1]
    assert torch.equal(target(obs), learner.targets["agent"](obs))


@pytest.mark.parametrize("kind", ["dueling", "one_hot", "image"])
def test_networks_other_than_plain_mlps_keep_their_module_forward(kind):
    if kind == "dueling":
        agent, _ = build(vector_spec(), dueling=True)
    elif kind == "one_hot":
        agent, _ = build(EnvSpec("ids", ("agent",), {"agent": spaces.Discrete(5)}, {"agent": spaces.Discrete(2)},
                                 False, 1), buffer_size=100, batch_size=8)
    else:
        image = spaces.Box(0, 255, shape=(4, 36, 36), dtype=np.uint8)
        agent, _ = build(EnvSpec("img", ("agent",), {"agent": image}, {"agent": spaces.Discrete(2)}, False, 1),
                         buffer_size=100, batch_size=8)
    net = agent.networks["agent"]
    assert direct_forward(net) is net


# -- the learner's rules --------------------------------------------------------------------------


def test_learning_starts_at_the_larger_of_min_replay_size_and_batch_size():
    spec = vector_spec()
    agent, learner = build(spec, min_replay_size=5, batch_size=12, buffer_size=100)
    rng = np.random.default_rng(0)
    for step in range(1, 13):
        metrics = learner.learn(transitions(spec, rng.normal(size=(1, 3)), [1], [1.0], rng.normal(size=(1, 3)),
                                            [False]))
        assert (step == 12) == ("loss" in metrics), step
    assert learner.train_steps == 1


def test_train_frequency_counts_env_steps_and_gradient_steps_multiply():
    spec = vector_spec(num_envs=4)
    agent, learner = build(spec, min_replay_size=1, batch_size=1, train_frequency=8, gradient_steps=3)
    rng = np.random.default_rng(0)
    for _ in range(10):  # 40 env steps: 5 updates of 3 gradient steps
        learner.learn(transitions(spec, rng.normal(size=(4, 3)), [0, 1, 0, 1], np.ones(4), rng.normal(size=(4, 3)),
                                  np.zeros(4, bool)))
    assert learner.env_steps == 40 and learner.train_steps == 15


def test_one_target_sync_counter_is_shared_by_all_agents():
    spec = vector_spec(agents=("a", "b"))
    agent, learner = build(spec, min_replay_size=1, batch_size=1, target_update_interval=3)
    rng = np.random.default_rng(0)

    def step():
        learner.learn(transitions(spec, rng.normal(size=(1, 3)), [1], [1.0], rng.normal(size=(1, 3)), [False]))

    step()  # optimizer steps 1 (a) and 2 (b): no sync yet
    assert learner.train_steps == 2
    assert not same_weights(learner.targets["a"], agent.networks["a"])
    step()  # step 3 (a) syncs every target, then step 4 (b) moves b's online network on
    assert learner.train_steps == 4
    assert same_weights(learner.targets["a"], agent.networks["a"])
    assert not same_weights(learner.targets["b"], agent.networks["b"])
    # per-agent counters would not have synced anything before each agent's own third step


@pytest.mark.parametrize(("terminated", "expected"), [(True, 1.0), (False, 2.0)])
@pytest.mark.parametrize("double_dqn", [True, False])
def test_only_termination_cuts_the_bootstrap(terminated, expected, double_dqn):
    """One transition s -a-> s with reward 1, gamma 0.5: Q(s, a) -> 1 if terminated, else 1/(1-0.5)."""
    spec = vector_spec()
    agent, learner = build(spec, min_replay_size=1, batch_size=8, gamma=0.5, lr=0.01, target_update_interval=5,
                           double_dqn=double_dqn, hidden_sizes=[16])
    state = np.array([[0.5, -0.2, 0.1]])
    learner.learn(transitions(spec, state, [1], [1.0], state, [terminated], truncated=np.array([not terminated])))
    for _ in range(400):
        learner._optimize("agent")
    q = agent.q_values("agent", state.astype(np.float32))[0, 1].item()
    assert q == pytest.approx(expected, abs=0.05)


def test_rows_where_the_agent_took_no_part_are_not_stored():
    spec = vector_spec(agents=("a", "b"), num_envs=3)
    agent, learner = build(spec, buffer_size=100)
    alive = {"a": np.array([True, False, True]), "b": np.array([False, False, True])}
    for _ in range(4):
        learner.learn(transitions(spec, np.ones((3, 3)), [0, 1, 0], np.ones(3), np.ones((3, 3)), np.zeros(3, bool),
                                  alive=alive))
    assert len(learner.buffers["a"]) == 8 and len(learner.buffers["b"]) == 4
    assert learner.env_steps == 8  # env 1 had nobody in it


def test_observations_are_checked_against_the_encoders_state_dim(registry, tmp_path):
    # during a run the core reports the plugin's refusal as one line naming it (the ValueError is its cause)
    with pytest.raises(PluginRunError, match="dqn.*build_agent: ValueError: .*promises state_dim=2"):
        make(registry, "walkers", tmp_path, "steps=10", "env.promised_dim=2").train()
    spec = vector_spec(dim=3, metadata={"encoder": type("Encoder", (), {"state_dim": 3})()})
    _, learner = build(spec)
    with pytest.raises(ValueError, match="has shape \\(4,\\), but the env's encoder promises state_dim=3"):
        learner.learn(transitions(spec, np.zeros((1, 4)), [0], [0.0], np.zeros((1, 4)), [False]))


def test_exploration_schedules_advance_from_on_progress(registry, tmp_path):
    per_step = make(registry, "gym:CartPole-v1", tmp_path / "a", "steps=640", "algo.exploration.schedule=per_step",
                    "algo.exploration.decay_steps=1280", "algo.exploration.end=0.1")
    per_step.train()
    assert per_step.strategy.agent.epsilon.value == pytest.approx(1.0 - 0.5 * 0.9)
    per_episode = make(registry, "gym:CartPole-v1", tmp_path / "b", "steps=640", "algo.exploration.decay=0.9")
    per_episode.train()
    episodes = per_episode.strategy.tracker.episodes
    assert per_episode.strategy.agent.epsilon.value == pytest.approx(max(0.05, 0.9 ** episodes))
    rows = read_rows(tmp_path / "b" / "episodes.csv")
    # the epsilon an episode is logged with is the one its steps used (decay comes after it)
    assert [float(r["epsilon"]) for r in rows[:3]] == pytest.approx([1.0, 0.9, 0.81])


# -- state: checkpoints and reproducibility --------------------------------------------------------


def flat(tree, prefix=""):
    if isinstance(tree, dict):
        out = {}
        for key, value in tree.items():
            out.update(flat(value, f"{prefix}/{key}"))
        return out
    if isinstance(tree, list | tuple):
        return flat(dict(enumerate(tree)), prefix) if tree and isinstance(tree[0], dict | list) else {prefix: tree}
    return {prefix: tree}


def assert_same_tree(a, b):
    a, b = flat(a), flat(b)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]), err_msg=key)


def test_resume_restores_weights_optimizer_counters_exploration_rngs_and_replay(registry, tmp_path):
    algo = make(registry, "gym:CartPole-v1", tmp_path / "run", "steps=1200", "algo.min_replay_size=300",
                "algo.target_update_interval=50")
    algo.train()
    saved = algo.strategy.state_dict()
    assert len(saved["learner"]["replay"]["agent"]["actions"]) == 1200
    path = algo.save(tmp_path / "ckpt.rlf")
    loaded = rlf.load(path, registry=registry, overrides=[f"run_dir='{tmp_path / 'loaded'}'"])
    restore_only(loaded)
    assert_same_tree(loaded.strategy.state_dict()["agent"], saved["agent"])
    restored = loaded.strategy.learner.state_dict()
    restored.pop("torch_rng"), saved["learner"].pop("torch_rng")
    assert_same_tree(restored, saved["learner"])
    assert loaded.strategy.learner.train_steps == algo.strategy.learner.train_steps > 0
    # and it goes on learning from the restored replay
    resumed = rlf.load(path, registry=registry, overrides=[f"run_dir='{tmp_path / 'resumed'}'"])
    resumed.train(steps=1400)
    assert len(resumed.strategy.learner.buffers["agent"]) == 1400
    assert resumed.strategy.learner.train_steps > algo.strategy.learner.train_steps


def test_save_replay_false_leaves_the_replay_out(registry, tmp_path):
    algo = make(registry, "gym:CartPole-v1", tmp_path / "run", "steps=300", "save_replay=false")
    algo.train()
    assert "replay" not in algo.strategy.state_dict()["learner"]
    loaded = rlf.load(algo.save(tmp_path / "ckpt.rlf"), registry=registry,
                      overrides=[f"run_dir='{tmp_path / 'loaded'}'"])
    restore_only(loaded)
    assert len(loaded.strategy.learner.buffers["agent"]) == 0


def test_the_synchronous_mode_is_reproducible_for_a_seed(registry, tmp_path):
    results = []
    for name in ("a", "b"):
        algo = make(registry, "gym:CartPole-v1", tmp_path / name, "steps=700", "seed=5", "algo.min_replay_size=300")
        algo.train()
        results.append(((tmp_path / name / "episodes.csv").read_text(), algo.strategy.agent.state_dict()))
    assert results[0][0] == results[1][0]
    assert_same_tree(results[0][1], results[1][1])


# -- images end to end ----------------------------------------------------------------------------


@pytest.mark.parametrize("channels_last", [False, True])
def test_image_env_trains_on_the_cnn_with_frame_replay_and_resumes_with_it(registry, tmp_path, channels_last):
    algo = make(registry, "lit-side", tmp_path / "run", "steps=400", "num_envs=2", "algo.min_replay_size=64",
                "algo.batch_size=16", "algo.torch_threads=1", f"env.channels_last={str(channels_last).lower()}")
    algo.train()
    buffer = algo.strategy.learner.buffers["agent"]
    assert isinstance(buffer, FrameReplay) and len(buffer) == 400
    # one new frame per step, plus at most one first frame per episode (fewer when a reset stack
    # happens to equal the last one: this env has only two distinct frames)
    assert 400 <= buffer.frames_written <= 400 + algo.strategy.tracker.episodes + 2
    loaded = rlf.load(algo.save(tmp_path / "ckpt.rlf"), registry=registry,
                      overrides=[f"run_dir='{tmp_path / 'loaded'}'"])
    loaded.train(steps=420)
    assert len(loaded.strategy.learner.buffers["agent"]) == 420


@pytest.mark.slow
def test_the_cnn_learns_which_side_is_lit(registry, tmp_path):
    algo = make(registry, "lit-side", tmp_path, "steps=1500", "seed=1", "num_envs=2", "env.side=36",
                "algo.min_replay_size=200", "algo.batch_size=32", "algo.lr=0.001", "algo.train_frequency=2",
                "algo.target_update_interval=100", "algo.exploration.schedule=per_step",
                "algo.exploration.decay_steps=800", "algo.torch_threads=1")
    algo.train()
    assert algo.evaluate(episodes=10)["return"] >= 9.5  # random play scores 5 of 10; measured: 10


def test_cartpole_preset_is_rl_zoo_settings(tmp_path):
    """The installed preset is what `rlf train dqn --env gym:CartPole-v1` layers under the user's settings,
    and says what docs/BENCHMARKS.md measured: rl-zoo's CartPole settings."""
    algo = rlf.make("dqn", "gym:CartPole-v1", overrides=["progress=false", f"run_dir='{tmp_path}'"], preset=True)
    assert algo.resolved.preset == "rlf_plugin_dqn/presets/cartpole.toml"
    run, config = algo.resolved.run, algo.resolved.algo
    assert (run.env, run.steps, run.num_envs) == ("gym:CartPole-v1", 50_000, 1)
    assert (config.lr, config.batch_size, config.buffer_size, config.min_replay_size) == (0.0023, 64, 100_000, 1000)
    assert (config.train_frequency, config.gradient_steps, config.target_update_interval) == (256, 128, 128)
    assert (config.double_dqn, config.hidden_sizes, config.max_grad_norm) == (False, [256, 256], 10.0)
    exploration = config.exploration
    assert (exploration.schedule, exploration.start, exploration.end, exploration.decay_steps) == (
        "per_step", 1.0, 0.04, 8000)
