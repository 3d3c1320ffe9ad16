"""`rlf export`: a run's agent without the learner's state, which `rlf eval` plays and nothing resumes."""

import pytest

import rlf
from rlf.cli.commands import main
from rlf.storage import checkpoint


@pytest.fixture
def trained(registry, tmp_path):
    # DQN-like off-policy test algorithm: its learner checkpoint carries a replay buffer, the agent does not
    run = tmp_path / "run"
    algo = rlf.make("tabular-q", "line", registry=registry,
                    overrides=["progress=false", f"run_dir='{run}'", "steps=300", "num_envs=2"])
    algo.train()
    return algo, run


def test_export_keeps_the_agent_and_drops_the_learner(trained, tmp_path, registry):
    algo, run = trained
    target = tmp_path / "agent.rlf"
    done = rlf.export(run, target)
    assert done["env_steps"] == 300 and done["bytes"] == target.stat().st_size
    state = checkpoint.load(target)
    full = checkpoint.load(run / "checkpoint.rlf")
    assert state["strategy"]["learner"] is None and full["strategy"]["learner"] is not None
    assert state["config"]["run"]["run_dir"] is None
    assert "trainer" not in state
    # the same greedy play as the run it came from
    played = rlf.load(target, registry=registry).evaluate(episodes=3, seed=5)
    assert played == algo.evaluate(episodes=3, seed=5)


def test_an_exported_agent_cannot_be_trained(trained, tmp_path, registry):
    _, run = trained
    rlf.export(run, tmp_path / "agent.rlf")
    loaded = rlf.load(tmp_path / "agent.rlf", registry=registry, overrides=[f"run_dir='{tmp_path / 'new'}'"])
    with pytest.raises(rlf.ConfigError, match="exported agent .* evaluate but not train"):
        loaded.train(steps=600)
    assert not (tmp_path / "new").exists()


def test_export_refuses_to_replace_a_file_unless_told(trained, tmp_path, capsys):
    _, run = trained
    target = tmp_path / "agent.rlf"
    target.write_bytes(b"the user's own file")
    assert main(["export", str(run), str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already exists" in err[0] and "--overwrite" in err[0]
    assert target.read_bytes() == b"the user's own file"
    assert main(["export", str(run), str(tmp_path / "agent.zip")]) == 2
    assert "name the exported agent <name>.rlf" in capsys.readouterr().err
    assert main(["export", str(run / "checkpoint.rlf"), str(run / "checkpoint.rlf"), "--overwrite"]) == 2
    assert "is the checkpoint being exported" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing"), str(tmp_path / "x.rlf")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["export", str(run), str(target), "--overwrite"]) == 0
    assert "exported" in capsys.readouterr().out and checkpoint.load(target)["contents"] == "agent-weights"
