"""A generated corpus of bad input to every command besides `train`: `experiment` files, `compare`, `plot`,
`eval`, `new`, `config`, run settings that only bite while training (`stop_at`) and names that hold a
newline. Each case must end in exactly one `rlf: error:` line, exit code 2, no traceback, and nothing
created, changed or removed in the working directory or the fixtures (the runs compared, the files read).

The cases run in-process (``rlf.cli.commands.main``), as test_inputs_corpus.py's do.
"""

from __future__ import annotations

import itertools
import shutil

import pytest
from faults import assert_refused_in_one_line

from rlf.cli import commands as cli

ALGO = "random"
QUICK = ("--steps", "50", "--no-progress")

EXPERIMENT = """\
[experiment]
env = "gym:CartPole-v1"
steps = 64
seeds = [0]
runs_dir = "runs"
metrics = ["return"]
eval_episodes = 2

[algorithms.random]
"""

# [experiment] keys and values that must be refused (one line naming the key)
BAD_HEAD = {
    "env": ['""', '"   "', "5", "true", "[1]", '"no-such-env"', '"gym:NoSuchEnv-v0"'],
    "steps": ['"abc"', "true", "0", "-5", "64.5", "[64]", "10000000000001", "{a=1}"],
    "seeds": ["3", "[]", '["a"]', "[-1]", "[true]", "[1.5]", '"0,1"', "[4294967296]"],
    "runs_dir": ["5", '""', '"   "', "true", "[1]"],
    "metrics": ['"return"', "[]", "[1]", '[""]', "true"],
    "last": ["0", "-1", "true", '"all"', "1.5"],
    "eval_episodes": ["-1", "true", '"many"', "2.5", "1000001"],
    "eval_modes": ['"greedy"', "[]", '["sampled"]', "[1]", '["greedy", 2]'],
    "fixed_start": ['"env.noop_max=0"', '["steps"]', '["=1"]', "[1]"],
    "plot_metric": ['""', "5", "[1]"],
    "smooth": ["0", "-3", "true", '"x"', "100001"],
    "description": ["5", "[1]"],
    "budget": ["5"],  # an unknown key
}

# [algorithms.random] keys and values that must be refused
BAD_ALGORITHM = {
    "seeds": ["[]", "5", '["x"]', "[-2]"],
    "settings": ["[]", '["nope"]', '"default"', '["../x"]'],
    "config": ['""', "5", '"missing.toml"'],
    "steps": ["0", "true", '"x"', "1.5", "{nope=5}", "{default=0}", "{default=true}"],
    "until": ["5", '"flag"', "{}", '{metric="return", value=1}', '{metric="return", value=nan, every=10}',
              '{metric="return", value=1, every=0}', '{metric="", value=1, every=10}',
              '{metric="return", value=1, every=10, mode="sampled"}',
              '{metric="return", value=1, every=10, settings=["nope"]}',
              '{metric="return", value=1, every=10, when=2}'],
    "run": ["5", '{steps="x"}', "{bogus=1}", "{num_envs=0}"],
    "algo": ["5", "{nope=1}", '{exploration={start="x"}}'],
    "env": ["[1]", "{nope=1}"],
    "nope": ["1"],
}

BAD_NAMES = ['"../x"', '"a/b"', '".hidden"', '""', '"a\\nb"', '"' + "n" * 101 + '"']

BAD_FILES = {
    "not_toml": "[experiment\n",
    "no_experiment": "[algorithms.random]\n",
    "no_algorithms": '[experiment]\nenv = "gym:CartPole-v1"\n',
    "experiment_scalar": 'experiment = 5\n[algorithms.random]\n',
    "algorithms_scalar": '[experiment]\nenv = "gym:CartPole-v1"\nalgorithms = 5\n',
    "unknown_table": EXPERIMENT + "[bogus]\nx = 1\n",
    "settings_scalar": EXPERIMENT + "settings = 5\n",
    "run_unknown_key": EXPERIMENT + "[run]\nstpes = 5\n",
    "run_bad_value": EXPERIMENT + "[run]\nnum_envs = 0\n",
    "algo_bad_value": EXPERIMENT + '[algo.exploration]\nstart = "high"\n',
    "unknown_algorithm": EXPERIMENT + "[algorithms.no-such-algo]\n",
    "fixed_start_without_overrides": EXPERIMENT.replace("eval_episodes = 2", 'eval_episodes = 2\neval_modes = ["fixed-start"]'),
    "until_without_episodes": EXPERIMENT.replace("eval_episodes = 2", "eval_episodes = 0")
                              + 'until = {metric="return", value=1, every=10}\n',
    "runs_dir_through_a_file": EXPERIMENT.replace('runs_dir = "runs"', 'runs_dir = "{fixtures}/notes.txt/runs"'),
}


