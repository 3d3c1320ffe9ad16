"""`rlf export RUN policy.onnx`: onnxruntime, with nothing of rlf, acts as the agent does.

Each algorithm trains briefly (weights away from their initial near-ties), then 1,000 observations are
recorded from its own environment with the agent sampling, and onnxruntime's greedy actions on them
must be the agent's ``act(explore=False)``; the sampled head's parameters must be torch's."""

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

import rlf
from rlf.cli.commands import main
from rlf.envs.collectors import make_vector_env
from rlf.storage import run_state

RECORDED = 1000

CASES = [
    ("ppo", "gym:CartPole-v1", ["steps=2048"]),
    ("dqn", "gym:CartPole-v1", ["steps=2048", "algo.min_replay_size=256"]),
    ("sac", "gym:Pendulum-v1", ["steps=600", "algo.learning_starts=200"]),
    ("actor-critic", "predator-prey", ["steps=512"]),
    ("a2c", "gym:CartPole-v1", ["steps=1024"]),
    ("appo", "gym:CartPole-v1", ["steps=1024"]),
    # uint8 frames, a CNN and a 7-button action set
    ("ppo", "mario", ["steps=256", "num_envs=2", "algo.rollout_steps=128", "algo.minibatches=2", "env.resize=42"]),
]


def trained(algorithm: str, env: str, settings: list[str], tmp_path: Path) -> Path:
    run = tmp_path / "run"
    overrides = ["progress=false", f"run_dir='{run}'", "seed=3", *settings]
    if not any(s.startswith("num_envs=") for s in settings):
        overrides.append("num_envs=2")
    rlf.make(algorithm, env, overrides=overrides).train()
    return run


