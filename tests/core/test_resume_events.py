"""What a plugin is told when a run continues from a checkpoint (``on_resume`` with an ``rlf.Resume``),
callbacks' own state carried by the checkpoint, and ``trainer.checkpoint(name)``."""

from __future__ import annotations

import pytest
from pydantic import Field
from support import LinearPolicy, TabularQ, TabularQLearner, TestPlugin

import rlf
from rlf import Callback, StrictModel, hookimpl
from rlf.envs.base import VectorEnv
from rlf.errors import PluginRunError
from rlf.plugins import load_registry
from rlf.training.strategy import BaseStrategy

HEARD: list[tuple[str, object]] = []


class Plateau(Callback):
    """A callback with state: how many metrics rows it has seen (the kind a plateau-stop keeps)."""

    def __init__(self, unstorable: bool = False):
        self.rows, self.loaded, self.unstorable = 0, None, unstorable

    def state_dict(self):
        return {"rows": object()} if self.unstorable else {"rows": self.rows}

    def load_state_dict(self, state):
        HEARD.append(("load_state_dict", dict(state)))
        self.loaded = dict(state)
        self.rows = int(state["rows"])

    def on_resume(self, trainer, resume):
        HEARD.append(("callback", resume))

    def on_log(self, trainer, metrics):
        self.rows += 1


class PlateauSettings(StrictModel):
    """Settings of the test plateau callback."""

    unstorable: bool = Field(False, description="Return a state no checkpoint can hold.")


class Named(Callback):
    """Writes a named checkpoint at its first metrics row."""

    def __init__(self, name):
        self.name = name

    def on_log(self, trainer, metrics):
        trainer.checkpoint(self.name)


class CallbackPlugin:
    RLF_API_VERSION = rlf.API_VERSION

    @hookimpl
    def rlf_register_callbacks(self, register: rlf.RegisterCallback):
        register("plateau", build_callback=lambda run_dir, run, config: Plateau(config.unstorable),
                 config=PlateauSettings, description="counts metrics rows")
        register("named", build_callback=lambda run_dir, run, config: Named("../outside.rlf"),
                 description="asks for a checkpoint outside the run directory")


@pytest.fixture(scope="module")
def reg():
    return load_registry(extra_plugins=[("test-plugin", TestPlugin()), ("resume-callbacks", CallbackPlugin())])


@pytest.fixture(autouse=True)
def heard(monkeypatch):
    HEARD.clear()

    def recorder(kind):
        def on_resume(self, resume, *rest):
            HEARD.append((kind, resume))
        return on_resume

    for cls, kind in ((TabularQ, "agent"), (LinearPolicy, "agent"), (TabularQLearner, "learner"),
                      (VectorEnv, "collector")):
        monkeypatch.setattr(cls, "on_resume", recorder(kind), raising=False)
    original = BaseStrategy.on_resume

    def strategy_on_resume(self, resume):
        HEARD.append(("strategy", resume))
        original(self, resume)

    monkeypatch.setattr(BaseStrategy, "on_resume", strategy_on_resume)
    return HEARD


def make(reg, run_dir, *overrides, algorithm="tabular-q", env="line"):
    return rlf.make(algorithm, env, registry=reg,
                    overrides=["progress=false", f"run_dir='{run_dir}'", "seed=3", "loggers=['csv']", *overrides])


def test_a_fresh_run_tells_nobody_of_a_resume(reg, tmp_path):
    make(reg, tmp_path, "steps=256", "callbacks=['plateau']").train()
    assert HEARD == []


def test_every_plugin_kind_hears_of_the_resume_once_with_the_checkpoints_counters(reg, tmp_path, capsys):
    make(reg, tmp_path, "steps=256", "log_interval=64", "callbacks=['plateau']").train()
    capsys.readouterr()
    resumed = rlf.load(tmp_path, registry=reg, overrides=["steps=512"])
    resumed.train()
    kinds = [kind for kind, _ in HEARD]
    # the callback's own state first, then the strategy, which passes it on to agent, learner, envs
    assert kinds == ["load_state_dict", "strategy", "agent", "learner", "collector", "callback"]
    events = [event for kind, event in HEARD if kind != "load_state_dict"]
    assert all(event is events[0] for event in events)
    resume = events[0]
    assert isinstance(resume, rlf.Resume)
    assert resume.env_step == 256 and resume.episodes > 0 and resume.iterations > 0
    # the line env saves no env state: fresh episodes, and the plugins are told why in the console's words
    assert resume.episodes_restored is False and resume.reason
    assert resume.reason in capsys.readouterr().err
    with pytest.raises(AttributeError):
        resume.env_step = 0  # one event for every plugin: none can change what the others see


