"""A learner whose learn() breaks the metrics contract (a dict of plain numbers) is told so in one line
naming the plugin, the algorithm, learn() and the metric, at the step it happens: before, a string or
None failed at the next metrics row (math.fsum) and an array reached the checkpoint, in tracebacks naming
neither."""

from __future__ import annotations

import numpy as np
import pytest
from support import LinearPGConfig, LinearPGLearner, LinearPolicy

import rlf
from rlf import PluginError, StrategyFamily, hookimpl
from rlf.api import make
from rlf.plugins import load_registry

BAD = {
    "string-metric": ({"loss": "0.5"}, "its learner's learn() returned the metric 'loss' as str '0.5'"),
    "array-metric": ({"loss": np.array([0.5, 0.25])}, "returned the metric 'loss' as ndarray array([0.5 , 0.25])"),
    "none-metric": ({"loss": None}, "returned the metric 'loss' as NoneType None"),
    "bool-metric": ({"done": True}, "returned the metric 'done' as bool True"),
    "no-dict": (None, "its learner's learn() returned NoneType, not a dict of metric name -> number"),
}


def learner_returning(metrics):
    class Bad(LinearPGLearner):
        def learn(self, rollout):
            super().learn(rollout)
            return metrics

    return lambda context, agent: Bad(agent, context.config.lr)


class BadMetricsPlugin:
    RLF_API_VERSION = rlf.API_VERSION

    @hookimpl
    def rlf_register_algorithms(self, register):
        for name, (metrics, _) in BAD.items():
            register(name, build_agent=lambda context: LinearPolicy(context.env_spec, context.seed),
                     build_learner=learner_returning(metrics), family=StrategyFamily.ON_POLICY,
                     config=LinearPGConfig, default_env="gym:CartPole-v1")


@pytest.mark.parametrize("algorithm", sorted(BAD))
def test_a_learner_breaking_the_metrics_contract_is_one_line_naming_plugin_method_and_metric(tmp_path, algorithm):
    registry = load_registry(extra_plugins=[("bad-metrics", BadMetricsPlugin())])
    algo = make(algorithm, "gym:CartPole-v1", registry=registry,
                overrides=["steps=64", "num_envs=2", "algo.rollout_steps=4", "progress=false", f"run_dir='{tmp_path}'"])
    with pytest.raises(PluginError) as raised:
        algo.train()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"plugin 'bad-metrics' (algorithm '{algorithm}'): ")
    assert BAD[algorithm][1] in message


def test_plain_numbers_of_numpy_and_python_types_are_accepted(tmp_path):
    class Plugin(BadMetricsPlugin):
        @hookimpl
        def rlf_register_algorithms(self, register):
            register("fine", build_agent=lambda context: LinearPolicy(context.env_spec, context.seed),
                     build_learner=learner_returning({"a": 1, "b": 0.5, "c": np.float32(2.0), "d": np.int64(3)}),
                     family=StrategyFamily.ON_POLICY, config=LinearPGConfig, default_env="gym:CartPole-v1")

    registry = load_registry(extra_plugins=[("fine", Plugin())])
    algo = make("fine", "gym:CartPole-v1", registry=registry,
                overrides=["steps=64", "num_envs=2", "algo.rollout_steps=4", "progress=false", f"run_dir='{tmp_path}'"])
    summary = algo.train()
    assert summary["env_step"] == 64
