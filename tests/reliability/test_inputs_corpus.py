"""A generated corpus of bad command lines and config files (issue 12): each must end in exactly one
`rlf: error:` line, exit code 2, no traceback, no run directory half-made and no file touched.

The cases run in-process (``rlf.cli.commands.main``) so hundreds take seconds; test_inputs_subprocess.py runs a
sample as real processes to check what the shell sees.
"""

from __future__ import annotations

import importlib.util
import itertools

import gymnasium
import pytest
from faults import assert_refused_in_one_line

from rlf.cli import commands as cli
from rlf.plugins import registry

gymnasium.register("RlfTestNeedsExtra-v0", entry_point="faults:needs_extra")

ALGO = "random"  # every case fails before training; a case that wrongly passes trains 50 steps at most
QUICK = ("--steps", "50", "--no-progress")

BAD_RUN_VALUES = {
    "steps": ["-1", "0", "true", "false", '"ten"', "1.5", "[1]", "{a=1}", "10000000000000", '"100"'],
    "seed": ["-1", "true", '"x"', "2.5", "4294967296", "[0]", '"3"'],
    "num_envs": ["0", "-3", "2000", "true", '"four"', "1.5", '"2"'],
    "vector": ['"threads"', "1", "true", "[1]", '""'],
    "checkpoint_interval": ["-1", "true", '"x"', "0.5"],
    "log_interval": ["0", "-5", "false", '"often"'],
    "device": ['"tpu"', '"cuda:x"', "5", "true", '"cuda:99"', '""'],
    "save_replay": ["2", '"maybe"', "[true]", "1", "0", '"true"', '"yes"', "1.0"],
    "progress": ["3", '"yes please"', "{}", "1", '"false"'],
    "env_timeout": ["0", "-1", '"soon"', "true", "100000", '"30"'],
    "env_restarts": ["-1", "true", "1.5", '"x"', "100000"],
    "run_dir": ["5", "[1]", "true"],
}


def _torch_without_cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return True
    import torch

    return not torch.cuda.is_available()


if _torch_without_cuda():  # only where there is no CUDA is device=cuda bad input
    BAD_RUN_VALUES["device"] += ['"cuda"', '"cuda:0"']


def _run_value_cases():
    for key, values in BAD_RUN_VALUES.items():
        for value in values:
            steps = () if key == "steps" else ("--steps", "50")
            progress = () if key == "progress" else ("--no-progress",)  # a flag would hide the bad value
            base = ("train", ALGO, "--env", "gym:CartPole-v1", *progress, *steps)
            yield f"set-{key}={value}", [*base, "--set", f"{key}={value}"], None
            yield f"set-run.{key}={value}", [*base, "--set", f"run.{key}={value}"], None
            yield f"file-{key}={value}", [*base, "--config", "{fixtures}/" + _file_name(key, value)], \
                (_file_name(key, value), f"[run]\n{key} = {value}\n")


def _file_name(key: str, value: str) -> str:
    safe = "".join(c if c.isalnum() else "_" for c in value)
    return f"run_{key}_{safe}.toml"