def _experiment_cases():
    for key, values in BAD_HEAD.items():
        for value in values:
            text = EXPERIMENT.replace("[experiment]\n", f"[experiment]\n{key} = {value}\n", 1)
            if key in EXPERIMENT.split("[algorithms")[0]:  # replace the valid line instead of repeating the key
                text = "\n".join(f"{key} = {value}" if line.startswith(f"{key} =") else line
                                 for line in EXPERIMENT.splitlines()) + "\n"
            yield f"experiment-head-{key}={value}", text
    for key, values in BAD_ALGORITHM.items():
        for value in values:
            yield f"experiment-algorithm-{key}={value}", EXPERIMENT + f"{key} = {value}\n"
    for name in BAD_NAMES:
        yield f"experiment-setting-name-{name[:12]}", EXPERIMENT.replace("[algorithms.random]\n", "") + (
            f"[settings.{name}]\n[algorithms.random]\n")
        yield f"experiment-algorithm-name-{name[:12]}", EXPERIMENT.replace("[algorithms.random]\n", f"[algorithms.{name}]\n")
    yield from BAD_FILES.items()


EXPERIMENT_CASES = list(_experiment_cases())

BROKEN_LOGS = {  # a run directory whose episodes.csv is ...
    "empty": b"",
    "header-only": b"env_step,return\n",
    "binary": bytes(range(256)) * 4,
    "not-utf8": "env_step,return\n1,caf\xe9\n".encode("latin-1"),
    "nul-bytes": b"env_step,return\n1,\x002\n",
    "ragged-without-values": b"env_step,return\n1\n2\n",
    "no-numbers": b"env_step,return\nabc,def\n",
}


def _command_cases():
    yield from ((f"experiment-file-{name}", ["experiment", f"{{fixtures}}/experiments/{i}.toml"])
                for i, (name, _) in enumerate(EXPERIMENT_CASES))
    yield "experiment-missing", ["experiment", "{fixtures}/nope.toml"]
    yield "experiment-directory", ["experiment", "{fixtures}"]
    good = "{fixtures}/good.toml"
    for flag, values in (("--steps", ["0", "-1", "x", "true", "1.5"]), ("--seeds", ["x", "0,a", "-1"]),
                         ("--eval-episodes", ["-1", "x"]), ("--runs-dir", ["", "{fixtures}/notes.txt"]),
                         ("--only", ["nothing/*"]), ("--set", ["steps=abc", "bogus=1", "=1", "num_envs=0"])):
        for value in values:
            yield f"experiment{flag}={value}", ["experiment", good, flag, value]
    # compare and plot: broken logs, bad arguments
    for kind in BROKEN_LOGS:
        yield f"compare-{kind}", ["compare", f"{{fixtures}}/runs/{kind}"]
        yield f"plot-{kind}", ["plot", f"{{fixtures}}/runs/{kind}", "-o", "curves.png"]
    yield "compare-missing-log", ["compare", "{fixtures}/runs/no-log"]
    yield "plot-missing-log", ["plot", "{fixtures}/runs/no-log", "-o", "curves.png"]
    for flag, values in (("--reps", ["0", "-1", "100001", "x", "1.5", "1e3", ""]),
                         ("--last", ["0", "-1", "x", "1000000001"]), ("--metric", ["", ",", "nope", "return,nope"]),
                         ("--source", ["eval", "final", "final-stochastic", "final-fixed-start", "bogus"]),
                         ("--format", ["xml"])):
        for value in values:
            yield f"compare{flag}={value}", ["compare", "{run}", flag, value]
    for flag, values in (("--smooth", ["0", "-1", "x", "1000001"]), ("--x", ["time", ""]),
                         ("--metric", ["nope", ""]), ("--source", ["eval", "final", "bogus"])):
        for value in values:
            yield f"plot{flag}={value}", ["plot", "{run}", "-o", "curves.png", flag, value]
    for target in ("{fixtures}/nope", "{fixtures}/notes.txt", "runs/*", "{fixtures}/foreign", "x\ny"):
        yield f"compare-target-{target[-10:]}", ["compare", target]
        yield f"plot-target-{target[-10:]}", ["plot", target, "-o", "curves.png"]
    # eval
    for flag, values in (("--episodes", ["0", "-1", "x", "1.5"]), ("--seed", ["x", "-1"]),
                         ("--record", ["{fixtures}/notes.txt/x.gif", "video.avi", "video"])):
        for value in values:
            yield f"eval{flag}={value}", ["eval", "{run}", flag, value]
    for target in ("{fixtures}/nope", "{fixtures}/notes.txt", "{fixtures}/foreign", "{fixtures}/x\ny.rlf",
                   "{fixtures}/fake.rlf"):
        yield f"eval-target-{target[-10:]}", ["eval", target]
    # new
    for name in ("", "A", "1x", "a--b", "-a", "a b", "a\nb", "x" * 300, "ppo", "random", "a.b", "a/b", "..", "ä"):
        yield f"new-algorithm-name-{name[:12]!r}", ["new", "algorithm", name, "--dir", "{fixtures}/new"]
    for argv in (["new"], ["new", "bogus", "x"], ["new", "algorithm"], ["new", "algorithm", "x", "--family", "nope"],
                 ["new", "environment", "x", "--family", "off-policy"], ["new", "algorithm", "x", "--multi-agent"],
                 ["new", "algorithm", "my-x", "--dir", "{fixtures}/notes.txt"]):
        yield f"new-{' '.join(argv[1:])[:40]}", argv
    # config
    for argv in (["config", "random", "--set", "steps=abc"], ["config", "random", "--set", "bogus=1"],
                 ["config", "random", "--config", "{fixtures}/nope.toml"], ["config", "random", "--env", "x\ny"],
                 ["config", "random", "--set", "loggers=[csv]"], ["config", "random", "--set", "collector.x=1"],
                 ["config", "no-such-algo"], ["config", "random", "--set", 'stop_at={metric="return", value=nan}']):
        yield f"config-{' '.join(argv[1:])[:40]}", argv
    # stop_at: checked before anything is written
    for value in ("5", '"x"', "{}", '{metric="return"}', '{metric="", value=1}', '{metric="return", value=nan}',
                  '{metric="return", value=inf}', '{metric="return", value="high"}', '{metric="return", value=1, mode="=="}',
                  '{metric="eval/return", value=1}', '{metric="return", value=1, extra=2}'):
        yield f"train-stop_at={value}", ["train", ALGO, "--env", "gym:CartPole-v1", *QUICK, "--set", f"stop_at={value}"]
    # names holding a newline stay one line
    for argv in (["train", "pp\no", *QUICK], ["train", ALGO, "--env", "gym:Cart\nPole-v1", *QUICK],
                 ["train", "--resume", "{fixtures}/x\ny"], ["train", ALGO, "--env", "gym:CartPole-v1", *QUICK,
                                                             "--set", "vector=\"a\nb\""]):
        yield f"newline-{argv[0]}-{len(argv)}-{argv[1][:4]!r}", argv


