"""The plugin as rlf sees it: discovery, the env spec, and a training run end to end."""

import csv
import pickle
import subprocess
import sys

import numpy as np

import rlf
from rlf.envs import EnvFactory, make_vector_env


def test_registered_through_the_entry_point(only_our_plugins):
    registry = rlf.registry()
    spec = registry.environment("predator-prey")
    assert spec.plugin == "predator-prey" and not registry.errors.get("predator-prey")
    from rlf_plugin_predator_prey import PredatorPreyConfig, PredatorPreyEnv

    assert spec.config is PredatorPreyConfig
    env = spec.build_env(PredatorPreyConfig(scenario="chase-1v1"), render_mode="ansi")
    assert isinstance(env, PredatorPreyEnv) and env.render_mode == "ansi" and env.size == 5
    assert pickle.loads(pickle.dumps(EnvFactory(spec.build_env, PredatorPreyConfig())))().possible_agents == [
        "predator_0"]


def test_plugin_module_is_light():
    code = ("import sys, rlf_plugin_predator_prey.plugin as p; assert p.RLF_API_VERSION == 1; "
            "registered = []; p.rlf_register_environments(lambda *a, **k: registered.append(a)); "
            "assert registered == [('predator-prey',)]; "
            "heavy = [m for m in ('gymnasium', 'pettingzoo') if m in sys.modules]; assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_parallel_vector_sees_teams_and_encoder():
    from rlf_plugin_predator_prey import PredatorPreyConfig, make_env

    config = PredatorPreyConfig(scenario="grid-3v3", learners="all", capture_threshold=2)
    envs = make_vector_env("predator-prey", EnvFactory(make_env, config), 3, subprocess=False)
    spec = envs.spec
    assert spec.multi_agent and len(spec.agent_ids) == 6
    assert spec.metadata["teams"]["prey_2"] == "prey" and spec.metadata["state_dim"] == 8
    obs = envs.reset(seed=0)
    assert obs["prey_0"].shape == (3, 8)
    rng = np.random.default_rng(0)
    ended, metrics, dropped_out = 0, [], 0
    for _ in range(400):
        batch = envs.step({a: rng.integers(5, size=3) for a in spec.agent_ids})
        ended += int(batch.episode_ended.sum())
        metrics.extend(batch.episode_metrics.values())
        assert batch.alive["predator_0"].all()  # predators never leave before the episode ends
        for a in spec.agent_ids:
            gone = ~batch.alive[a]
            dropped_out += int(gone.sum())
            assert not batch.next_obs[a][gone].any()  # the core zero-fills agents that left
    assert ended and len(metrics) == ended and dropped_out
    assert all(set(m) >= {"capture", "captures"} for m in metrics)
    assert any(m["capture"] == 1.0 and m["captures"] == 2.0 and "steps_to_capture" in m for m in metrics)
    envs.close()


def test_train_and_evaluate_random(tmp_path, only_our_plugins):
    algo = rlf.make("random", "predator-prey",
                    overrides=["steps=2000", "progress=false", f"run_dir={tmp_path / 'run'}", "seed=3"])
    summary = algo.train()
    assert summary["env_step"] >= 2000 and 0.0 <= summary["mean_capture"] <= 1.0
    result = algo.evaluate(episodes=20)
    assert result["episodes"] == 20.0 and 0.0 <= result["capture"] <= 1.0
    assert 0.0 <= result["captures"] <= 1.0 and "return/predator_0" in result
    with open(tmp_path / "run" / "episodes.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and {"capture", "captures", "steps_to_capture"} <= set(rows[0])
    for row in rows:
        assert float(row["length"]) <= 100
        if row["capture"] == "1":
            assert float(row["steps_to_capture"]) == float(row["length"])
        else:
            assert row["steps_to_capture"] == "" and float(row["length"]) == 100


def test_train_prey_against_chasers_on_a_scenario(tmp_path, only_our_plugins):
    algo = rlf.make("random", "predator-prey", overrides=[
        "steps=600", "progress=false", f"run_dir={tmp_path / 'run'}", 'env.scenario="chase-1v1"',
        'env.learners="prey"', 'env.opponent_policy="chase"'])
    algo.train()
    result = algo.evaluate(episodes=10)
    assert "return/prey_0" in result and result["capture"] > 0.5
