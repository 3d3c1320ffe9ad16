import numpy as np
import pytest
import torch
from gymnasium import spaces
from ppo_helpers import make_context, make_spec, sample_obs, single_spec
from rlf_plugin_ppo import PPOAgent, PPOConfig, build_agent
from rlf_plugin_ppo.model import CNNActorCritic, MLPActorCritic

from rlf import SINGLE_AGENT, ConfigError
from rlf.nn import set_threads

IMAGE = spaces.Box(0, 255, shape=(4, 84, 84), dtype=np.uint8)


def obs_batch(spec, n=6, seed=0):
    rng = np.random.default_rng(seed)
    return {a: sample_obs(spec.observation_spaces[a], (n,), rng) for a in spec.agent_ids}


def test_act_returns_actions_log_probs_and_values_for_every_env():
    spec = single_spec()
    agent = build_agent(make_context(spec))
    obs = obs_batch(spec, n=6)
    acting = agent.act(obs)
    actions = acting.actions[SINGLE_AGENT]
    extras = acting.extras[SINGLE_AGENT]
    assert actions.shape == (6,) and np.issubdtype(actions.dtype, np.integer)
    assert set(actions.tolist()) <= {0, 1}
    assert extras["log_prob"].shape == (6,) and extras["value"].shape == (6,)
    assert extras["value"].dtype == np.float32
    with torch.no_grad():
        logits, _ = agent.networks[SINGLE_AGENT](torch.as_tensor(obs[SINGLE_AGENT]))
    expected = torch.log_softmax(logits, -1)[torch.arange(6), torch.as_tensor(actions)].numpy()
    np.testing.assert_allclose(extras["log_prob"], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(agent.value(obs)[SINGLE_AGENT], extras["value"], rtol=1e-6)


def test_greedy_acting_is_the_argmax_and_exploration_samples():
    spec = single_spec(action_space=spaces.Discrete(5))
    agent = build_agent(make_context(spec))
    obs = obs_batch(spec, n=400)
    with torch.no_grad():
        logits, _ = agent.networks[SINGLE_AGENT](torch.as_tensor(obs[SINGLE_AGENT]))
    greedy = agent.act(obs, explore=False).actions[SINGLE_AGENT]
    np.testing.assert_array_equal(greedy, logits.argmax(-1).numpy())
    np.testing.assert_array_equal(greedy, agent.act(obs, explore=False).actions[SINGLE_AGENT])
    sampled = agent.act(obs, explore=True).actions[SINGLE_AGENT]
    # a fresh policy is near uniform: sampling must visit every action, unlike the argmax
    assert len(set(sampled.tolist())) == 5
    assert (sampled != greedy).mean() > 0.5


def test_same_seed_same_weights_and_samples_and_global_rng_untouched():
    spec = single_spec()
    torch.manual_seed(123)
    before = torch.get_rng_state().clone()
    a, b = PPOAgent(spec, PPOConfig(), 7), PPOAgent(spec, PPOConfig(), 7)
    assert torch.equal(torch.get_rng_state(), before)
    c = PPOAgent(spec, PPOConfig(), 8)
    obs = obs_batch(spec, n=64)
    for pa, pb in zip(a.networks[SINGLE_AGENT].parameters(), b.networks[SINGLE_AGENT].parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert not all(torch.equal(x, y) for x, y in zip(a.networks[SINGLE_AGENT].parameters(),
                                                     c.networks[SINGLE_AGENT].parameters(), strict=True))
    np.testing.assert_array_equal(a.act(obs).actions[SINGLE_AGENT], b.act(obs).actions[SINGLE_AGENT])


def test_state_dict_restores_weights_and_sampling_stream():
    spec = single_spec()
    agent = PPOAgent(spec, PPOConfig(), 1)
    obs = obs_batch(spec, n=32)
    agent.act(obs)
    state = agent.state_dict()
    assert all(isinstance(v, np.ndarray) for v in state["networks"][SINGLE_AGENT].values())
    expected = [agent.act(obs).actions[SINGLE_AGENT] for _ in range(3)]
    other = PPOAgent(spec, PPOConfig(), 99)
    other.load_state_dict(state)
    for want in expected:
        np.testing.assert_array_equal(other.act(obs).actions[SINGLE_AGENT], want)


def test_multi_agent_networks_are_independent_and_shaped_per_agent():
    spec = make_spec({"small": spaces.Box(-1, 1, (3,), np.float32), "big": spaces.Box(-1, 1, (7,), np.float32)},
                     {"small": spaces.Discrete(2), "big": spaces.Discrete(4)})
    agent = build_agent(make_context(spec))
    small, big = agent.networks["small"], agent.networks["big"]
    assert not {id(p) for p in small.parameters()} & {id(p) for p in big.parameters()}
    acting = agent.act(obs_batch(spec, n=5))
    assert acting.actions["small"].max() <= 1 and acting.actions["big"].shape == (5,)
    assert set(acting.extras) == {"small", "big"}
    # changing one agent's network leaves the other's outputs alone
    before = agent.value(obs_batch(spec, n=5))
    with torch.no_grad():
        for p in small.parameters():
            p.add_(1.0)
    after = agent.value(obs_batch(spec, n=5))
    np.testing.assert_array_equal(before["big"], after["big"])
    assert not np.allclose(before["small"], after["small"])


def test_discrete_action_start_and_discrete_observations():
    spec = single_spec(obs_space=spaces.Discrete(6, start=2), action_space=spaces.Discrete(3, start=-1))
    agent = build_agent(make_context(spec))
    obs = {SINGLE_AGENT: np.array([2, 3, 7, 7, 4])}
    actions = agent.act(obs).actions[SINGLE_AGENT]
    assert set(actions.tolist()) <= {-1, 0, 1}
    values = agent.value(obs)[SINGLE_AGENT]
    assert values[2] == values[3]  # identical states, identical one-hot encodings


def test_image_observations_get_the_cnn_which_scales_pixels():
    spec = single_spec(obs_space=IMAGE, action_space=spaces.Discrete(7), num_envs=2)
    agent = build_agent(make_context(spec))
    network = agent.networks[SINGLE_AGENT]
    assert isinstance(network, CNNActorCritic)
    acting = agent.act(obs_batch(spec, n=3))
    assert acting.actions[SINGLE_AGENT].shape == (3,) and acting.extras[SINGLE_AGENT]["value"].shape == (3,)
    bright = torch.full((2, 4, 84, 84), 255, dtype=torch.uint8)
    with torch.no_grad():
        logits, value = network(bright)
        features = network.torso(torch.ones(2, 4, 84, 84))
        np.testing.assert_allclose(logits.numpy(), network.policy_head(features).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(value.numpy(), network.value_head(features).squeeze(-1).numpy(), rtol=1e-5)


def test_channels_last_images_and_network_choice():
    hwc = spaces.Box(0, 255, shape=(84, 84, 3), dtype=np.uint8)
    agent = build_agent(make_context(single_spec(obs_space=hwc)))
    assert isinstance(agent.networks[SINGLE_AGENT], CNNActorCritic)
    assert agent.act({SINGLE_AGENT: np.zeros((2, 84, 84, 3), np.uint8)}).actions[SINGLE_AGENT].shape == (2,)
    forced = build_agent(make_context(single_spec(obs_space=IMAGE), network="mlp", hidden_sizes=[8]))
    assert isinstance(forced.networks[SINGLE_AGENT], MLPActorCritic)


def test_cnn_on_vector_observations_is_a_one_line_config_error():
    with pytest.raises(ConfigError, match="algo.network='cnn' needs image observations") as error:
        build_agent(make_context(single_spec(), network="cnn"))
    assert "\n" not in str(error.value)


def test_small_networks_run_torch_on_one_thread():
    threads = torch.get_num_threads()
    try:
        build_agent(make_context(single_spec()))
        assert torch.get_num_threads() == 1
        build_agent(make_context(single_spec(), torch_threads=2))
        assert torch.get_num_threads() == 2
    finally:
        set_threads(threads)


def test_cnn_agents_act_on_one_thread_and_learn_on_torchs_default():
    from rlf.nn import DEFAULT_TORCH_THREADS

    threads = torch.get_num_threads()
    try:
        spec = single_spec(obs_space=IMAGE, action_space=spaces.Discrete(7), num_envs=2)
        agent = build_agent(make_context(spec))
        assert torch.get_num_threads() == 1
        agent.threads.for_learning()
        assert torch.get_num_threads() == DEFAULT_TORCH_THREADS
        agent.act(obs_batch(spec, n=2))
        assert torch.get_num_threads() == 1
        pinned = build_agent(make_context(spec, torch_threads=2))
        pinned.threads.for_learning()
        assert torch.get_num_threads() == 2
        pinned.act(obs_batch(spec, n=2))
        assert torch.get_num_threads() == 2
    finally:
        set_threads(threads)


def test_numpy_acting_samples_the_torch_policy():
    """The numpy backend's acting (small MLPs on the CPU) gives the torch path's log-probs and values and samples
    its categorical distribution."""
    import gymnasium as gym
    from rlf_plugin_ppo.config import PPOConfig
    from rlf_plugin_ppo.model import PPOAgent

    import rlf
    from rlf.envs import describe_env

    spec = describe_env("gym:CartPole-v1", gym.make("CartPole-v1"), 1)
    assert PPOAgent(spec, PPOConfig(), seed=3).numpy_acting == {}  # the torch backend is the default
    agent = PPOAgent(spec, PPOConfig(backend="numpy"), seed=3)
    assert rlf.SINGLE_AGENT in agent.numpy_acting
    obs = {rlf.SINGLE_AGENT: np.tile(np.array([[0.1, -0.2, 0.05, 0.3]], np.float32), (4000, 1))}
    fast = agent._act_numpy(obs, explore=True)
    slow = agent._act_torch(obs, explore=True)
    np.testing.assert_allclose(fast.extras[rlf.SINGLE_AGENT]["value"], slow.extras[rlf.SINGLE_AGENT]["value"],
                               rtol=1e-5, atol=1e-6)
    log_probs = fast.extras[rlf.SINGLE_AGENT]["log_prob"]
    actions = fast.actions[rlf.SINGLE_AGENT]
    with torch.no_grad():
        logits, _ = agent.networks[rlf.SINGLE_AGENT](torch.from_numpy(obs[rlf.SINGLE_AGENT][:1]))
    probs = torch.softmax(logits, -1).numpy()[0]
    np.testing.assert_allclose(log_probs, np.log(probs[actions]), rtol=1e-5, atol=1e-6)
    # 4000 draws: the frequency of action 1 within 5 standard errors of its probability
    assert abs(actions.mean() - probs[1]) < 5 * np.sqrt(probs[1] * probs[0] / 4000)
    np.testing.assert_array_equal(agent._act_numpy(obs, explore=False).actions[rlf.SINGLE_AGENT],
                                  np.full(4000, probs.argmax()))