CASES = list(_command_cases())


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    root = tmp_path_factory.mktemp("fixtures")
    (root / "notes.txt").write_text("a user's file")
    (root / "foreign").mkdir()
    (root / "foreign" / "notes.txt").write_text("not a run")
    (root / "fake.rlf").write_bytes(b"PK\x03\x04 not a checkpoint")
    (root / "experiments").mkdir()
    for i, (_, text) in enumerate(EXPERIMENT_CASES):
        (root / "experiments" / f"{i}.toml").write_text(text.replace("{fixtures}", str(root)))
    (root / "good.toml").write_text(EXPERIMENT)
    run = root / "run"
    assert cli.main(["train", ALGO, "--env", "gym:CartPole-v1", "--steps", "256", "--no-progress",
                     "--run-dir", str(run)]) == 0
    for kind, content in [*BROKEN_LOGS.items(), ("no-log", None)]:
        broken = root / "runs" / kind
        broken.mkdir(parents=True)
        shutil.copy(run / "run.json", broken / "run.json")
        if content is not None:
            (broken / "episodes.csv").write_bytes(content)
    return root


def test_the_corpus_covers_every_command_with_200_cases():
    assert len(CASES) >= 200
    assert len({name for name, _ in CASES}) == len(CASES)
    assert {argv[0] for _, argv in CASES if argv} >= {"experiment", "compare", "plot", "eval", "new", "config", "train"}


@pytest.mark.parametrize(("name", "argv"), CASES, ids=[name for name, _ in CASES])
def test_bad_input_is_one_line_exit_2_and_touches_nothing(name, argv, fixtures, tmp_path, monkeypatch, capsys):
    assert_refused_in_one_line(argv, fixtures, tmp_path, monkeypatch, capsys)


def test_the_experiment_cases_are_distinct_files():
    texts = [text for _, text in EXPERIMENT_CASES]
    assert len(set(texts)) == len(texts)
    assert not any(itertools.chain.from_iterable(
        (name.startswith("experiment-head-") and text == EXPERIMENT,) for name, text in EXPERIMENT_CASES))
