"""The agent and learner on hand-made rollouts: update directions, units, masks, sharing between
processes, config, registration."""

import multiprocessing as mp
import subprocess
import sys

import numpy as np
import pytest
import torch
from gymnasium import spaces
from rlf_plugin_a3c.config import A3CConfig
from rlf_plugin_a3c.factory import build_agent, build_learner

import rlf

OBS = spaces.Box(-1.0, 1.0, (2,), np.float32)


def make_pair(obs_space=OBS, n_actions=2, agent_ids=("a",), device="cpu", **config):
    config.setdefault("async_workers", 0)  # synchronous unless a test is about sharing
    spec = rlf.EnvSpec("toy", agent_ids, {a: obs_space for a in agent_ids},
                       {a: spaces.Discrete(n_actions) for a in agent_ids}, len(agent_ids) > 1, 8)
    context = rlf.BuildContext(env_spec=spec, config=A3CConfig(**config),
                               run=rlf.RunConfig(algorithm="a3c", env="toy"), seed=0, device=device)
    agent = build_agent(context)
    return agent, build_learner(context, agent)


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
def test_the_policy_moves_towards_positive_advantages(normalize):
    agent, learner = make_pair(normalize_returns=normalize)
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


def test_the_critic_learns_normalised_returns_but_answers_in_reward_units():
    agent, learner = make_pair(normalize_returns=True, lr=3e-3)
    obs = np.array([[[1.0, 0.0], [0.0, 1.0]] * 4], dtype=np.float32)  # (1, 8, 2): two states
    returns = np.tile([250.0, -50.0], 4)[None]
    for _ in range(400):
        learner.learn(rollout(obs, np.zeros((1, 8), dtype=np.int64), np.zeros((1, 8)), returns))
    values = agent.value({"a": obs[0, :2]})["a"]
    np.testing.assert_allclose(values, [250.0, -50.0], rtol=0.05, atol=5.0)
    normalizer = agent.normalizers["a"]
    assert normalizer.mean == pytest.approx(100.0) and normalizer.std == pytest.approx(150.0)
    assert agent.act({"a": obs[0, :2]}).extras["a"]["value"] == pytest.approx(values)


def test_new_return_statistics_leave_the_critic_s_answers_in_reward_units_unchanged():
    agent, _ = make_pair()
    obs = {"a": np.random.default_rng(0).uniform(-1, 1, (16, 2)).astype(np.float32)}
    before = agent.value(obs)["a"]
    for returns in ([-5.0, -5.0, -5.0], [300.0, -120.0, 7.0], np.random.default_rng(1).normal(-40, 90, 500)):
        agent.observe_returns("a", np.asarray(returns))
        np.testing.assert_allclose(agent.value(obs)["a"], before, rtol=1e-4, atol=1e-3)
    assert agent.normalizers["a"].count == 506


def test_rows_where_the_agent_was_not_alive_do_not_touch_the_update():
    obs = np.random.default_rng(0).uniform(-1, 1, (2, 8, 2)).astype(np.float32)
    actions = np.tile([0, 1], 8).reshape(2, 8)
    advantages = np.linspace(-3, 3, 16).reshape(2, 8)
    alive = np.ones((2, 8), dtype=bool)
    alive[1, 4:] = False
    poisoned_adv, poisoned_ret = advantages.copy(), advantages.copy()
    poisoned_adv[~alive], poisoned_ret[~alive] = np.nan, np.inf
    masked_agent, masked = make_pair()
    masked.learn(rollout(obs, actions, poisoned_adv, poisoned_ret, alive))
    clean_agent, clean = make_pair()
    clean.learn(rollout(obs[alive][None], actions[alive][None], advantages[alive][None], advantages[alive][None]))
    for (name, p), q in zip(masked_agent.nets["a"].named_parameters(), clean_agent.nets["a"].parameters(),
                            strict=True):
        assert torch.isfinite(p).all(), name
        torch.testing.assert_close(p, q, msg=name)
    assert masked_agent.normalizers["a"].count == 12


