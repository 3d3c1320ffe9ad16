"""Loggers (csv, tensorboard, progress as default plugins, switchable, validated), callbacks (Python
API and plugin-registered), periodic evaluation with the best checkpoint, and stop-at-threshold."""

import csv
import json

import pytest
from pydantic import Field
from support import TestPlugin

import rlf
from rlf import Callback, ConfigError, StrictModel, UnknownNameError, hookimpl
from rlf.plugins import load_registry

EVENTS = []


class Recorder(Callback):
    def __init__(self, tag="api", fail_on_step=None):
        self.tag, self.fail_on_step, self.steps = tag, fail_on_step, 0

    def on_start(self, trainer):
        EVENTS.append((self.tag, "start", trainer.counters["env_steps"]))

    def on_step(self, trainer, result):
        self.steps += 1
        if self.fail_on_step == self.steps:
            raise RuntimeError("callback failed")

    def on_episode_end(self, trainer, episodes):
        EVENTS.append((self.tag, "episodes", len(episodes), episodes[0]["env_step"]))

    def on_log(self, trainer, metrics):
        EVENTS.append((self.tag, "log", metrics["env_step"]))

    def on_eval(self, trainer, metrics):
        EVENTS.append((self.tag, "eval", metrics["env_step"]))

    def on_checkpoint(self, trainer, path):
        EVENTS.append((self.tag, "checkpoint", path.name))

    def on_end(self, trainer, summary):
        EVENTS.append((self.tag, "end", summary["env_step"]))

    def close(self):
        EVENTS.append((self.tag, "close"))


class RecorderSettings(StrictModel):
    """Settings of the plugin's recorder."""

    tag: str = Field("plugin", description="Tag of its events.")


def build_recorder(run_dir, run, config):
    return Recorder(config.tag)


class CallbackPlugin:
    RLF_API_VERSION = rlf.API_VERSION

    @hookimpl
    def rlf_register_callbacks(self, register: rlf.RegisterCallback):
        register("recorder", build_callback=build_recorder, config=RecorderSettings, description="records events")


@pytest.fixture(scope="module")
def reg():
    return load_registry(extra_plugins=[("test-plugin", TestPlugin()), ("callbacks", CallbackPlugin())])


@pytest.fixture(autouse=True)
def clear_events():
    EVENTS.clear()


def make(reg, tmp_path, *overrides, algorithm="tabular-q"):
    return rlf.make(algorithm, "line", registry=reg,
                    overrides=["progress=false", f"run_dir='{tmp_path}'", "seed=3", *overrides])


def rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_core_loggers_are_default_plugins_and_can_be_switched_off(reg, tmp_path):
    assert {name: spec.plugin for name, spec in reg.loggers.items() if spec.plugin == "rlf"} == {
        "csv": "rlf", "tensorboard": "rlf", "progress": "rlf"}
    assert rlf.RunConfig(algorithm="a", env="b").loggers == ["csv", "tensorboard", "progress"]
    make(reg, tmp_path / "csv-only", "steps=300", "loggers=['csv']").train()
    made = {p.name for p in (tmp_path / "csv-only").iterdir()}
    assert {"metrics.csv", "episodes.csv"} <= made and "tensorboard" not in made
    make(reg, tmp_path / "none", "steps=300", "loggers=[]").train()
    # (hidden: the run-directory lock and its owner record)
    assert {p.name for p in (tmp_path / "none").iterdir() if not p.name.startswith(".")} == {"run.json",
                                                                                           "checkpoint.rlf"}


@pytest.mark.parametrize(("override", "message"), [
    ("loggers=['csv', 'tensorbord']", r"run.loggers: unknown logger 'tensorbord': did you mean 'tensorboard'\? "
                                      r"installed: csv, (\w+, )*progress, tensorboard"),
    ("loggers=['csv', 'csv']", "loggers: lists csv more than once"),
    ("callbacks=['recordr']", "run.callbacks: unknown callback 'recordr'"),
    ("logger.tensorboard.x=1", r"\[logger.tensorboard\] configures a logger that run.loggers does not select"),
    ("callback.recorder.tag=1", r"\[callback.recorder\] configures a callback that run.callbacks does not select"),
    ("stop_at={value=1}", "stop_at.metric 'eval/return' is an evaluation result: set eval_interval"),
])
def test_bad_logger_and_callback_settings_are_one_line_errors(reg, tmp_path, override, message):
    extra = ["loggers=['csv']"] if override.startswith("logger.") else []
    with pytest.raises((ConfigError, UnknownNameError), match=message) as caught:
        make(reg, tmp_path, override, *extra)
    assert "\n" not in str(caught.value)


