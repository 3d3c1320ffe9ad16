"""sparse-10x10 is the learning benchmark of other plugins: random play rarely captures, and plain
tabular Q-learning on the default observation (the offset to the prey) learns to within a few
hundred episodes. Both facts are checked here so the scenario cannot silently drift."""

import numpy as np


def play(env, episodes, policy):
    captures, steps = [], []
    for _ in range(episodes):
        obs, _ = env.reset()
        while env.agents:
            actions = {a: policy(a, obs[a]) for a in env.agents}
            next_obs, rewards, terminated, _, infos = env.step(actions)
            yield obs, actions, rewards, next_obs, terminated
            obs = next_obs
        metrics = next(iter(infos.values()))["episode_metrics"]
        captures.append(metrics["capture"])
        steps.append(metrics.get("steps_to_capture", np.nan))
    play.result = (np.array(captures), np.array(steps))


def test_random_predator_rarely_captures(make):
    env = make(scenario="sparse-10x10")
    env.reset(seed=11)
    rng = np.random.default_rng(0)
    for _ in play(env, 400, lambda a, o: int(rng.integers(5))):
        pass
    captures, steps = play.result
    assert 0.1 < captures.mean() < 0.4  # about 0.27 (README)
    assert np.nanmean(steps) > 45


def test_tabular_q_learning_learns_to_capture(make):
    env = make(scenario="sparse-10x10")
    encoder = env.rlf_metadata["encoder"]
    env.reset(seed=5)
    rng = np.random.default_rng(5)
    table: dict[tuple[int, ...], np.ndarray] = {}
    epsilon = [1.0]

    def q(obs):
        return table.setdefault(encoder.hashable(obs), np.zeros(5))

    def policy(agent, obs):
        return int(rng.integers(5)) if rng.random() < epsilon[0] else int(np.argmax(q(obs)))

    episodes = 1200
    for obs, actions, rewards, next_obs, terminated in play(env, episodes, policy):
        for agent, action in actions.items():
            target = rewards[agent] + (0.0 if terminated[agent] else 0.99 * q(next_obs[agent]).max())
            values = q(obs[agent])
            values[action] += 0.1 * (target - values[action])
        if not env.agents:
            epsilon[0] = max(0.05, epsilon[0] * 0.995)
    captures, steps = play.result
    assert len(table) <= 19 * 19
    assert captures[-300:].mean() > 0.9
    assert np.nanmean(steps[-300:]) < 30