def _other_cases():
    train = ("train", ALGO, "--env", "gym:CartPole-v1", *QUICK)
    # unknown keys, in every section and depth
    for key in ("stpes", "sed", "num_env", "vectr", "run.foo", "algo.nope", "env.nope", "env.idd",
                "algo.exploration.nope", "algo.exploration.start.deeper", "a.b.c", "envs.id"):
        yield f"unknown-key-{key}", [*train, "--set", f"{key}=1"], None
    # malformed --set
    for pair in ("steps", "=5", "", "algo.=1", ".steps=1", "algo..lr=1", "run.=3", "steps==5", " =1",
                 "algo.exploration=1 ", "steps=--1"):
        yield f"malformed-set-{pair!r}", [*train, "--set", pair], None
    yield "set-into-a-value", [*train, "--set", "seed=1", "--set", "seed.x=2"], None
    # unknown algorithm and environment names
    for name in ("no-such-algo", "ppo2", "", "RANDOM", "random ", "gym:CartPole-v1", "-", "a" * 300):
        yield f"unknown-algorithm-{name[:20]!r}", ["train", name, "--env", "gym:CartPole-v1", *QUICK], None
    for env in ("atari", "gym:NoSuchEnv-v0", "gym:", "gym:CartPol-v1", "mario2", ":", "gym", "predator",
                "gym:ALE/Pong-v5", "x" * 300, "gym:CartPole-v1:extra"):
        yield f"unknown-env-{env[:20]!r}", ["train", ALGO, "--env", env, *QUICK], None
    # settings that would be silently ignored or are chosen elsewhere
    for value in ("dqn", '"ppo"', "5", '""'):
        yield f"set-algorithm={value}", [*train, "--set", f"algorithm={value}"], None
        yield f"set-run.algorithm={value}", [*train, "--set", f"run.algorithm={value}"], None
    for value in ("5", "true", "[1]", '""', "{}", "1.5", '"  "'):
        yield f"set-env={value}", ["train", ALGO, *QUICK, "--set", f"env={value}"], None
    yield "env-conflicts-with-set", [*train, "--set", 'env="gym:Acrobot-v1"'], None
    # environment problems
    for algorithm, spec in registry().algorithms.items():
        # Blackjack observes a Tuple: bad input only for an algorithm that does not declare Tuple support
        if "Tuple" not in (spec.observation_spaces or ()):
            yield f"blackjack-{algorithm}", ["train", algorithm, "--env", "gym:Blackjack-v1", *QUICK], None
    yield "missing-gym-extra", ["train", ALGO, "--env", "gym:RlfTestNeedsExtra-v0", *QUICK], None
    if importlib.util.find_spec("Box2D") is None:
        yield "missing-box2d", ["train", ALGO, "--env", "gym:LunarLander-v3", *QUICK], None
    for kwargs in ("{foo=1}", "{render_mode=5, bar=2}", "{length=1}", "5", '"x"', "[1]"):
        yield f"env-kwargs={kwargs}", [*train, "--set", f"env.kwargs={kwargs}"], None
    for value in ("0", "-1", "true", '"x"'):
        yield f"env-max_episode_steps={value}", [*train, "--set", f"env.max_episode_steps={value}"], None
    for value in ("5", '""', "true"):
        yield f"env-id={value}", [*train, "--set", f"env.id={value}"], None
    # algorithm config values (random's exploration schedule)
    for key, value in itertools.product(("algo.exploration.start", "algo.exploration.end", "algo.exploration.decay"),
                                        ("-0.1", "1.5", "true", '"x"', '"0.5"')):
        yield f"{key}={value}", [*train, "--set", f"{key}={value}"], None
    for key, value in itertools.product(("algo.exploration.decay_steps", "algo.actors", "algo.actor_sync_interval",
                                         "algo.seed_offset"), ("true", "-1", '"x"', "2.5", '"2"')):
        yield f"{key}={value}", [*train, "--set", f"{key}={value}"], None
    for value in ('"sometimes"', "1", "true"):
        yield f"algo.exploration.schedule={value}", [*train, "--set", f"algo.exploration.schedule={value}"], None
    # config files
    broken_files = {
        "not_toml.toml": "steps = [", "equals.toml": "=", "dup.toml": "steps = 1\nsteps = 2\n",
        "unknown_table.toml": "[foo]\nx = 1\n", "run_scalar.toml": "run = 5\n", "algo_list.toml": "algo = [1]\n",
        "env_string.toml": 'env = 5\n', "algorithm_in_file.toml": '[run]\nalgorithm = "dqn"\n',
        "nested_unknown.toml": "[algo.exploration]\nnope = 1\n", "bool_seed.toml": "seed = true\n",
        "unterminated.toml": 'steps = "10\n', "tab.toml": "[run\nsteps = 1\n",
    }
    for name, text in broken_files.items():
        yield f"config-{name}", [*train, "--config", "{fixtures}/" + name], (name, text)
    yield "config-not-utf8", [*train, "--config", "{fixtures}/latin1.toml"], ("latin1.toml", b"# caf\xe9\n")
    yield "config-binary", [*train, "--config", "{fixtures}/binary.toml"], ("binary.toml", b"\x00\xff\xfe\x80")
    yield "config-directory", [*train, "--config", "{fixtures}"], None
    yield "config-missing", [*train, "--config", "{fixtures}/nope.toml"], None
    # argparse-level mistakes
    for argv in (["train", ALGO, "--steps", "abc"], ["train", ALGO, "--seed", "x"], ["train", ALGO, "--bogus"],
                 [], ["train", ALGO, "--steps"], ["eval"], ["frobnicate"], ["eval", "x", "--episodes", "x"],
                 ["list", "extra"], ["train", ALGO, "--steps", "1e3"]):
        yield f"argparse-{' '.join(argv)}", argv, None
    yield "no-algorithm", ["train", "--env", "gym:CartPole-v1"], None
    for flag, pair in (("--steps", "steps=7"), ("--seed", "seed=3"), ("--run-dir", 'run_dir="elsewhere"')):
        yield f"flag-and-set-disagree-{flag}", [*train, flag, "9" if flag != "--run-dir" else "here", "--set", pair], None
    yield "steps-negative", ["train", ALGO, "--env", "gym:CartPole-v1", "--steps", "-5"], None
    yield "seed-negative", ["train", ALGO, "--env", "gym:CartPole-v1", "--seed", "-1", *QUICK], None
    # resume, eval and config of missing, foreign or mismatched runs
    yield "resume-missing", ["train", "--resume", "{fixtures}/nope"], None
    yield "resume-foreign", ["train", "--resume", "{fixtures}/foreign"], None
    yield "resume-a-file", ["train", "--resume", "{fixtures}/not_toml.toml"], ("not_toml.toml", "steps = [")
    yield "resume-with-algorithm", ["train", ALGO, "--resume", "{run}"], None
    yield "resume-with-env", ["train", "--env", "gym:Acrobot-v1", "--resume", "{run}"], None
    yield "resume-with-config", ["train", "--resume", "{run}", "--config", "{fixtures}/dup.toml"], None
    for pair in ('env="gym:Acrobot-v1"', "run.env=5", "algorithm=dqn", 'run.algorithm="ppo"'):
        yield f"resume-set-{pair}", ["train", "--resume", "{run}", "--set", pair], None
    yield "run-dir-is-a-file", [*train, "--run-dir", "{fixtures}/dup.toml"], ("dup.toml", "steps = 1\nsteps = 2\n")
    yield "run-dir-under-a-file", [*train, "--run-dir", "{fixtures}/dup.toml/run"], None
    yield "run-dir-name-too-long", [*train, "--run-dir", "{fixtures}/" + "r" * 300], None
    yield "run-dir-set-is-a-file", [*train, "--set", 'run_dir="{fixtures}/dup.toml"'], None
    yield "eval-missing", ["eval", "{fixtures}/nope"], None
    yield "eval-foreign", ["eval", "{fixtures}/foreign"], None
    for episodes in ("0", "-1"):
        yield f"eval-episodes={episodes}", ["eval", "{run}", "--episodes", episodes], None
    yield "config-unknown-algorithm", ["config", "no-such-algorithm"], None
    yield "config-nothing", ["config"], None
    yield "config-unknown-env", ["config", "--env", "atari"], None
    yield "config-bad-env-of-algorithm", ["config", ALGO, "--env", "nope"], None


CASES = list(_run_value_cases()) + list(_other_cases())


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """Config files for the cases, a foreign directory and one real run to resume and evaluate."""
    root = tmp_path_factory.mktemp("fixtures")
    for _, _, made in CASES:
        if made:
            name, content = made
            (root / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    (root / "foreign").mkdir()
    (root / "foreign" / "notes.txt").write_text("not a run")
    run = root / "run"
    assert cli.main(["train", ALGO, "--env", "gym:CartPole-v1", "--steps", "64", "--no-progress",
                     "--run-dir", str(run)]) == 0
    return root


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 300
    assert len({name for name, _, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(("name", "argv", "made"), CASES, ids=[name for name, _, _ in CASES])
def test_bad_input_is_one_line_exit_2_and_touches_nothing(name, argv, made, fixtures, tmp_path, monkeypatch, capsys):
    assert_refused_in_one_line(argv, fixtures, tmp_path, monkeypatch, capsys)
