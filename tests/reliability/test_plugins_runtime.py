"""A plugin that fails once the run is going (a builder raising or returning the wrong thing, a hook
raising or calling sys.exit, the learner raising) ends the run with one line naming the plugin, the
hook and the exception, exit code 1, and the last checkpoint kept; nothing waits forever."""

from __future__ import annotations

import time

import pytest
from fault_support import assert_one_line_error, make_site, rlf
from support import install_fake_plugin

from rlf.storage import checkpoint as ckpt

HOSTILE = '''
import os, sys
import rlf
from rlf import Callback, hookimpl
import support

FAIL_AT = int(os.environ.get("HOSTILE_AT", "150"))


class Raising(Callback):
    def __init__(self, how):
        self.how = how

    def on_log(self, trainer, metrics):
        if trainer.counters["env_steps"] >= FAIL_AT:
            if self.how == "exit":
                sys.exit("the plugin says bye")
            raise RuntimeError("the hook broke")


def bad_builder(run_dir, run, config):
    raise ValueError("cannot build")


class Learner:
    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def learn(self, batch):
        self.calls += 1
        if self.calls > FAIL_AT:
            raise RuntimeError("the learner broke")
        return self.inner.learn(batch)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def bad_agent(context):
    raise RuntimeError("no agent today")


def failing_learner(context, agent):
    return Learner(support.build_tabular_learner(context, agent))


def collector_raises(env_name, factory, num_envs, config):
    raise RuntimeError("no envs today")


class Hostile:
    RLF_API_VERSION = 1

    @hookimpl
    def rlf_register_loggers(self, register):
        register("not-a-logger", build_logger=lambda run_dir, run, config: 42)
        register("raises", build_logger=lambda run_dir, run, config: Raising("raise"))
        register("exits", build_logger=lambda run_dir, run, config: Raising("exit"))

    @hookimpl
    def rlf_register_callbacks(self, register):
        register("builder-raises", build_callback=bad_builder)

    @hookimpl
    def rlf_register_collectors(self, register):
        register("raises", build_collector=collector_raises)
        register("none", build_collector=lambda env_name, factory, num_envs, config: None)

    @hookimpl
    def rlf_register_algorithms(self, register):
        register("bad-agent", build_agent=bad_agent, build_learner=support.build_tabular_learner,
                 family=rlf.StrategyFamily.OFF_POLICY, config=support.TabularQConfig)
        register("bad-learn", build_agent=support.build_tabular_agent, build_learner=failing_learner,
                 family=rlf.StrategyFamily.OFF_POLICY, config=support.TabularQConfig)


plugin = Hostile()
'''

BASE = ("--env", "line", "--no-progress", "--steps", "400", "--set", "log_interval=20",
        "--set", "checkpoint_interval=100")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = make_site(tmp_path_factory.mktemp("site"))
    install_fake_plugin(site, "hostile", "rlf_hostile:plugin", HOSTILE, module="rlf_hostile")
    return site


@pytest.mark.parametrize("algorithm, extra, fragments, checkpoint", [
    ("tabular-q", ["--set", "loggers=['csv','not-a-logger']"], ["logger 'not-a-logger' (its builder)", "int"], False),
    ("tabular-q", ["--set", "loggers=['csv','raises']"], ["logger 'raises' on_log", "RuntimeError: the hook broke"],
     True),
    ("tabular-q", ["--set", "loggers=['csv','exits']"], ["logger 'exits' on_log", "sys.exit: the plugin says bye"],
     True),
    ("tabular-q", ["--set", "callbacks=['builder-raises']"], ["callback 'builder-raises' (its builder)",
                                                               "ValueError: cannot build"], False),
    ("bad-agent", [], ["algorithm 'bad-agent' build_agent", "RuntimeError: no agent today"], False),
    ("bad-learn", [], ["algorithm 'bad-learn' learn()", "RuntimeError: the learner broke"], True),
    ("tabular-q", ["--set", "vector=raises", "--set", "num_envs=2"],
     ["collector 'raises' (its builder)", "no envs today"], False),
    ("linear-pg", ["--set", "vector=raises", "--set", "num_envs=2"],
     ["collector 'raises' (its builder)", "no envs today"], False),
    ("linear-pg", ["--set", "vector=none", "--set", "num_envs=2"], ["collector 'none'", "NoneType"], False),
])
def test_a_plugin_failing_during_the_run_is_one_line_with_exit_1(site, tmp_path, algorithm, extra, fragments,
                                                                 checkpoint):
    run = tmp_path / "run"
    started = time.monotonic()
    result = rlf("train", algorithm, *BASE, *extra, "--run-dir", str(run), site=site, timeout=60)
    assert time.monotonic() - started < 30
    line = assert_one_line_error(result, "hostile", *fragments, code=1)
    assert "plugin 'rlf-fake-hostile'" in line or "plugin 'hostile'" in line
    if checkpoint:
        assert "--resume" in line
        steps = ckpt.load(run / "checkpoint.rlf")["counters"]["env_steps"]
        assert 100 <= steps <= 400
