"""Observation spaces declared at registration are checked before the run directory exists, and a run
directory a failed start left behind (no checkpoint, no data) is rlf's debris, not a run."""

from __future__ import annotations

import json

import pytest
from fault_support import assert_one_line_error, make_site, rlf
from support import install_fake_plugin

PLUGIN_SOURCE = '''
import rlf
from support import TabularQConfig, build_tabular_agent, build_tabular_learner


def big_images(space):
    if len(space.shape) == 3 and min(space.shape[:2]) >= 36:
        return None
    return "images of at least 36x36"


def build_fussy_agent(context):
    # what the tutorial and the template do for a space they cannot handle, found only once building
    raise rlf.IncompatibleError("fussy reads Discrete observations only; choose another environment")


class SpacesPlugin:
    RLF_API_VERSION = 1

    @rlf.hookimpl
    def rlf_register_algorithms(self, register):
        register("grid-q", build_agent=build_tabular_agent, build_learner=build_tabular_learner,
                 family=rlf.StrategyFamily.OFF_POLICY, config=TabularQConfig,
                 observation_spaces=("Discrete",))
        register("pixels-q", build_agent=build_tabular_agent, build_learner=build_tabular_learner,
                 family=rlf.StrategyFamily.OFF_POLICY, config=TabularQConfig, observation_check=big_images)
        register("fussy", build_agent=build_fussy_agent, build_learner=build_tabular_learner,
                 family=rlf.StrategyFamily.OFF_POLICY, config=TabularQConfig)


plugin = SpacesPlugin()
'''

TRAIN = ("--no-progress", "--steps", "64")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = make_site(tmp_path_factory.mktemp("site"))
    install_fake_plugin(site, "spaces", "rlf_spaces_plugin:plugin", PLUGIN_SOURCE, module="rlf_spaces_plugin")
    return site


def test_declared_observation_classes_refuse_before_the_run_directory_exists(site, tmp_path):
    run = tmp_path / "run"
    refused = rlf("train", "grid-q", "--env", "gym:CartPole-v1", *TRAIN, "--run-dir", str(run), site=site)
    assert_one_line_error(refused, "algorithm 'grid-q'", "Discrete observations", "agent 'agent'", "Box(")
    assert not run.exists()
    ok = rlf("train", "grid-q", "--env", "gym:FrozenLake-v1", *TRAIN, "--run-dir", str(run), site=site)
    assert ok.returncode == 0, ok.stderr


def test_an_observation_check_is_quoted_in_the_refusal(site, tmp_path):
    run = tmp_path / "run"
    refused = rlf("train", "pixels-q", "--env", "gym:CartPole-v1", *TRAIN, "--run-dir", str(run), site=site)
    assert_one_line_error(refused, "algorithm 'pixels-q'", "images of at least 36x36", "Box(")
    assert not run.exists()


def registered(observation_spaces):
    from support import TabularQConfig, build_tabular_agent, build_tabular_learner

    import rlf
    from rlf.plugins import load_registry

    class Declaring:
        RLF_API_VERSION = 1

        @rlf.hookimpl
        def rlf_register_algorithms(self, register):
            register("declaring", build_agent=build_tabular_agent, build_learner=build_tabular_learner,
                     family="off-policy", config=TabularQConfig, observation_spaces=observation_spaces)

    return load_registry(extra_plugins=[("declaring", Declaring())], strict=True).algorithm("declaring")


@pytest.mark.parametrize("declared", [("discrete",), (int,), ()])
def test_bad_declarations_are_refused_at_registration(declared):
    import rlf

    with pytest.raises(rlf.PluginError, match="observation_spaces must name gymnasium.spaces classes"):
        registered(declared)


def test_classes_may_be_declared_too():
    from gymnasium import spaces

    from rlf import EnvSpec, IncompatibleError
    from rlf.resolution import check_compatible

    spec = registered((spaces.Discrete, "Box"))
    bits = EnvSpec("bits", ("agent",), {"agent": spaces.MultiBinary(3)}, {"agent": spaces.Discrete(2)}, False, 1)
    with pytest.raises(IncompatibleError, match="reads Discrete/Box observations"):
        check_compatible(spec, bits)


def test_a_run_directory_left_by_a_failed_start_is_not_a_run(site, tmp_path):
    run = tmp_path / "run"
    failed = rlf("train", "fussy", "--env", "gym:CartPole-v1", *TRAIN, "--run-dir", str(run), site=site)
    assert_one_line_error(failed, "Discrete observations only")
    assert (run / "run.json").is_file() and not (run / "checkpoint.rlf").exists()
    (run / "notes.txt").write_text("mine")  # the user's: kept, and trained beside with --overwrite only

    again = rlf("train", "tabular-q", "--env", "line", *TRAIN, "--run-dir", str(run), "--overwrite", site=site)
    assert again.returncode == 0, again.stderr
    assert (run / "notes.txt").read_text() == "mine"
    assert json.loads((run / "run.json").read_text())["config"]["run"]["algorithm"] == "tabular-q"

    debris = tmp_path / "debris"
    assert rlf("train", "fussy", "--env", "gym:CartPole-v1", *TRAIN, "--run-dir", str(debris),
               site=site).returncode == 2
    fresh = rlf("train", "tabular-q", "--env", "line", *TRAIN, "--run-dir", str(debris), site=site)
    assert fresh.returncode == 0, fresh.stderr  # not "already holds a run ... --resume"
    assert json.loads((debris / "run.json").read_text())["config"]["run"]["algorithm"] == "tabular-q"
    assert (debris / "checkpoint.rlf").is_file()


def test_a_run_with_data_rows_but_no_checkpoint_is_still_a_run(site, tmp_path):
    from rlf.storage import rundir

    run = tmp_path / "run"
    assert rlf("train", "tabular-q", "--env", "line", *TRAIN, "--run-dir", str(run), site=site).returncode == 0
    (run / "checkpoint.rlf").unlink()
    for kept in run.glob("checkpoint-*.rlf"):
        kept.unlink()
    assert rundir.holds_run(run)  # its metrics are data: --overwrite or --resume decide, not rlf


def test_the_template_and_the_tutorial_refuse_with_incompatible_error(tmp_path, monkeypatch):
    import importlib
    from pathlib import Path

    from gymnasium import spaces

    from rlf import BuildContext, EnvSpec, IncompatibleError
    from rlf.cli import scaffold
    from rlf.config import RunConfig

    directory, _ = scaffold.new_plugin("algorithm", "spaces-demo", tmp_path)
    monkeypatch.syspath_prepend(str(next(Path(directory).glob("src"))))
    factory = importlib.import_module("rlf_plugin_spaces_demo.factory")
    config = importlib.import_module("rlf_plugin_spaces_demo.config").SpacesDemoConfig()
    wheel = EnvSpec("wheel", ("agent",), {"agent": spaces.Box(-1, 1, (3,))}, {"agent": spaces.Box(-1, 1, (1,))},
                    False, 1)
    with pytest.raises(IncompatibleError, match="needs discrete actions"):
        factory.build_agent(BuildContext(env_spec=wheel, config=config, run=RunConfig(algorithm="spaces-demo", env="wheel"), seed=0, device="cpu"))