def recorded(run: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(observations per agent id, the agent's greedy actions on them), from RECORDED sampled steps."""
    algo = rlf.load(run)
    envs = make_vector_env(algo.resolved.run.env, algo.factory, 1, subprocess=False)
    try:
        agent = algo.resolved.algorithm.build_agent(algo._context(envs.spec))
        run_state.load_into(agent, algo._agent_state, "agent", check_shapes=True)
        seen: dict[str, list[np.ndarray]] = {agent_id: [] for agent_id in envs.spec.agent_ids}
        obs = envs.reset(seed=11)
        for _ in range(RECORDED):
            for agent_id, batch in obs.items():
                seen[agent_id].append(np.array(batch[0]))
            batch = envs.step(agent.act(obs, explore=True).actions)
            if batch.ended_envs:
                agent.reset_state(batch.episode_ended)
            obs = batch.obs
    finally:
        envs.close()
    observations = {agent_id: np.stack(rows) for agent_id, rows in seen.items()}
    greedy = {agent_id: agent.act({agent_id: rows}, explore=False).actions[agent_id]
              for agent_id, rows in observations.items()}
    return observations, greedy


@pytest.mark.parametrize(("algorithm", "env", "settings"), CASES, ids=[f"{a}-{e}" for a, e, _ in CASES])
def test_onnxruntime_acts_as_the_agent(algorithm, env, settings, tmp_path):
    run = trained(algorithm, env, settings, tmp_path)
    target = tmp_path / "out" / "policy.onnx"
    assert main(["export", str(run), str(target)]) == 0
    model = onnx.load(target)
    about = json.loads({p.key: p.value for p in model.metadata_props}["rlf"])
    assert about["algorithm"] == algorithm and about["env"] == env and about["env_steps"] > 0
    observations, greedy = recorded(run)
    assert set(about["agents"]) == set(observations)
    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    for agent_id, rows in observations.items():
        described = about["agents"][agent_id]
        names = [described["action"], *described["outputs"].values()]
        action, *params = session.run(names, {described["input"]: rows})
        assert action.shape[0] == RECORDED
        if described["head"] in ("categorical", "q_values"):
            assert action.dtype == np.int64
            scores = np.sort(params[0], axis=1)
            decided = scores[:, -1] - scores[:, -2] > 1e-4  # rounding may flip only a true tie
            assert decided.mean() > 0.9
            np.testing.assert_array_equal(action[decided], np.asarray(greedy[agent_id])[decided])
            assert 0 < len(np.unique(action)) <= params[0].shape[1]
        else:
            np.testing.assert_allclose(action, greedy[agent_id], atol=1e-4)
            low, high = described["action_space"]["low"], described["action_space"]["high"]
            assert (action >= np.array(low) - 1e-6).all() and (action <= np.array(high) + 1e-6).all()


def test_a_sampled_action_follows_the_metadata_s_recipe(tmp_path):
    """A deployment samples from the categorical head as the metadata says; over many draws the action
    frequencies are softmax(logits)."""
    run = trained("ppo", "gym:CartPole-v1", ["steps=1024"], tmp_path)
    target = tmp_path / "policy.onnx"
    rlf.export(run, target)
    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    obs = np.array([[0.01, 0.2, -0.03, -0.3]], dtype=np.float32)
    (logits,) = session.run(["logits"], {"obs": obs})
    probs = np.exp(logits[0] - logits[0].max())
    probs /= probs.sum()
    draws = np.random.default_rng(0).choice(len(probs), size=20000, p=probs)
    assert abs(np.mean(draws == 1) - probs[1]) < 0.02


def test_algorithms_without_a_policy_module_refuse_in_one_line(tmp_path, capsys):
    run = trained("random", "gym:CartPole-v1", ["steps=64"], tmp_path)
    target = tmp_path / "policy.onnx"
    assert main(["export", str(run), str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'random' has no exportable policy" in err[0] and ".rlf" in err[0]
    assert not target.exists() and not list(tmp_path.glob(".policy.onnx.*"))


def test_a_bad_export_replaces_nothing(tmp_path, monkeypatch):
    """A graph that does not reproduce the agent is refused, and the file already there stays."""
    run = trained("ppo", "gym:CartPole-v1", ["steps=512"], tmp_path)
    target = tmp_path / "policy.onnx"
    target.write_bytes(b"the deployed policy")
    from rlf_plugin_ppo.model import PPOAgent

    real = PPOAgent.export_policy

    def off_by_one(self, agent_id):
        export = real(self, agent_id)
        export.module.network.actor[-1].bias.data[0] += 100.0  # CartPole's MLP: always push left
        return export

    monkeypatch.setattr(PPOAgent, "export_policy", off_by_one)
    with pytest.raises(rlf.IncompatibleError, match="greedy actions are not the agent's own"):
        rlf.export(run, target, overwrite=True)
    assert target.read_bytes() == b"the deployed policy"
    assert not list(tmp_path.glob(".policy.onnx.*"))


ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "docs" / "results" / "agents" / "mario-1-1-ppo-seed0.rlf"
NO_RLF = """
import runpy, sys
for name in ("torch", "rlf", "rlf_plugin_mario", "rlf_plugin_ppo"):
    sys.modules[name] = None  # importing any of them now fails
sys.argv = ["onnx_mario.py", *sys.argv[1:]]
runpy.run_path({example!r}, run_name="__main__")
"""


def test_the_exported_shipped_mario_agent_clears_1_1_without_rlf_or_torch(tmp_path):
    """examples/onnx_mario.py makes the observations itself and acts through onnxruntime alone; greedy
    from the shared start, the shipped agent reaches the flag as it does in `rlf eval` (about 300 steps)."""
    import subprocess
    import sys

    target = tmp_path / "mario.onnx"
    assert main(["export", str(SHIPPED), str(target)]) == 0
    script = NO_RLF.format(example=str(ROOT / "examples" / "onnx_mario.py"))
    done = subprocess.run([sys.executable, "-c", script, str(target), "--max-steps", "600"], capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip().splitlines()[-1]
    assert "flag True" in line, line
    steps = int(line.rsplit(",", 1)[1].split()[0])
    assert steps < 400, line