def test_plugin_callback_settings_are_validated(reg, tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key 'callback.recorder.tga'; did you mean callback.recorder.tag"):
        make(reg, tmp_path, "callbacks=['recorder']", "callback.recorder.tga='x'")


def test_callbacks_from_plugins_and_the_api_see_every_event_in_order(reg, tmp_path):
    algo = make(reg, tmp_path, "steps=256", "log_interval=128", "checkpoint_interval=128", "callbacks=['recorder']",
                "callback.recorder.tag='mine'", "loggers=[]")
    algo.train(callbacks=[Recorder("api")])
    for tag in ("mine", "api"):
        seen = [event[1:] for event in EVENTS if event[0] == tag]
        assert seen[0] == ("start", 0) and seen[-2:] == [("end", 256), ("close",)]
        assert [e for e in seen if e[0] == "log"] == [("log", 128), ("log", 256)]
        assert [e for e in seen if e[0] == "checkpoint"] == [("checkpoint", "checkpoint.rlf")] * 3
        assert any(e[0] == "episodes" and e[1] > 0 for e in seen)
    saved = json.loads((tmp_path / "run.json").read_text())["config"]
    assert saved["callback"] == {"recorder": {"tag": "mine"}} and saved["run"]["loggers"] == []


def test_a_failing_callback_stops_training_and_every_callback_is_still_closed(reg, tmp_path):
    algo = make(reg, tmp_path, "steps=10000", "loggers=['csv']")
    with pytest.raises(RuntimeError, match="callback failed"):
        algo.train(callbacks=[Recorder("a", fail_on_step=3), Recorder("b")])
    assert ("a", "close") in EVENTS and ("b", "close") in EVENTS
    assert not any(event[1] == "end" for event in EVENTS)


def test_periodic_evaluation_writes_eval_csv_tensorboard_and_keeps_the_best_checkpoint(reg, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    algo = make(reg, tmp_path, "steps=3000", "eval_interval=1000", "eval_episodes=4", "log_interval=500")
    algo.train(callbacks=[Recorder()])
    evaluations = rows(tmp_path / "eval.csv")
    assert [int(r["env_step"]) for r in evaluations] == [1024, 2048, 3000]  # the first step at or past each 1000, and the end
    assert all(float(r["episodes"]) == 4 for r in evaluations)
    assert [e[2] for e in EVENTS if e[1] == "eval"] == [1024, 2048, 3000]
    best = json.loads((tmp_path / "best.json").read_text())
    returns = [float(r["return"]) for r in evaluations]
    assert best["return"] == max(returns) and best["env_step"] == int(evaluations[returns.index(max(returns))]["env_step"])
    assert max(returns) == 0.5  # the walker reaches the end: +1 for it, 0 for the quitter, averaged
    best_algo = rlf.load(tmp_path / "best.rlf", registry=reg)
    assert best_algo.counters["env_steps"] == best["env_step"]
    assert best_algo.evaluate(episodes=2, seed=7)["return"] == 0.5
    board = EventAccumulator(str(tmp_path / "tensorboard"))
    board.Reload()
    tags = board.Tags()["scalars"]
    assert {"eval/return", "eval/length", "mean_return", "steps_per_second"} <= set(tags)
    assert [event.step for event in board.Scalars("eval/return")] == [1024, 2048, 3000]


def test_stop_at_an_evaluation_threshold_ends_training_early_with_its_reason(reg, tmp_path):
    algo = make(reg, tmp_path, "steps=100000", "eval_interval=500", "eval_episodes=2",
                "stop_at={metric='eval/return', value=0.5}")
    algo.train()
    assert algo.counters["env_steps"] < 100000
    assert algo.stop_reason.startswith("eval/return = 0.5 >= 0.5 at env step ")
    final = rows(tmp_path / "metrics.csv")[-1]
    assert int(final["env_step"]) == algo.counters["env_steps"]  # the last row is written when stopping
    assert rlf.storage.checkpoint.load(tmp_path / "checkpoint.rlf")["counters"]["env_steps"] == algo.counters["env_steps"]


def test_stop_at_a_training_metric_and_below_a_value(reg, tmp_path):
    algo = make(reg, tmp_path, "steps=100000", "log_interval=200", "stop_at={metric='mean_length', value=8, mode='<='}")
    algo.train()
    assert algo.counters["env_steps"] < 100000 and "mean_length" in algo.stop_reason
    assert float(rows(tmp_path / "metrics.csv")[-1]["mean_length"]) <= 8


def test_a_resumed_run_keeps_its_best_and_evaluates_on_schedule(reg, tmp_path):
    make(reg, tmp_path, "steps=1000", "eval_interval=500", "eval_episodes=2").train()
    first = json.loads((tmp_path / "best.json").read_text())
    resumed = rlf.load(tmp_path, registry=reg, overrides=["steps=2000"])
    resumed.train()
    steps = [int(r["env_step"]) for r in rows(tmp_path / "eval.csv")]
    assert steps == [512, 1000, 1512, 2000]  # 1000: the end of the first run; chunks of 64 steps from there
    assert json.loads((tmp_path / "best.json").read_text())["return"] >= first["return"]


def test_eval_video_goes_to_tensorboard(reg, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    algo = make(reg, tmp_path, "steps=300", "loggers=['csv']")
    algo.train()
    algo.evaluate(episodes=1, record=tmp_path / "play.gif", tensorboard=True)
    board = EventAccumulator(str(tmp_path / "tensorboard"))
    board.Reload()
    assert board.Tags()["images"] == ["eval/video"]
    image = board.Images("eval/video")[0]
    assert image.step == 300 and image.encoded_image_string[:6] == b"GIF89a" and image.width == 40
    assert (tmp_path / "play.gif").read_bytes()[:6] == b"GIF89a"


def test_a_resume_may_switch_loggers_and_keeps_the_settings_of_those_still_selected(reg, tmp_path):
    make(reg, tmp_path, "steps=200", "loggers=['csv']", "callbacks=['recorder']", "callback.recorder.tag='x'").train()
    resumed = rlf.load(tmp_path, registry=reg, overrides=["steps=400", "loggers=['csv', 'tensorboard']",
                                                          "callbacks=[]"])
    assert list(resumed.resolved.loggers) == ["csv", "tensorboard"] and resumed.resolved.callbacks == {}
    resumed.train()
    assert (tmp_path / "tensorboard").is_dir()
    again = rlf.load(tmp_path, registry=reg, overrides=["callbacks=['recorder']"])
    assert again.resolved.callbacks["recorder"].tag == "plugin"  # dropped with the switch: back to its default


def test_stop_at_a_metric_the_run_never_logs_is_one_line_not_a_silent_no_op(reg, tmp_path, capsys):
    algo = make(reg, tmp_path, "steps=100000", "log_interval=100", "stop_at={metric='mean_retrun', value=1}")
    with pytest.raises(ConfigError, match=r"stop_at.metric 'mean_retrun' is not in 10 metrics rows \(its columns: "
                                          r".*mean_return.*\); name one of them"):
        algo.train()
    assert algo.counters["env_steps"] < 2000
    assert "rlf: warning: stop_at.metric 'mean_retrun' is not in the first metrics row" in capsys.readouterr().err


def test_stop_at_an_evaluation_key_that_does_not_exist_is_one_line(reg, tmp_path):
    algo = make(reg, tmp_path, "steps=100000", "eval_interval=200", "eval_episodes=1",
                "stop_at={metric='eval/retrun', value=1}")
    with pytest.raises(ConfigError, match=r"stop_at.metric 'eval/retrun' is not an evaluation result \(its columns: "
                                          r".*eval/return"):
        algo.train()


def test_a_best_json_that_is_not_rlf_s_record_is_replaced_not_a_traceback(reg, tmp_path, capsys):
    make(reg, tmp_path, "steps=600", "eval_interval=500", "eval_episodes=1").train()
    (tmp_path / "best.json").write_text("not json {")
    rlf.load(tmp_path, registry=reg, overrides=["steps=1200"]).train()
    assert "is not the record rlf writes" in capsys.readouterr().err
    assert json.loads((tmp_path / "best.json").read_text())["env_step"] >= 1000


def test_periodic_evaluation_can_act_as_in_training(reg, tmp_path):
    algo = make(reg, tmp_path, "steps=2000", "eval_interval=1000", "eval_episodes=20", "eval_stochastic=true",
                "algo.exploration={schedule='constant', start=0.5}")
    algo.train()
    final = rows(tmp_path / "eval.csv")[-1]
    assert int(final["env_step"]) == 2000
    seed = 3 + 2_000_003  # the periodic evaluation's own episodes
    sampled = algo.evaluate(episodes=20, seed=seed, stochastic=True)
    greedy = algo.evaluate(episodes=20, seed=seed)
    assert float(final["length"]) == pytest.approx(sampled["length"])
    assert sampled["length"] > greedy["length"]  # exploring at epsilon 0.5 takes longer down the line