def test_an_agent_absent_from_a_whole_rollout_is_skipped():
    agent, learner = make_pair(agent_ids=("hunter", "prey"))
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


def _learn_in_a_child(learner, batch, seed):
    def child():
        learner.context.seed = seed  # what the core's worker does before worker_init
        learner.worker_init()
        learner.learn(batch)

    process = mp.get_context("fork").Process(target=child)
    process.start()
    process.join(timeout=60)
    assert process.exitcode == 0


def _toy_batch():
    obs = np.random.default_rng(0).uniform(-1, 1, (5, 1, 2)).astype(np.float32)
    actions = np.ones((5, 1), dtype=np.int64)
    return rollout(obs, actions, np.full((5, 1), 2.0), np.linspace(-40, 60, 5)[:, None])


def test_learning_in_forked_workers_updates_the_one_shared_model():
    agent, learner = make_pair(async_workers=2)
    net = agent.nets["a"]
    assert all(p.is_shared() for p in net.parameters())
    before = [p.detach().clone() for p in net.parameters()]
    for seed in (11, 12):
        _learn_in_a_child(learner, _toy_batch(), seed)
    # Both workers' updates reached this process: weights, Adam's moments and step count, statistics.
    assert all(not torch.equal(b, p) for b, p in zip(before, net.parameters(), strict=True))
    state = learner.optimizers["a"].state
    assert all(float(state[p]["step"]) == 2.0 for p in net.parameters())
    assert all(state[p]["exp_avg_sq"].abs().sum() > 0 for p in net.parameters())
    assert agent.normalizers["a"].count == 10
    assert learner.updates == 2


def test_a_loaded_optimizer_state_is_shared_again():
    agent, learner = make_pair(async_workers=2)
    _learn_in_a_child(learner, _toy_batch(), 11)
    saved_agent, saved_learner = agent.state_dict(), learner.state_dict()
    agent2, learner2 = make_pair(async_workers=2)
    agent2.load_state_dict(saved_agent)
    learner2.load_state_dict(saved_learner)
    assert learner2.updates == 1 and agent2.normalizers["a"].count == 5
    _learn_in_a_child(learner2, _toy_batch(), 12)
    state = learner2.optimizers["a"].state
    assert all(float(state[p]["step"]) == 2.0 for p in agent2.nets["a"].parameters())
    assert agent2.normalizers["a"].count == 10 and learner2.updates == 2


def test_each_worker_samples_from_its_own_seed():
    agent, learner = make_pair(async_workers=2, n_actions=5)
    obs = {"a": np.zeros((64, 2), dtype=np.float32)}
    draws = []
    for seed in (1001, 2001, 1001):
        learner.context.seed = seed
        learner.worker_init()
        draws.append(agent.act(obs).actions["a"])
    assert np.array_equal(draws[0], draws[2]) and not np.array_equal(draws[0], draws[1])


def test_shared_workers_need_the_model_in_cpu_memory():
    with pytest.raises(rlf.ConfigError, match="device='cpu'"):
        make_pair(async_workers=2, device="cuda")


def test_default_settings_give_n_step_advantages_bootstrapped_at_the_rollout_end():
    config = A3CConfig()
    assert (config.rollout_steps, config.gae_lambda) == (5, 1.0)
    rng = np.random.default_rng(1)
    rewards, values = (rng.normal(size=(5, 3)).astype(np.float32) for _ in range(2))
    last = rng.normal(size=3).astype(np.float32)
    next_values = np.concatenate([values[1:], last[None]])
    terminated = np.zeros((5, 3), dtype=bool)
    terminated[2, 1] = True
    advantages, returns = rlf.compute_gae(rewards, values, next_values, terminated, terminated, config.gamma,
                                          config.gae_lambda)
    for env in range(3):
        for t in range(5):
            target, discount = 0.0, 1.0
            for k in range(t, 5):
                target += discount * rewards[k, env]
                discount *= config.gamma
                if terminated[k, env]:
                    discount = 0.0
                    break
            target += discount * last[env]
            assert returns[t, env] == pytest.approx(target, rel=1e-5, abs=1e-5)
            assert advantages[t, env] == pytest.approx(target - values[t, env], rel=1e-5, abs=1e-5)


