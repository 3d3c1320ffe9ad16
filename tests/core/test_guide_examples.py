"""The plugin guide's examples, run as written: every ```python block of the guide's pages (docs/plugin-guide/)
that starts with a ``# rlf_plugin_<name>/<module>.py`` line is written out as that file of a package, which is
then loaded as a plugin and trained with. A guide example that stops working fails here, not in a reader's hands."""

from __future__ import annotations

import importlib
import json
import re
import sys
import types
from pathlib import Path

import pytest
from pydantic import Field
from support import TestPlugin, build_linear_agent, build_linear_learner

import rlf
from rlf.api import make
from rlf.plugins import load_registry

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "plugin-guide"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
HEADER = re.compile(r"# (rlf_plugin_\w+)/(\w+)\.py")


def guide_pages() -> list[Path]:
    return sorted(GUIDE.glob("*.md"))


def guide_blocks() -> list[str]:
    return [block for page in guide_pages() for block in BLOCK.findall(page.read_text(encoding="utf-8"))]


def test_every_example_of_the_guide_is_on_its_pages():
    # the guide was one page with 15 python blocks, 6 of them files of the example plugins (written out and
    # trained with below) and the callback example; splitting it into pages must not lose one
    blocks = guide_blocks()
    assert len(guide_pages()) >= 10 and len(blocks) >= 15
    assert sum(bool(HEADER.match(block)) for block in blocks) >= 6
    assert sum("class StopOnNaN" in block for block in blocks) == 1


@pytest.fixture
def guide_packages(tmp_path, monkeypatch):
    """Every file-headed block written into its package under tmp_path, importable."""
    written: dict[str, list[str]] = {}
    for block in guide_blocks():
        header = HEADER.match(block)
        if header:
            package, module = header.groups()
            folder = tmp_path / package
            folder.mkdir(exist_ok=True)
            (folder / "__init__.py").touch()
            (folder / f"{module}.py").write_text(block)
            written.setdefault(package, []).append(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield written
    for name in [m for m in sys.modules if m.startswith(tuple(written))]:
        del sys.modules[name]


def registry_with(*packages: str, extra: tuple = ()):
    plugins = [("test-plugin", TestPlugin()), *extra]
    plugins += [(package, importlib.import_module(f"{package}.plugin")) for package in packages]
    return load_registry(extra_plugins=plugins)


def test_the_guide_has_an_example_plugin_of_every_kind(guide_packages):
    assert {"rlf_plugin_counting", "rlf_plugin_monte_carlo", "rlf_plugin_jsonl"} <= set(guide_packages)
    assert all("plugin" in modules for modules in guide_packages.values())


def test_the_collector_example_steps_the_training_envs(guide_packages, tmp_path):
    report = tmp_path / "steps.json"
    algo = make("tabular-q", "line", registry=registry_with("rlf_plugin_counting"), overrides=[
        "vector=counting", f"collector.report='{report}'", "num_envs=3", "steps=120", "progress=false",
        f"run_dir='{tmp_path / 'run'}'"])
    algo.train()
    assert json.loads(report.read_text())["steps"] * 3 == algo.counters["env_steps"] == 120


def test_the_strategy_example_trains_an_algorithm_of_its_family(guide_packages, tmp_path):
    strategy = importlib.import_module("rlf_plugin_monte_carlo.plugin")

    class MonteCarloPG(strategy.MonteCarloConfig):
        lr: float = Field(0.05, gt=0, le=1, description="Step size.")

    class UsesTheFamily:
        RLF_API_VERSION = 1

        @rlf.hookimpl
        def rlf_register_algorithms(self, register):
            register("mc-pg", build_agent=build_linear_agent, build_learner=build_linear_learner,
                     family="monte-carlo", config=MonteCarloPG)

    reg = registry_with("rlf_plugin_monte_carlo", extra=(("mc-pg", UsesTheFamily()),))
    assert reg.algorithm("mc-pg").family == "monte-carlo" and "monte-carlo" in reg.strategies
    algo = make("mc-pg", "line", registry=reg, overrides=[
        "num_envs=2", "steps=4000", "progress=false", "algo.rollout_steps=16", "env.length=4",
        f"run_dir='{tmp_path / 'run'}'"])
    algo.train()
    assert algo.counters["env_steps"] >= 4000
    # the line env pays for reaching its end: full returns teach the walker to go there
    assert algo.evaluate(episodes=5)["reached"] == 1.0


def test_the_logger_example_writes_each_row_once_across_a_kill_and_resume(guide_packages, tmp_path):
    reg = registry_with("rlf_plugin_jsonl")
    run_dir = tmp_path / "run"
    make("tabular-q", "line", registry=reg, overrides=[
        "loggers=['csv', 'jsonl']", "steps=200", "log_interval=50", "checkpoint_interval=100", "progress=false",
        f"run_dir='{run_dir}'"]).train()
    first = [json.loads(row) for row in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(first) >= 3 and first[-1]["env_step"] == 200 and "mean_return" in first[-1]
    # what a run killed after its checkpoint at env step 200 leaves behind: a row logged past the
    # checkpoint (the resume logs that step again) and a line the kill cut short
    with open(run_dir / "metrics.jsonl", "a") as handle:
        handle.write(json.dumps({"env_step": 250, "killed": 1}) + "\n" + '{"env_step": 30')
    rlf.load(run_dir, registry=reg).train(steps=400)
    rows = [json.loads(row) for row in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [row["env_step"] for row in rows]
    assert rows[:len(first)] == first and not any("killed" in row for row in rows)
    assert steps == sorted(set(steps)) and steps[-1] == 400 and len(rows) > len(first)


def test_the_callback_example_stops_a_run_whose_metric_is_nan(guide_packages, tmp_path):
    page, source = next((page, block) for page in guide_pages()
                        for block in BLOCK.findall(page.read_text(encoding="utf-8")) if "class StopOnNaN" in block)
    module = types.ModuleType("guide_stop_on_nan")
    exec(compile(source, str(page), "exec"), module.__dict__)  # noqa: S102 - the project's own docs
    class NaNOnce(rlf.Callback):  # a learner whose loss became NaN, as the loggers see it
        def on_log(self, trainer, metrics):
            if trainer.counters["env_steps"] >= 150:
                metrics["loss"] = float("nan")

    class MakesNaN:
        RLF_API_VERSION = 1

        @rlf.hookimpl
        def rlf_register_callbacks(self, register):
            register("nan-once", build_callback=lambda run_dir, run, config: NaNOnce())

    reg = load_registry(extra_plugins=[("test-plugin", TestPlugin()), ("stop-on-nan", module), ("nan", MakesNaN())])
    algo = make("tabular-q", "line", registry=reg, overrides=[
        "callbacks=['nan-once', 'stop-on-nan']", "steps=400", "log_interval=50", "progress=false",
        f"run_dir='{tmp_path / 'run'}'"])
    algo.train()
    assert 150 <= algo.counters["env_steps"] < 400
    assert "NaN" in (algo.stop_reason or "")
