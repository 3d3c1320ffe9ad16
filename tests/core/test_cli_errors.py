"""Bad input: one line naming the problem and the fix, a non-zero exit, no traceback, nothing lost."""

import pytest
from core.test_plugins import run_rlf
from support import install_fake_plugin


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    install_fake_plugin(site, "test", "support:test_plugin")
    return site


def assert_one_line_error(result, *fragments):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("rlf: error:")]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_unknown_algorithm_and_environment(site):
    # a name no plugin registers (sac was the example until rlf-plugin-sac existed)
    assert_one_line_error(run_rlf("train", "no-such-algo", site=site), "unknown algorithm 'no-such-algo'",
                          "rlf-plugin-no-such-algo")
    assert_one_line_error(run_rlf("train", "tabular-q", "--env", "atari", site=site),
                          "unknown environment 'atari'", "pip install rlf-plugin-atari")
    assert_one_line_error(run_rlf("train", "tabular-q", "--env", "gym:CartPol-v1", site=site),
                          "gymnasium has no environment", "CartPole-v1")


def test_bad_config_values_and_keys(site, tmp_path):
    assert_one_line_error(run_rlf("train", "tabular-q", "--env", "line", "--set", "algo.alpha=2", site=site),
                          "algo.alpha")
    assert_one_line_error(run_rlf("train", "tabular-q", "--env", "line", "--set", "algo.nope=1", site=site),
                          "unknown key 'algo.nope'")
    assert_one_line_error(run_rlf("train", "tabular-q", "--env", "line", "--steps", "-5", site=site), "steps")
    bad = tmp_path / "bad.toml"
    bad.write_text("steps = [")
    assert_one_line_error(run_rlf("train", "tabular-q", "--env", "line", "--config", str(bad), site=site),
                          "not valid TOML")


def test_incompatible_action_space(site):
    assert_one_line_error(run_rlf("train", "tabular-q", "--env", "gym:Pendulum-v1", "--steps", "10", site=site),
                          "supports discrete action spaces", "Box")


def test_resume_of_missing_foreign_or_corrupt_runs(site, tmp_path):
    assert_one_line_error(run_rlf("train", "--resume", str(tmp_path / "nope"), site=site), "does not exist")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("hello")
    assert_one_line_error(run_rlf("train", "--resume", str(foreign), site=site), "not an rlf run directory")
    run = tmp_path / "run"
    ok = run_rlf("train", "tabular-q", "--env", "line", "--steps", "100", "--no-progress", "--run-dir", str(run),
                 site=site)
    assert ok.returncode == 0, ok.stderr
    good = (run / "checkpoint.rlf").read_bytes()
    (run / "checkpoint.rlf").write_bytes(good[: len(good) // 2])
    assert_one_line_error(run_rlf("train", "--resume", str(run), site=site), "corrupt")
    (run / "checkpoint.rlf").write_bytes(b"not a zip at all")
    assert_one_line_error(run_rlf("eval", str(run), site=site), "corrupt")
    assert_one_line_error(run_rlf("train", "tabular-q", "--resume", str(run), site=site), "--resume continues")


def test_a_run_directory_without_checkpoint(site, tmp_path):
    run = tmp_path / "empty-run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    assert_one_line_error(run_rlf("eval", str(run), site=site), "has no checkpoint yet")


def test_eval_seed_picks_other_episodes_and_a_bad_one_is_one_line(site, tmp_path):
    import json

    run = tmp_path / "run"
    ok = run_rlf("train", "linear-pg", "--env", "gym:CartPole-v1", "--steps", "256", "--seed", "3", "--no-progress",
                 "--run-dir", str(run), site=site)
    assert ok.returncode == 0, ok.stderr

    def lengths(*extra):
        done = run_rlf("eval", str(run), "--stochastic", "--episodes", "5", "--json", *extra, site=site)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["length"]

    default = lengths()
    assert lengths("--seed", "3") == default  # the run's own seed: the episodes every evaluation plays
    assert lengths("--seed", "11") == lengths("--seed", "11")
    assert lengths("--seed", "11") != default
    assert_one_line_error(run_rlf("eval", str(run), "--seed", "-1", site=site), "seed must be an integer >= 0")


@pytest.mark.parametrize("command", [("train", "tabular-q", "--env", "line", "--config"), ("experiment",),
                                     ("config", "tabular-q", "--config")])
def test_an_endless_or_huge_settings_file_is_refused_unread(site, tmp_path, command):
    assert_one_line_error(run_rlf(*command, "/dev/zero", site=site), "/dev/zero", "larger than 16 MiB")
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"# " + b"x" * (17 << 20) + b"\n")
    assert_one_line_error(run_rlf(*command, str(huge), site=site), "huge.toml", "larger than 16 MiB")