def test_sampling_is_reproducible_from_the_saved_state():
    agent, _ = make_pair(n_actions=5)
    obs = {"a": np.zeros((64, 2), dtype=np.float32)}
    state = agent.state_dict()
    first = agent.act(obs).actions["a"]
    agent.load_state_dict(state)
    assert np.array_equal(agent.act(obs).actions["a"], first)
    assert len(set(first.tolist())) > 2  # it really samples
    greedy = agent.act(obs, explore=False)
    assert len(set(greedy.actions["a"].tolist())) == 1
    np.testing.assert_allclose(np.exp(greedy.extras["a"]["log_prob"]), probs(agent, obs["a"]).max(1), rtol=1e-5)


def test_a_checkpoint_of_other_settings_is_refused_in_one_line():
    source, _ = make_pair(normalize_returns=False)
    for other in ({"hidden_sizes": [32]}, {"normalize_returns": True}):
        agent, _ = make_pair(**other)
        with pytest.raises(rlf.CheckpointError, match="hidden_sizes, normalize_returns") as error:
            agent.load_state_dict(source.state_dict())
        assert "\n" not in str(error.value)


def test_observations_are_encoded_by_their_space():
    agent, _ = make_pair(obs_space=spaces.Discrete(6))
    assert agent.inputs("a", np.array([0, 5])).tolist() == np.eye(6)[[0, 5]].tolist()
    low, high = np.array([-9.0, 0.0, -np.inf], dtype=np.float32), np.array([9.0, 4.0, np.inf], dtype=np.float32)
    box = spaces.Box(low, high)
    agent, _ = make_pair(obs_space=box)
    encoded = agent.inputs("a", np.array([[9.0, 0.0, 123.0], [-9.0, 2.0, -5.0]], dtype=np.float32)).numpy()
    np.testing.assert_allclose(encoded, [[1.0, -1.0, 123.0], [-1.0, 0.0, -5.0]])
    with pytest.raises(rlf.IncompatibleError, match="Box or Discrete"):
        make_pair(obs_space=spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2))))


def test_defaults_are_ppage_s():
    config = A3CConfig()
    assert (config.async_workers, config.rollout_steps, config.lr, config.entropy_coef) == (4, 5, 1e-3, 0.01)
    assert config.normalize_returns


@pytest.mark.parametrize(("override", "needle"), [
    ("algo.async_workers=65", "algo.async_workers"),
    ("algo.hidden_sizes=[64, 0]", "hidden width"),
    ("algo.lr=0", "algo.lr"),
    ("algo.entropy=0.1", "did you mean algo.entropy_coef"),
])
def test_bad_settings_are_one_line_errors(override, needle):
    with pytest.raises(rlf.ConfigError, match=needle) as error:
        rlf.make("a3c", "gym:CartPole-v1", overrides=[override])
    assert "\n" not in str(error.value)


def test_continuous_actions_are_refused_with_a_hint(tmp_path):
    algo = rlf.make("a3c", "gym:Pendulum-v1", overrides=["steps=10", "progress=false",
                                                                  f"run_dir='{tmp_path}'"])
    with pytest.raises(rlf.IncompatibleError, match="discrete"):
        algo.train()


def test_registration_is_light_and_complete():
    code = ("import sys; from rlf.plugins.loading import load_registry; spec = load_registry(strict=True).algorithm("
            "'a3c'); assert 'torch' not in sys.modules, 'torch imported at discovery'; "
            "print(spec.family, spec.action_spaces, spec.multi_agent, spec.config.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["async-workers", "('discrete',)", "True", "A3CConfig"]
