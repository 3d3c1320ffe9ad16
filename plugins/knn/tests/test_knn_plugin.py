"""Registration: kNN episodic novelty is PPO's agent with a different learner, under a validated config."""

import os
import subprocess
import sys

import pytest
import rlf_plugin_ppo
from rlf_plugin_knn.config import KNNConfig

import rlf
from rlf import ConfigError, StrategyFamily


def test_registered_with_ppos_own_agent_builder():
    spec = rlf.registry().algorithm("knn")
    assert spec.build_agent is rlf_plugin_ppo.build_agent
    assert spec.build_learner is not rlf_plugin_ppo.build_learner
    assert spec.family == StrategyFamily.ON_POLICY
    assert spec.config is KNNConfig and issubclass(KNNConfig, rlf_plugin_ppo.PPOConfig)
    assert spec.default_env == "mario"
    assert spec.run_defaults == {"num_envs": 8}


def test_learner_is_ppos_learner_with_the_knn_extension(tmp_path):
    from rlf_plugin_knn.learner import KNNExtension

    algo = rlf.make("knn", "gym:CartPole-v1", overrides=["steps=64", "num_envs=2", "algo.rollout_steps=32",
                                                         "progress=false", f"run_dir='{tmp_path}'"])
    algo.train()
    learner = algo.strategy.learner
    assert type(learner) is rlf_plugin_ppo.PPOLearner
    assert isinstance(learner.extension, KNNExtension)
    extension_ids = {id(p) for p in learner.extension.parameters()}
    optimized = {id(p) for group in learner.optimizer.param_groups for p in group["params"]}
    assert extension_ids and extension_ids <= optimized


@pytest.mark.parametrize("override, field", [("algo.embedding='learned'", "algo.embedding"),
                                             ("algo.neighbours=0", "algo.neighbours"),
                                             ("algo.kernel_epsilon=0", "algo.kernel_epsilon"),
                                             ("algo.distance_momentum=1", "algo.distance_momentum")])
def test_out_of_range_settings_are_one_line_config_errors(override, field):
    with pytest.raises(ConfigError) as caught:
        rlf.make("knn", "gym:CartPole-v1", overrides=[override])
    assert field in str(caught.value) and "\n" not in str(caught.value)


def test_plugin_discovery_does_not_import_torch():
    code = "import sys, rlf; rlf.registry().algorithm('knn'); print('torch' in sys.modules)"
    env = {**os.environ, "RLF_LOAD_PLUGINS": "ppo,knn"}  # only this plugin and what it builds on
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "False"
