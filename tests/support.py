"""Small numpy learners and a tiny multi-agent env, registered as test plugins, so the core's two
strategies are exercised without torch and without any real plugin."""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sysconfig
import venv
from pathlib import Path

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pydantic import Field

from rlf import (
    Acting,
    Agent,
    EnvConfig,
    EpsilonSchedule,
    Learner,
    OffPolicyConfig,
    OnPolicyConfig,
    StrategyFamily,
    hookimpl,
    observations,
)

ROOT = Path(__file__).resolve().parents[1]

# -- on-policy: a linear softmax policy with a linear critic, trained on the core's GAE -----------


class LinearPGConfig(OnPolicyConfig):
    """Linear actor-critic for tests."""

    lr: float = Field(0.01, gt=0, le=1, description="Step size.")


class LinearPolicy(Agent):
    def __init__(self, spec, seed):
        self.rng = np.random.default_rng(seed)
        self.params = {}
        for a in spec.agent_ids:
            space = spec.observation_spaces[a]
            n_obs = spaces.flatdim(space) if observations.is_structured(space) else int(np.prod(space.shape))
            n_act = spec.action_spaces[a].n
            self.params[a] = {"pi": np.zeros((n_obs + 1, n_act)), "v": np.zeros(n_obs + 1)}

    @staticmethod
    def features(obs):
        n = observations.rows(obs)  # Dict/Tuple observations: every part flattened, side by side
        flat = [part.reshape(n, -1).astype(np.float64) for _, part in observations.leaves(obs)]
        return np.concatenate([*flat, np.ones((n, 1))], axis=1)

    def probs(self, a, obs):
        logits = self.features(obs) @ self.params[a]["pi"]
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=1, keepdims=True)

    def act(self, obs, *, explore=True):
        actions, extras = {}, {}
        for a, o in obs.items():
            p = self.probs(a, o)
            if explore:
                act = (p.cumsum(axis=1) > self.rng.random((observations.rows(o), 1))).argmax(axis=1)
            else:
                act = p.argmax(axis=1)
            actions[a] = act
            extras[a] = {"log_prob": np.log(p[np.arange(observations.rows(o)), act] + 1e-12),
                         "value": self.value({a: o})[a]}
        return Acting(actions, extras)

    def value(self, obs):
        return {a: self.features(o) @ self.params[a]["v"] for a, o in obs.items()}

    def state_dict(self):
        return {"params": self.params, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        self.params = {a: {k: np.array(v) for k, v in p.items()} for a, p in state["params"].items()}
        self.rng.bit_generator.state = state["rng"]


class LinearPGLearner(Learner):
    def __init__(self, agent, lr):
        self.agent, self.lr, self.updates = agent, lr, 0
        self.seen_rollouts = []

    def learn(self, rollout):
        self.updates += 1
        self.seen_rollouts.append(rollout.num_steps)
        self.last_rollout = rollout
        losses = []
        for a in rollout.obs:
            mask = rollout.alive[a].reshape(-1).astype(bool)
            obs = observations.index(observations.merge_rows(rollout.obs[a]), mask)
            act = rollout.actions[a].reshape(-1)[mask]
            adv = rollout.advantages[a].reshape(-1)[mask]
            ret = rollout.returns[a].reshape(-1)[mask]
            if observations.rows(obs) == 0:
                continue
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            x = self.agent.features(obs)
            p = self.agent.probs(a, obs)
            onehot = np.eye(p.shape[1])[act]
            self.agent.params[a]["pi"] += self.lr * x.T @ ((onehot - p) * adv[:, None]) / observations.rows(obs)
            err = ret - x @ self.agent.params[a]["v"]
            self.agent.params[a]["v"] += self.lr * x.T @ err / observations.rows(obs)
            losses.append(float(np.mean(err ** 2)))
        return {"value_loss": float(np.mean(losses)) if losses else 0.0}

    def state_dict(self):
        return {"updates": self.updates}

    def load_state_dict(self, state):
        self.updates = int(state["updates"])


def build_linear_agent(context):
    return LinearPolicy(context.env_spec, context.seed)


def build_linear_learner(context, agent):
    return LinearPGLearner(agent, context.config.lr)


# -- off-policy: tabular Q-learning over hashable observations, with a small replay ---------------


class TabularQConfig(OffPolicyConfig):
    """Tabular Q-learning for tests."""

    alpha: float = Field(0.5, gt=0, le=1, description="Learning rate.")
    gamma: float = Field(0.95, ge=0, le=1, description="Discount.")
    fail_after: int = Field(0, ge=0, description="Raise after this many learn calls (0 = never); for crash tests.")


class TabularQ(Agent):
    def __init__(self, spec, config, seed):
        self.n_actions = {a: spec.action_spaces[a].n for a in spec.agent_ids}
        self.tables = {a: {} for a in spec.agent_ids}
        self.rng = np.random.default_rng(seed)
        self.epsilon = EpsilonSchedule(config.exploration)

    def q(self, a, obs):
        key = tuple(np.asarray(obs).ravel().tolist())
        return self.tables[a].setdefault(key, np.zeros(self.n_actions[a]))

    def act(self, obs, *, explore=True):
        actions = {}
        for a, batch in obs.items():
            chosen = []
            for o in batch:
                if explore and self.rng.random() < self.epsilon.value:
                    chosen.append(int(self.rng.integers(self.n_actions[a])))
                else:
                    q = self.q(a, o)
                    chosen.append(int(self.rng.choice(np.flatnonzero(q == q.max()))))
            actions[a] = np.array(chosen)
        return Acting(actions)

    def on_progress(self, env_steps, episodes_ended):
        self.epsilon.advance(env_steps, episodes_ended)

    def metrics(self):
        return {"epsilon": self.epsilon.value}

    def state_dict(self):
        return {"tables": {a: [[list(k), v] for k, v in t.items()] for a, t in self.tables.items()},
                "epsilon": self.epsilon.state_dict(), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        self.tables = {a: {tuple(k): np.array(v) for k, v in rows} for a, rows in state["tables"].items()}
        self.epsilon.load_state_dict(state["epsilon"])
        self.rng.bit_generator.state = state["rng"]


class TabularQLearner(Learner):
    def __init__(self, agent, config):
        self.agent, self.config = agent, config
        self.updates = 0

    def learn(self, t):
        self.calls = getattr(self, "calls", 0) + 1
        if self.config.fail_after and self.calls > self.config.fail_after:
            raise RuntimeError("learner blew up")
        for a in t.obs:
            for i in np.flatnonzero(t.alive[a]):
                q = self.agent.q(a, t.obs[a][i])
                nxt = 0.0 if t.terminated[a][i] else self.agent.q(a, t.next_obs[a][i]).max()
                act = int(t.actions[a][i])
                q[act] += self.config.alpha * (t.rewards[a][i] + self.config.gamma * nxt - q[act])
                self.updates += 1
        return {"table_updates": float(self.updates)}

    def state_dict(self):
        return {"updates": self.updates}

    def load_state_dict(self, state):
        self.updates = int(state["updates"])


def build_tabular_agent(context):
    return TabularQ(context.env_spec, context.config, context.seed)


def build_tabular_learner(context, agent):
    return TabularQLearner(agent, context.config)


# -- a two-agent PettingZoo env: walk right along a line; "quitter" leaves after 2 steps -------------


class LineConfig(EnvConfig):
    """Two agents on a line of ``length`` cells; reaching the right end gives +1."""

    length: int = Field(5, ge=2, le=50, description="Cells on the line.")
    max_steps: int = Field(20, ge=1, le=1000, description="Truncation limit.")


class LineEnv(ParallelEnv):
    metadata = {"name": "line_v0", "render_modes": ["rgb_array"]}

    def __init__(self, config: LineConfig, render_mode=None):
        self.config = config
        self.render_mode = render_mode
        self.possible_agents = ["walker", "quitter"]
        self.agents = []
        self.rlf_metadata = {"teams": {"walker": "a", "quitter": "b"}}

    @functools.cache  # noqa: B019 - spaces are per-instance constants
    def observation_space(self, agent):
        return spaces.Box(0, self.config.length, shape=(1,), dtype=np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent):
        return spaces.Discrete(2)  # 0 left, 1 right

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.pos = {a: 0 for a in self.agents}
        self.t = 0
        return {a: np.array([0.0], dtype=np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        rewards, term, trunc, infos, obs = {}, {}, {}, {}, {}
        for a in self.agents:
            move = 1 if actions.get(a, 0) == 1 else -1
            self.pos[a] = int(np.clip(self.pos[a] + move, 0, self.config.length - 1))
            reached = a == "walker" and self.pos[a] == self.config.length - 1
            rewards[a] = 1.0 if reached else 0.0
            term[a] = reached or (a == "quitter" and self.t >= 2)
            trunc[a] = self.t >= self.config.max_steps and not term[a]
            obs[a] = np.array([self.pos[a]], dtype=np.float32)
            infos[a] = {}
        if term.get("walker") or trunc.get("walker"):
            for a in self.agents:
                term[a] = term[a] or term["walker"]
                trunc[a] = trunc[a] or trunc["walker"]
                infos[a] = {"episode_metrics": {"reached": float(term["walker"])}}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rewards, term, trunc, infos

    def render(self):
        frame = np.zeros((8, 8 * self.config.length, 3), dtype=np.uint8)
        frame[:, 8 * self.pos.get("walker", 0):8 * self.pos.get("walker", 0) + 8] = 255
        return frame


def make_line(config: LineConfig, render_mode=None):
    return LineEnv(config, render_mode)


class TestPlugin:
    """Registered directly (not via entry points) by the tests."""

    RLF_API_VERSION = 1

    @hookimpl
    def rlf_register_algorithms(self, register):
        register("linear-pg", build_agent=build_linear_agent, build_learner=build_linear_learner,
                 family=StrategyFamily.ON_POLICY, config=LinearPGConfig, default_env="gym:CartPole-v1")
        register("linear-pg-parts", build_agent=build_linear_agent, build_learner=build_linear_learner,
                 family=StrategyFamily.ON_POLICY, config=LinearPGConfig, observation_spaces=("Dict", "Tuple"))
        register("tabular-q", build_agent=build_tabular_agent, build_learner=build_tabular_learner,
                 family=StrategyFamily.OFF_POLICY, config=TabularQConfig)

    @hookimpl
    def rlf_register_environments(self, register):
        register("line", build_env=make_line, config=LineConfig)


test_plugin = TestPlugin()
"""What the ``test`` entry point of the fake distribution made by ``install_fake_plugin`` loads."""


def install_fake_plugin(site, name: str, target: str, module_source: str | None = None, module: str = "",
                        group: str | None = "rlf", distribution: str | None = None) -> None:
    """Make ``site`` look like site-packages holding a distribution with an ``rlf`` entry point
    (``rlf-fake-<name>``; ``distribution`` names it otherwise, ``group`` puts the entry point in another
    group, None in none).

    ``site`` goes on PYTHONPATH of a subprocess; importlib.metadata finds the dist-info there the
    same way it finds a pip-installed plugin.
    """
    distribution = distribution or f"rlf-fake-{name}"
    dist = site / f"{distribution.replace('-', '_')}-0.0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.0.1\n")
    if group is not None:
        (dist / "entry_points.txt").write_text(f"[{group}]\n{name} = {target}\n")
    if module_source is not None:
        (site / f"{module}.py").write_text(module_source)


def child_env(home: Path) -> Path:
    """A venv that sees this environment's packages (rlf, numpy, gymnasium, pytest, pip) and installs
    its own on top: plugins a test installs land there, never in the environment running the tests."""
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # addsitedir (not a bare path line) so this environment's own .pth files, editable installs, work too
    Path(site, "_parent_env.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return python


def pip_install(python: Path, directory: Path) -> None:
    """``pip install DIRECTORY`` into ``python``'s venv, offline, its dependencies already present."""
    if importlib.util.find_spec("setuptools"):
        build = ["--no-build-isolation"]
    else:  # the tox envs: setuptools and wheel come from the wheelhouse
        build = ["--find-links", os.environ.get("RLF_WHEELHOUSE", str(ROOT / "wheelhouse"))]
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", *build,
                           str(directory.resolve())], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
