"""The ``rlf`` command line. Errors a user can fix are printed as one line, with a non-zero exit."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlf.cli.results import COMMANDS as RESULTS_COMMANDS
from rlf.cli.results import add_commands as add_results_commands
from rlf.errors import RlfError

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """argparse's usage errors as the one line every other user error is."""

    def error(self, message: str):
        self.exit(EXIT_USER_ERROR, f"rlf: error: {self.prog}: {one_line(message)}; see `{self.prog} --help`\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rlf", description="Train reinforcement-learning agents from plugins.")
    parser.add_argument("--strict", action="store_true",
                        help="fail if any plugin fails to load (also RLF_STRICT_PLUGINS=1)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = sub.add_parser("train", help="train an algorithm (or --resume a run)")
    train.add_argument("algorithm", nargs="?", help="algorithm name (see `rlf list`)")
    train.add_argument("--env", help="environment name, or gym:<id>")
    train.add_argument("--steps", type=int,
                       help="total env steps (run.steps); with --resume the new total, counted from the run's "
                            "start (not steps to add)")
    train.add_argument("--seed", type=int, help="random seed (run.seed)")
    train.add_argument("--config", type=Path, help="TOML file with [run], [algo], [env] and [collector] tables "
                                                   "(replaces the plugin's preset for the env)")
    train.add_argument("--no-preset", action="store_true",
                       help="the algorithm's plain defaults, not the tuned preset its plugin ships for this env "
                            "(`rlf list` shows the presets)")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config value, e.g. --set algo.lr=3e-4 --set num_envs=8")
    train.add_argument("--run-dir", help="where to write the run (default runs/<algo>-<env>-<time>)")
    train.add_argument("--overwrite", action="store_true",
                       help="replace the run already in --run-dir (only the files rlf wrote are removed), or "
                            "train beside files of yours there (they are kept)")
    train.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")

    evaluate = sub.add_parser("eval", help="evaluate a run's latest checkpoint (greedy unless --stochastic)")
    evaluate.add_argument("run", type=Path, help="run directory or checkpoint file")
    evaluate.add_argument("--episodes", type=int, default=10)
    evaluate.add_argument("--stochastic", action="store_true",
                          help="act as in training (sample the policy / explore) instead of greedily")
    evaluate.add_argument("--seed", type=int,
                          help="seed of the episodes (default: the run's seed, the episodes every evaluation of "
                               "the run plays; another seed gives episodes none of them saw)")
    evaluate.add_argument("--record", type=Path, help="write a video of the episodes (.mp4 or .gif)")
    evaluate.add_argument("--json", action="store_true", help="print the result as JSON")
    evaluate.add_argument("--tensorboard", action="store_true",
                          help="also put the video in the run's TensorBoard files (tag eval/video)")

    export = sub.add_parser("export", help="write a run's agent to a small file (.rlf) or its policy as ONNX (.onnx)",
                            description="Write the agent of a run's latest checkpoint (or of a checkpoint file). "
                                        "<name>.rlf: without the optimizer, replay buffer and env state, a small file "
                                        "that `rlf eval FILE` plays on any machine with the same plugins; it cannot "
                                        "be resumed. <name>.onnx: the policy as an ONNX graph (observations as the "
                                        "env gives them in; greedy action and the distribution's parameters out) "
                                        "that onnxruntime runs without rlf or torch, checked against the agent "
                                        "before it is written (docs/EXPORT.md).")
    export.add_argument("run", type=Path, help="run directory or checkpoint file")
    export.add_argument("file", type=Path, help="the file to write: <name>.rlf or <name>.onnx")
    export.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")

    _add_tune_parser(sub)

    sub.add_parser("list", help="installed algorithms, environments, strategies, collectors, loggers, callbacks")
    plugins = sub.add_parser("plugins", help="installed plugins, versions, hooks and load errors")
    plugins.add_argument("--json", action="store_true")
    plugins.add_argument("--check", action="store_true",
                         help="also import every registered builder and report the broken ones and installed "
                              "plugins rlf cannot see (exit 2); warn about plugins that import torch or an "
                              "emulator as they load")

    config = sub.add_parser("config", help="an algorithm's and/or environment's settings, resolved and documented",
                            description="Print every setting with its resolved value, type (the allowed values "
                                        "of a choice) and one-line documentation: what `rlf train` would run.")
    config.add_argument("algorithm", nargs="?")
    config.add_argument("--env", help="also show this environment's config")
    config.add_argument("--config", type=Path, help="TOML config file, with the same tables as for train")
    config.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a value, as for train; the output shows the result")
    config.add_argument("--no-preset", action="store_true", help="as for train: without the plugin's preset")

    from rlf.cli import scaffold  # `rlf new`

    scaffold.add_parser(sub)
    add_results_commands(sub)  # compare, plot, experiment
    return parser


def _add_tune_parser(sub) -> None:
    tune = sub.add_parser(
        "tune", help="search an algorithm's settings with Optuna (pip install rlf[tune])",
        description="Run a study: trials sample the settings in --space (a TOML file, docs/TUNE.md), each trains "
                    "--seeds runs whose periodic evaluation lets the pruner stop bad trials early; the study is "
                    "kept in a database, so the same command resumes it. Ends with the results table and the best "
                    "settings as <study-dir>/best.toml, which `rlf train ALGO --config` takes.")
    tune.add_argument("algorithm", help="algorithm name (see `rlf list`)")
    tune.add_argument("--env", help="environment name, or gym:<id>")
    tune.add_argument("--space", type=Path, required=True,
                      help="TOML file with one table per searched setting, e.g. [algo.lr] type = \"float\", "
                           "low = 1e-5, high = 1e-3, log = true")
    tune.add_argument("--config", type=Path, help="TOML file of fixed settings (replaces the plugin's preset)")
    tune.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                      help="fix a setting for every trial, as for train")
    tune.add_argument("--no-preset", action="store_true", help="as for train: without the plugin's preset")
    tune.add_argument("--steps", type=int, help="env steps per run (run.steps)")
    tune.add_argument("--seed", type=int, help="first seed (run.seed); --seeds N uses it and the N-1 after it")
    tune.add_argument("--trials", type=int, default=20, help="trials in the study, counting those of earlier "
                                                              "invocations (default 20)")
    tune.add_argument("--jobs", type=int, default=1, help="workers running trials (default 1): processes on this "
                                                          "machine, or tasks of --launcher")
    tune.add_argument("--launcher", default="processes",
                      help="where the --jobs workers run: processes (this machine, the default) or a plugin's, "
                           "e.g. ray (pip install rlf-plugin-ray): tasks on a Ray cluster (docs/TUNE.md)")
    tune.add_argument("--address", help="the launcher's cluster; ray: local, auto, ray://HOST:10001 or HOST:PORT "
                                        "(default $RAY_ADDRESS, else local)")
    tune.add_argument("--seeds", type=int, default=1,
                      help="runs per trial, one per seed; the trial's value is the mean of their final evaluations")
    tune.add_argument("--metric", default="return",
                      help="the evaluation result to optimise (an eval.csv column, default return)")
    tune.add_argument("--direction", default="maximize", metavar="{maximize,minimize}")
    tune.add_argument("--sampler", default="tpe", metavar="{tpe,random,cmaes}",
                      help="Optuna's sampler (default tpe; cmaes needs pip install cmaes)")
    tune.add_argument("--sampler-seed", type=int, help="seed of the sampler (default: unseeded)")
    tune.add_argument("--pruner", default="median", metavar="{median,halving,none}",
                      help="stop trials whose evaluations trail: median (default), halving (successive halving), "
                           "none")
    tune.add_argument("--startup-trials", type=int, default=5,
                      help="trials the median pruner lets finish before it prunes (default 5)")
    tune.add_argument("--eval-interval", type=int,
                      help="env steps between the evaluations the pruner reads (default: run.eval_interval if set, "
                           "else a tenth of the steps)")
    tune.add_argument("--study", help="study name (default ALGO-ENV)")
    tune.add_argument("--study-dir", type=Path, help="where the trials' runs, study.db and best.toml go "
                                                     "(default runs/tune-<study>)")
    tune.add_argument("--storage", help="SQLAlchemy URL of the study's database, e.g. postgresql://user@host/db "
                                        "to share it between machines (default sqlite:///<study-dir>/study.db)")
    tune.add_argument("--keep-pruned", action="store_true",
                      help="keep pruned trials' run directories (default: removed)")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.strict:
            import os

            os.environ["RLF_STRICT_PLUGINS"] = "1"
        return {"train": _train, "tune": _tune, "eval": _eval, "export": _export, "list": _list, "plugins": _plugins, "config": _config,
                "new": _new, **RESULTS_COMMANDS}[
            args.command](args)
    except RlfError as exc:
        print(f"rlf: error: {one_line(str(exc))}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_USER_ERROR)
    except KeyboardInterrupt:
        print("rlf: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        if not _stdout_closed():  # a pipe of our own (an env worker's, say) broke: that is a failure
            raise
        sys.stderr.close()  # `rlf list | head`: the reader has what it wanted
        return 0
    except OSError as exc:
        from rlf.storage.files import os_error_line

        line = os_error_line(exc)
        if line is None:
            raise
        print(f"rlf: error: {one_line(line)}", file=sys.stderr)
        return EXIT_USER_ERROR


def one_line(text: str) -> str:
    """An error is one line whatever it quotes: a name or path the user gave may hold a newline (or
    another control character), shown escaped as in a Python string."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (the only BrokenPipeError that is not a bug)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLERR)
        return bool(poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def _train(args) -> int:
    from rlf import api, saved
    from rlf.errors import ConfigError, EnvWorkerError, PluginRunError
    from rlf.training.trainer import Interrupted, sigterm_as_interrupt

    _refuse_twice_set(args)
    overrides = list(args.overrides)
    if args.steps is not None:
        overrides.append(f"run.steps={args.steps}")
    if args.seed is not None:
        overrides.append(f"run.seed={args.seed}")
    if args.no_progress:
        overrides.append("run.progress=false")
    if args.resume:
        if args.algorithm or args.env or args.config or args.run_dir is not None or args.overwrite:
            raise ConfigError("--resume continues a run as it was configured; drop ALGORITHM, --env, --config, "
                              "--run-dir and --overwrite (only --steps and --set may change)")
        algo = saved.load(args.resume, overrides=overrides)
        algo.check()
        print(f"resuming {algo.run_dir} at env step {algo.counters.get('env_steps', 0)}", file=sys.stderr)
    else:
        if not args.algorithm:
            raise ConfigError("name an algorithm to train (see `rlf list`) or pass --resume RUN_DIR")
        if args.run_dir is not None:
            overrides.append(f"run.run_dir={json.dumps(args.run_dir)}")
        algo = api.make(args.algorithm, args.env, config_file=args.config, overrides=overrides,
                        preset=not args.no_preset)
        algo.check()
        _say_preset(algo.resolved)
        print(f"training {algo.resolved.run.algorithm} on {algo.resolved.run.env}; run directory {algo.run_dir}",
              file=sys.stderr)
    try:
        # `kill`, `docker stop` and a Kubernetes eviction send SIGTERM: checkpoint and stop, as Ctrl-C does
        with sigterm_as_interrupt():
            summary = algo.train(overwrite=args.overwrite)
    except Interrupted as exc:
        print(f"rlf: {exc}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (EnvWorkerError, PluginRunError) as exc:
        intact = (algo.run_dir / "checkpoint.rlf").is_file()
        note = (f"the last checkpoint is intact: continue with rlf train --resume {algo.run_dir}" if intact
                else "no checkpoint had been written yet")
        if isinstance(exc, PluginRunError):
            note = f"fix or remove the plugin; {note}"
        raise type(exc)(f"{exc}; {note}") from None
    if algo.stop_reason:
        print(f"stopped early: {algo.stop_reason}", file=sys.stderr)
    shown = {k: round(v, 4) for k, v in summary.items() if k.startswith("mean_") or k == "env_step"}
    print(f"done: {json.dumps(shown)}")
    print(f"run directory: {algo.run_dir}   evaluate with: rlf eval {algo.run_dir}")
    return 0


def _tune(args) -> int:
    from rlf.errors import ConfigError

    try:
        from rlf import tune
    except ImportError as exc:
        if exc.name not in ("optuna", "sqlalchemy"):
            raise
        raise ConfigError(f"rlf tune needs Optuna ({exc.name} is not installed): pip install 'rlf[tune]' "
                          "(or pip install optuna)") from None
    overrides = list(args.overrides)
    if args.steps is not None:
        overrides.append(f"run.steps={args.steps}")
    if args.seed is not None:
        overrides.append(f"run.seed={args.seed}")
    options = tune.TuneOptions(
        algorithm=args.algorithm, env=args.env, space=args.space, config_file=args.config, overrides=overrides,
        preset=not args.no_preset, trials=args.trials, jobs=args.jobs, seeds=args.seeds, metric=args.metric,
        direction=args.direction, sampler=args.sampler, sampler_seed=args.sampler_seed, pruner=args.pruner,
        startup_trials=args.startup_trials, eval_interval=args.eval_interval, study=args.study,
        study_dir=args.study_dir, storage=args.storage, keep_pruned=args.keep_pruned, launcher=args.launcher,
        address=args.address)
    result = tune.run(options)
    return 0 if result["best_file"] is not None else 1


def _say_preset(resolved) -> None:
    """A preset changes what runs: say which, and how to do without it."""
    if resolved.preset:
        print(f"preset: {resolved.preset} ({resolved.run.algorithm}'s tuned settings for {resolved.run.env}, "
              "under --set; --no-preset for the plain defaults)", file=sys.stderr)


def _refuse_twice_set(args) -> None:
    """A flag and a --set of the same setting with different values: one of them would be ignored."""
    from rlf.config import parse_overrides
    from rlf.errors import ConfigError

    given = parse_overrides(args.overrides)["run"]
    flags = {"steps": ("--steps", args.steps), "seed": ("--seed", args.seed),
             "run_dir": ("--run-dir", None if args.run_dir is None else str(args.run_dir)),
             "progress": ("--no-progress", False if args.no_progress else None)}
    for key, (flag, value) in flags.items():
        if value is not None and key in given and given[key] != value:
            raise ConfigError(f"{flag} and --set {key}={given[key]!r} disagree; give the setting once")


def _eval(args) -> int:
    from rlf import saved

    algo = saved.load(args.run)
    result = algo.evaluate(episodes=args.episodes, record=args.record, tensorboard=args.tensorboard,
                           stochastic=args.stochastic, seed=args.seed)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>28}  {value:.4g}")
    if args.record:
        print(f"recorded {args.record}", file=sys.stderr)
    return 0


def _export(args) -> int:
    from rlf import saved

    done = saved.export(args.run, args.file, overwrite=args.overwrite)
    if done["format"] == "onnx":
        print(f"exported {done['path']}: the policy at env step {done['env_steps']:,}, {done['bytes'] / 1024:.0f} KiB; "
              f"onnxruntime matched the agent on {done['checked']:,} observations (docs/EXPORT.md runs it)")
        return 0
    print(f"exported {done['path']}: the agent at env step {done['env_steps']:,}, {done['bytes'] / 1024:.0f} KiB "
          f"(the checkpoint: {done['checkpoint_bytes'] / 1024:.0f} KiB); play it with `rlf eval {done['path']}`")
    return 0


def _list(args) -> int:
    from rlf.plugins.loading import registry
    from rlf.plugins.specs import strategy_name

    reg = registry()
    print("algorithms:")
    for name, spec in sorted(reg.algorithms.items()):
        default = f"  default env {spec.default_env}" if spec.default_env else ""
        presets = f"  presets: {', '.join(sorted(spec.presets))}" if spec.presets else ""
        print(f"  {name:<14} {strategy_name(spec.family):<11} {spec.plugin}{default}{presets}")
    print("environments:")
    for name, spec in sorted(reg.environments.items()):
        shown = f"{name}<id>" if spec.prefix else name
        print(f"  {shown:<14} {spec.plugin}")
    print("strategies:")
    for name, spec in sorted(reg.strategies.items()):
        print(f"  {name:<14} {spec.plugin:<11} {spec.description}".rstrip())
    for title, table in (("collectors (run.vector)", reg.collectors), ("loggers (run.loggers)", reg.loggers),
                         ("callbacks (run.callbacks)", reg.callbacks),
                         ("tune launchers (rlf tune --launcher; processes is built in)", reg.launchers)):
        print(f"{title}:" if table else f"{title}: none")
        for name, spec in sorted(table.items()):
            print(f"  {name:<14} {spec.plugin:<11} {spec.description}".rstrip())
    if reg.errors:
        print(f"({len(reg.errors)} plugin(s) failed to load; see `rlf plugins`)")
    return 0


def _plugins(args) -> int:
    from rlf.plugins.loading import registry

    if args.check:
        from rlf.plugins.check import check_plugins

        return check_plugins(registry(), as_json=args.json)
    from rlf.plugins.discovery import unseen_plugins
    from rlf.plugins.specs import PluginInfo

    reg = registry()
    rows = [info.as_dict() for info in reg.plugins.values()]
    # installed but invisible to discovery: a row each, as a plugin that failed to load
    rows += [PluginInfo(unseen.distribution, unseen.distribution, unseen.version,
                        error=f"not loaded: {unseen.why}; {unseen.FIX}").as_dict() for unseen in unseen_plugins()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        status = f"ERROR {row['error']}" if row["error"] else "ok"
        provides = ", ".join(row["algorithms"] + row["environments"]
                             + [f"{kind} {name}" for kind in ("strategy", "collector", "logger", "callback")
                                for name in row[f"{kind}s" if kind != "strategy" else "strategies"]])
        print(f"{row['name']:<18} {row['version'] or '-':<9} {status}")
        if not row["error"]:
            print(f"{'':<18} hooks: {', '.join(row['hooks'])}; provides: {provides or '-'}")
    return 0


def _config(args) -> int:
    from rlf.config import RunConfig, describe, validate
    from rlf.errors import ConfigError
    from rlf.plugins.loading import registry
    from rlf.resolution import resolve

    if args.algorithm:
        resolved = resolve(args.algorithm, args.env, config_file=args.config, overrides=args.overrides,
                           preset=not args.no_preset)
        _check_pair(resolved)
        _say_preset(resolved)
        sections = [("run", RunConfig, resolved.run), ("algo", resolved.algorithm.config, resolved.algo),
                    ("env", resolved.environment.config, resolved.env),
                    ("collector", resolved.collector_spec.config, resolved.collector)]
        reg = registry()
        sections += [(f"logger.{name}", reg.logger(name).config, value) for name, value in resolved.loggers.items()
                     if type(value).model_fields]
        sections += [(f"callback.{name}", reg.callback(name).config, value)
                     for name, value in resolved.callbacks.items() if type(value).model_fields]
    elif args.env:
        from rlf.config import load_toml, merge, parse_overrides

        environment = registry().environment(args.env)
        values = {"id": args.env.split(":", 1)[1]} if environment.prefix else {}
        layers = [load_toml(args.config)] if args.config else []
        layers.append(parse_overrides(args.overrides))
        for layer in layers:
            others = sorted(key if section == "run" else f"{section}.{key}"
                            for section, table in layer.items() if section != "env" for key in table)
            if others:
                raise ConfigError("without an algorithm only env.* settings apply; name an algorithm to set "
                                  + ", ".join(others))
            values = merge(values, layer["env"])
        sections = [("env", environment.config, validate(environment.config, values, "env"))]
    else:
        raise ConfigError("name an algorithm, an environment (--env), or both; see `rlf list`")
    for section, model, value in sections:
        print(f"[{section}]  # {model.__doc__.strip().splitlines()[0] if model.__doc__ else model.__name__}")
        values = value.model_dump(mode="json")
        for path, type_name, _default, doc in describe(model):
            current = values
            for part in path.split("."):
                current = current.get(part) if isinstance(current, dict) else None
            print(f"{path} = {json.dumps(current)}  # {type_name}: {doc}")
        print()
    return 0


def _check_pair(resolved) -> None:
    """The refusal ``rlf train`` would give for this algorithm and env, before a config is shown for a pair that
    cannot train. Needs one env built: skipped for envs registered as expensive (emulators), and where the env
    does not build here (a missing extra or ROM), which ``rlf train`` reports itself."""
    from rlf.envs.base import EnvFactory
    from rlf.errors import RlfError
    from rlf.resolution import check_compatible

    if resolved.environment.prefer_subprocess:
        return
    try:
        env_spec = EnvFactory(resolved.environment.build_env, resolved.env).describe(resolved.run.env, 1)
    except RlfError:
        raise
    except Exception:  # noqa: BLE001 - the config is still worth showing; training names the failure
        return
    check_compatible(resolved.algorithm, env_spec)


def _new(args) -> int:
    from rlf.cli import scaffold

    return scaffold.run(args)


if __name__ == "__main__":
    sys.exit(main())
