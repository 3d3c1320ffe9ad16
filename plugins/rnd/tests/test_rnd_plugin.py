"""Registration: RND is PPO's agent with a different learner, under a validated config."""

import os
import subprocess
import sys

import pytest
import rlf_plugin_ppo
from rlf_plugin_rnd.config import RNDConfig

import rlf
from rlf import ConfigError, StrategyFamily


def test_registered_with_ppos_own_agent_builder():
    spec = rlf.registry().algorithm("rnd")
    assert spec.build_agent is rlf_plugin_ppo.build_agent
    assert spec.build_learner is not rlf_plugin_ppo.build_learner
    assert spec.family == StrategyFamily.ON_POLICY
    assert spec.config is RNDConfig and issubclass(RNDConfig, rlf_plugin_ppo.PPOConfig)
    assert spec.default_env == "mario"
    assert spec.run_defaults == {"num_envs": 8}


def test_learner_is_ppos_learner_with_the_rnd_extension(tmp_path):
    from rlf_plugin_rnd.learner import RNDExtension

    algo = rlf.make("rnd", "gym:CartPole-v1", overrides=["steps=64", "num_envs=2", "algo.rollout_steps=32",
                                                         "progress=false", f"run_dir='{tmp_path}'"])
    algo.train()
    learner = algo.strategy.learner
    assert type(learner) is rlf_plugin_ppo.PPOLearner
    assert isinstance(learner.extension, RNDExtension)
    extension_ids = {id(p) for p in learner.extension.parameters()}
    optimized = {id(p) for group in learner.optimizer.param_groups for p in group["params"]}
    assert extension_ids and extension_ids <= optimized


@pytest.mark.parametrize("override, field", [("algo.int_gamma=1.5", "algo.int_gamma"),
                                             ("algo.predictor_update_proportion=0", "algo.predictor_update_proportion"),
                                             ("algo.obs_clip=-1", "algo.obs_clip"),
                                             ("algo.image_frames=0", "algo.image_frames")])
def test_out_of_range_settings_are_one_line_config_errors(override, field):
    with pytest.raises(ConfigError) as caught:
        rlf.make("rnd", "gym:CartPole-v1", overrides=[override])
    assert field in str(caught.value) and "\n" not in str(caught.value)


def test_plugin_discovery_does_not_import_torch():
    code = "import sys, rlf; rlf.registry().algorithm('rnd'); print('torch' in sys.modules)"
    env = {**os.environ, "RLF_LOAD_PLUGINS": "ppo,rnd"}  # only this plugin and what it builds on
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "False"
