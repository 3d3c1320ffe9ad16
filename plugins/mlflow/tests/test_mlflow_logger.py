"""The mlflow logger, offline: a local sqlite tracking store (the test extra installs its
SQLAlchemy backend), no server and no network."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import rlf
from rlf import Acting, Agent, ConfigError, Learner, OffPolicyConfig, hookimpl


class UniformConfig(OffPolicyConfig):
    """Uniform random actions (the algorithm under the logger does not matter)."""


class Uniform(Agent):
    def __init__(self, context):
        self.rng = np.random.default_rng(context.seed)
        self.n = {a: space.n for a, space in context.env_spec.action_spaces.items()}

    def act(self, obs, *, explore=True):
        return Acting({a: self.rng.integers(self.n[a], size=len(o)) for a, o in obs.items()}, {})

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


class NoLearning(Learner):
    def __init__(self, agent):
        self.agent = agent  # Learner.weights() hands the agent's state to evaluation and the NaN guard

    def learn(self, transitions):
        return {"loss": 0.25}

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


class UniformPlugin:
    RLF_API_VERSION = rlf.API_VERSION

    @hookimpl
    def rlf_register_algorithms(self, register):
        register("uniform", build_agent=Uniform, build_learner=lambda context, agent: NoLearning(agent),
                 family="off-policy", config=UniformConfig)


@pytest.fixture(scope="module")
def registry():
    from rlf.plugins import load_registry

    return load_registry(extra_plugins=[("uniform", UniformPlugin())])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One sqlite store for the module (creating its tables takes seconds), artifacts beside it."""
    root = tmp_path_factory.mktemp("mlflow")
    return f"sqlite:///{root / 'mlflow.db'}", root / "artifacts"


def make(registry, run_dir, store, *overrides):
    uri, artifacts = store
    return rlf.make("uniform", "gym:CartPole-v1", registry=registry, overrides=[
        "progress=false", f"run_dir='{run_dir}'", "loggers=['csv', 'mlflow']", f"logger.mlflow.tracking_uri='{uri}'",
        "logger.mlflow.experiment='cartpole'", f"logger.mlflow.artifact_location='{artifacts}'", *overrides])


def test_registration_is_light():
    code = ("import sys, rlf; reg = rlf.registry(); spec = reg.logger('mlflow'); "
            "assert 'mlflow' not in sys.modules, 'mlflow imported at discovery'; "
            "print(spec.plugin, spec.config.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "RLF_LOAD_PLUGINS": "mlflow"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["mlflow", "MlflowConfig"]


def test_a_run_logs_params_metrics_evaluations_and_checkpoints_and_a_resume_continues_it(registry, store, tmp_path):
    from mlflow.tracking import MlflowClient

    run_dir = tmp_path / "run"
    make(registry, run_dir, store, "steps=1000", "log_interval=256", "eval_interval=500", "eval_episodes=2",
         "logger.mlflow.log_checkpoints=true", "logger.mlflow.tags={team='rl'}").train()
    run_id = json.loads((run_dir / "mlflow.json").read_text())["run_id"]
    client = MlflowClient(tracking_uri=store[0])
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert client.get_experiment(run.info.experiment_id).name == "cartpole"
    assert run.data.tags["rlf.algorithm"] == "uniform" and run.data.tags["team"] == "rl"
    assert run.data.params["run.steps"] == "1000" and run.data.params["algo.exploration.decay"] == "0.995"
    assert run.data.params["run.env"] == "gym:CartPole-v1"
    history = client.get_metric_history(run_id, "mean_return")
    assert [point.step for point in history] == [256, 512, 768, 1000]
    assert [point.value for point in client.get_metric_history(run_id, "loss")] == [0.25] * 4
    evaluations = client.get_metric_history(run_id, "eval/return")
    assert [point.step for point in evaluations] == [512, 1000] and all(point.value > 0 for point in evaluations)
    artifacts = {item.path for item in client.list_artifacts(run_id)}
    assert {"checkpoint.rlf", "best.rlf"} <= artifacts
    assert (store[1] / run_id / "artifacts" / "best.rlf").is_file()  # where the experiment was told to keep them

    rlf.load(run_dir, registry=registry, overrides=["steps=1500"]).train()
    assert json.loads((run_dir / "mlflow.json").read_text())["run_id"] == run_id  # the same MLflow run
    assert [point.step for point in client.get_metric_history(run_id, "mean_return")][-3:] == [1000, 1256, 1500]
    assert client.get_run(run_id).info.status == "FINISHED"


def test_bad_settings_are_one_line_errors(registry, store, tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key 'logger.mlflow.experment'; did you mean logger.mlflow.experiment"):
        make(registry, tmp_path, store, "logger.mlflow.experment='x'")
    with pytest.raises(ConfigError, match=r"logger.mlflow.experiment: String should have at least 1 character"):
        make(registry, tmp_path, store, "logger.mlflow.experiment=''")