def test_an_exact_resume_says_the_episodes_continue(reg, tmp_path):
    make(reg, tmp_path, "steps=256", algorithm="linear-pg", env="gym:CartPole-v1").train()
    rlf.load(tmp_path, registry=reg, overrides=["steps=512"]).train()
    resume = next(event for kind, event in HEARD if kind == "strategy")
    assert resume.episodes_restored is True and resume.reason is None and resume.env_step == 256


def test_a_callbacks_state_is_checkpointed_and_handed_back_before_the_resume(reg, tmp_path):
    make(reg, tmp_path, "steps=256", "log_interval=64", "callbacks=['plateau']").train()
    assert rlf.checkpoint.load(tmp_path / "checkpoint.rlf")["callbacks"] == {"callback.plateau": {"rows": 4}}
    resumed = rlf.load(tmp_path, registry=reg, overrides=["steps=512"])
    resumed.train()
    assert HEARD[0] == ("load_state_dict", {"rows": 4})
    assert rlf.checkpoint.load(tmp_path / "checkpoint.rlf")["callbacks"] == {"callback.plateau": {"rows": 8}}


def test_a_state_kept_for_a_callback_the_resume_does_not_select_is_carried_on(reg, tmp_path):
    make(reg, tmp_path, "steps=256", "log_interval=64", "callbacks=['plateau']").train()
    rlf.load(tmp_path, registry=reg, overrides=["steps=384", "callbacks=[]"]).train()
    assert rlf.checkpoint.load(tmp_path / "checkpoint.rlf")["callbacks"] == {"callback.plateau": {"rows": 4}}
    rlf.load(tmp_path, registry=reg, overrides=["steps=512", "callbacks=['plateau']"]).train()
    assert ("load_state_dict", {"rows": 4}) in HEARD


def test_callbacks_passed_to_train_are_keyed_by_class_or_state_key(reg, tmp_path):
    tagged = Plateau()
    tagged.state_key = "mine"
    make(reg, tmp_path, "steps=128", "log_interval=64").train(callbacks=[Plateau(), Plateau(), tagged])
    saved = rlf.checkpoint.load(tmp_path / "checkpoint.rlf")["callbacks"]
    assert set(saved) == {f"{__name__}.Plateau", f"{__name__}.Plateau#2", "mine"}
    again = [Plateau(), Plateau(), Plateau()]
    again[2].state_key = "mine"
    rlf.load(tmp_path, registry=reg, overrides=["steps=256"]).train(callbacks=again)
    assert [callback.loaded for callback in again] == [{"rows": 2}] * 3


def test_a_state_no_checkpoint_can_hold_is_one_line_naming_the_plugin_and_the_run_is_saved(reg, tmp_path):
    make(reg, tmp_path, "steps=256", "checkpoint_interval=128").train()
    algo = rlf.load(tmp_path, registry=reg, overrides=["steps=512", "callbacks=['plateau']",
                                                        "callback.plateau.unstorable=true"])
    with pytest.raises(PluginRunError) as caught:
        algo.train()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("plugin 'resume-callbacks' failed in callback 'plateau' state_dict")
    assert "cannot checkpoint a object" in message and "fix the plugin" in message
    # the training state was whole: saved as it stood, with the callbacks' states of the last checkpoint
    saved = rlf.checkpoint.load(tmp_path / "checkpoint.rlf")
    assert saved["counters"]["env_steps"] == 384 and saved["callbacks"] == {}


def test_a_named_checkpoint_is_a_whole_checkpoint_beside_the_main_one(reg, tmp_path):
    make(reg, tmp_path, "steps=128", "log_interval=64").train(callbacks=[Named("snapshot-1.rlf")])
    snapshot = rlf.load(tmp_path / "snapshot-1.rlf", registry=reg)
    assert snapshot.counters["env_steps"] == 128  # the last row's call replaced the first's
    assert snapshot.evaluate(episodes=1)["length"] > 0


def test_a_named_checkpoint_outside_the_run_directory_is_refused_in_one_line(reg, tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(PluginRunError) as caught:
        make(reg, run_dir, "steps=128", "log_interval=64", "callbacks=['named']").train()
    assert "\n" not in str(caught.value)
    assert "'../outside.rlf' is not a checkpoint file name" in str(caught.value)
    assert not (tmp_path / "outside.rlf").exists()
