"""The Python API, which the CLI mirrors:

    import rlf
    algo = rlf.make("ppo", env="gym:CartPole-v1", overrides=["steps=50000", "algo.lr=3e-4"])
    algo.train()
    print(algo.evaluate(episodes=10))
    algo.save("ppo.rlf");  again = rlf.load("ppo.rlf")
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
from pydantic import BaseModel

from rlf.config import (
    SECTIONS,
    AlgorithmConfig,
    EnvConfig,
    RunConfig,
    load_toml,
    merge,
    parse_overrides,
    validate,
)
from rlf.envs.base import EnvFactory, action_kinds, is_multi_agent
from rlf.envs.collectors import Collector, make_vector_env
from rlf.envs.workers import prestart_workers
from rlf.errors import CheckpointError, ConfigError, IncompatibleError, PluginRunError, guarded
from rlf.finite import check_tree
from rlf.interfaces import BuildContext
from rlf.logging.callbacks import Callback, PeriodicEval, StopAt
from rlf.nn.torch_utils import check_device
from rlf.plugins.loading import registry as default_registry
from rlf.plugins.specs import (
    AlgorithmSpec,
    CollectorSpec,
    EnvironmentSpec,
    Registry,
    StrategySpec,
    check_builders,
)
from rlf.storage import checkpoint as ckpt
from rlf.storage import files, run_state, rundir
from rlf.storage.lock import RunDirLock
from rlf.training.episodes import EpisodeTracker, average_metrics
from rlf.training.startup import build_strategy
from rlf.training.trainer import Trainer, seed_global_rngs, set_rng_state

RUN_FILE = "run.json"
CHECKPOINT_FILE = "checkpoint.rlf"
_EVENTS = ("on_start", "on_step", "on_episode_end", "on_log", "on_eval", "on_checkpoint", "on_end", "close")


@dataclass
class Resolved:
    run: RunConfig
    algo: AlgorithmConfig
    env: EnvConfig
    algorithm: AlgorithmSpec
    environment: EnvironmentSpec
    collector: BaseModel
    """The ``[collector]`` settings, validated against the selected collector's model."""
    collector_spec: CollectorSpec
    """The collector ``run.vector`` selected (``auto`` resolved)."""
    strategy: StrategySpec
    """The strategy family the algorithm runs on."""
    loggers: dict[str, BaseModel] = field(default_factory=dict)
    """``run.loggers`` in order, each with its validated ``[logger.<name>]`` settings."""
    callbacks: dict[str, BaseModel] = field(default_factory=dict)
    """``run.callbacks`` in order, each with its validated ``[callback.<name>]`` settings."""

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run.model_dump(mode="json"), "algo": self.algo.model_dump(mode="json"),
                "env": self.env.model_dump(mode="json"), "collector": self.collector.model_dump(mode="json"),
                "logger": {name: value.model_dump(mode="json") for name, value in self.loggers.items()},
                "callback": {name: value.model_dump(mode="json") for name, value in self.callbacks.items()}}


def resolve(algorithm: str, env: str | None = None, *, config_file: Path | None = None,
            overrides: Iterable[str] = (), config: Mapping[str, Mapping[str, Any]] | None = None,
            registry: Registry | None = None) -> Resolved:
    """Defaults < the algorithm's run defaults < ``config`` dict < TOML file < ``--set`` overrides."""
    registry = registry or default_registry()
    if not isinstance(algorithm, str) or not algorithm:
        raise ConfigError(f"algorithm must be a name (see `rlf list`), not {algorithm!r}")
    spec = registry.algorithm(algorithm)
    strategy = registry.strategy(spec.family, spec)
    layered: dict[str, Any] = {section: {} for section in SECTIONS}
    layered["run"].update(spec.run_defaults)
    for layer in (config or {}, load_toml(config_file) if config_file else {}, parse_overrides(overrides)):
        unknown = set(layer) - set(SECTIONS)
        if unknown:
            raise ConfigError(f"unknown config section(s) {sorted(unknown)}; use {', '.join(SECTIONS)}")
        layered = merge(layered, layer)
    _check_chosen_names(algorithm, layered["run"])
    if env and layered["run"].get("env") not in (None, env):
        raise ConfigError(f"--env {env} conflicts with run.env={layered['run']['env']!r} from the config; "
                          "keep one of them")
    env_name = env or layered["run"].get("env") or spec.default_env
    if not env_name:
        raise ConfigError(f"algorithm {algorithm!r} has no default environment; pass --env ENV (see `rlf list`)")
    layered["run"]["algorithm"], layered["run"]["env"] = algorithm, env_name
    environment = registry.environment(env_name)
    if environment.prefix:
        layered["env"].setdefault("id", env_name.split(":", 1)[1])
    run = validate(RunConfig, layered["run"], "run")
    collector = registry.collector(run.vector, environment)
    return Resolved(run, validate(spec.config, layered["algo"], "algo"),
                    validate(environment.config, layered["env"], "env"), spec, environment,
                    validate(collector.config, layered["collector"], "collector"), collector, strategy,
                    _named_settings("logger", run.loggers, registry.logger, layered["logger"]),
                    _named_settings("callback", run.callbacks, registry.callback, layered["callback"]))


def _named_settings(kind: str, names: list[str], lookup, settings: Mapping[str, Any]) -> dict[str, BaseModel]:
    """Each selected logger's (or callback's) validated settings; settings for one not selected are an error."""
    stray = sorted(set(settings) - set(names))
    if stray:
        raise ConfigError(f"[{kind}.{stray[0]}] configures a {kind} that run.{kind}s does not select "
                          f"({names}); add it to run.{kind}s or remove the settings")
    resolved = {}
    for name in names:
        values = settings.get(name, {})
        if not isinstance(values, Mapping):
            raise ConfigError(f"{kind}.{name} must be a table of settings, e.g. --set {kind}.{name}.key=value")
        resolved[name] = validate(lookup(name).config, values, f"{kind}.{name}")
    return resolved


def _check_chosen_names(algorithm: str, run: Mapping[str, Any]) -> None:
    """run.algorithm is chosen on the command line; a different one in a file or --set would be ignored."""
    chosen = run.get("algorithm", algorithm)
    if chosen != algorithm:
        raise ConfigError(f"run.algorithm={chosen!r} conflicts with the algorithm being trained ({algorithm!r}); "
                          "the algorithm is chosen on the command line (rlf train ALGO): drop run.algorithm")
    env = run.get("env")
    if env is not None and (not isinstance(env, str) or not env.strip()):
        raise ConfigError(f"run.env must be an environment name such as \"gym:CartPole-v1\" (see `rlf list`), "
                          f"not {env!r}; pass it with --env")


_ARRAY_SPACES = (gymnasium.spaces.Box, gymnasium.spaces.Discrete, gymnasium.spaces.MultiBinary,
                 gymnasium.spaces.MultiDiscrete)
"""Observation spaces the core batches as (N, ...) arrays."""


def _observation_need(spec: AlgorithmSpec, space: gymnasium.Space) -> str | None:
    """What the algorithm declared it needs and ``space`` lacks, as a phrase; None when it can read it."""
    if spec.observation_spaces is not None:
        accepted = tuple(getattr(gymnasium.spaces, c) if isinstance(c, str) else c for c in spec.observation_spaces)
        if not isinstance(space, accepted):
            return "/".join(cls.__name__ for cls in accepted) + " observations"
    if spec.observation_check is None:
        return None
    need = guarded(spec.plugin, f"algorithm {spec.name!r} (its observation_check)", spec.observation_check, space)
    if need is not None and not isinstance(need, str):
        raise PluginRunError(f"plugin {spec.plugin!r} failed in algorithm {spec.name!r} (its observation_check): "
                             f"it returned {type(need).__name__}, not None or a phrase saying what it needs; "
                             "fix the plugin")
    return need or None


def check_compatible(spec: AlgorithmSpec, env_spec) -> None:
    """Refuses, before anything is written, a pair the algorithm's registration rules out (one line)."""
    for agent, space in env_spec.observation_spaces.items():
        if not isinstance(space, _ARRAY_SPACES):
            raise IncompatibleError(
                f"{env_spec.name} gives agent {agent!r} {type(space).__name__} observations ({space}); rlf batches "
                "observations as arrays (Box, Discrete, MultiBinary, MultiDiscrete): wrap the env to flatten them "
                "(gymnasium.wrappers.FlattenObservation) in an environment plugin, or choose another environment")
        need = _observation_need(spec, space)
        if need:
            raise IncompatibleError(
                f"algorithm {spec.name!r} reads {need}, but {env_spec.name} gives agent {agent!r} {space}; "
                "choose an environment with such observations (or wrap this one in an environment plugin), "
                "or another algorithm")
    for agent, kind in action_kinds(env_spec).items():
        if kind not in spec.action_spaces:
            space = env_spec.action_spaces[agent]
            raise IncompatibleError(
                f"algorithm {spec.name!r} supports {'/'.join(spec.action_spaces)} action spaces, but "
                f"{env_spec.name} gives agent {agent!r} {space}; choose an environment with "
                f"{spec.action_spaces[0]} actions or another algorithm")
    if env_spec.multi_agent and not spec.multi_agent:
        raise IncompatibleError(f"algorithm {spec.name!r} is single-agent only and {env_spec.name} is multi-agent; "
                                "choose a single-agent environment")


class Algorithm:
    """A configured algorithm on an environment: train it, evaluate it, save it, load it back."""

    def __init__(self, resolved: Resolved, run_dir: Path | None = None, registry: Registry | None = None):
        self.resolved = resolved
        self.registry = registry or default_registry()
        self.run_dir = Path(run_dir or resolved.run.run_dir or _default_run_dir(resolved.run))
        self.counters: dict[str, int] = {}
        self.factory = EnvFactory(resolved.environment.build_env, resolved.env)
        self.strategy = None
        self._agent_state = None
        self._pending: dict[str, Any] | None = None
        # True once run_dir holds this object's own run (loaded from it, or trained into it): training
        # continues it. False: the directory must not hold another run (unless overwrite=True).
        self._continues = False
        self._saved_step: int | None = None
        self._loop: dict[str, Any] | None = None
        """Where the last ``train()`` left the trainer's loop (a later ``train()`` continues it)."""
        self.stop_reason: str | None = None
        """Why the last ``train()`` stopped before its budget (a ``stop_at`` callback), else None."""
        self._weights_only = False
        """Loaded from an ``export``ed agent: it evaluates, it does not train."""

    # -- construction ---------------------------------------------------------------------------
    @property
    def config(self) -> Resolved:
        return self.resolved

    def _context(self, env_spec) -> BuildContext:
        run = self.resolved.run
        return BuildContext(env_spec=env_spec, config=self.resolved.algo, run=run, seed=run.seed,
                            device=run.device, env_factory=self.factory)

    def _probe_spec(self):
        # the factory keeps what this probe learns: the vector env built next does not build another
        return self.factory.describe(self.resolved.run.env, self.resolved.run.num_envs)

    def _collector(self) -> Collector:
        spec = self.resolved.collector_spec
        return Collector(spec.name, spec.build_collector, self.resolved.collector, spec.build_actor_pool, spec.plugin)

    # -- training -------------------------------------------------------------------------------
    def check(self):
        """Everything that can be checked before the run directory exists: the environment builds and
        suits the algorithm, the plugin's builders import, the device exists. A failure then leaves
        nothing half-made behind. Returns the environment's spec."""
        if self.resolved.collector_spec.name == "async":
            # the core's subprocess envs: their fork server boots while the probe env is built
            prestart_workers(self.factory)
        env_spec = self._probe_spec()
        check_compatible(self.resolved.algorithm, env_spec)
        check_builders(self.resolved.algorithm.build_agent, self.resolved.algorithm.build_learner)
        check_device(self.resolved.run.device)
        rundir.validate(self.run_dir)
        return env_spec

    def train(self, steps: int | None = None, progress: bool | None = None,
              callbacks: Sequence[Callback] = (), overwrite: bool = False) -> dict[str, float]:
        """Train until ``steps`` total env steps (default: the run config's), writing the run directory.

        ``callbacks`` run after the configured loggers, plugin callbacks and built-in evaluation.
        The run directory is locked while training. A directory that already holds another run, or
        files rlf did not write, is refused unless ``overwrite`` (which removes the files rlf wrote
        there first and keeps every other file); continuing this object's
        own run (after ``rlf.load(run_dir)`` or an earlier ``train()``) first cuts ``metrics.csv`` and
        ``episodes.csv`` back to the checkpoint's env step.
        """
        if self._weights_only:
            raise ConfigError("this is an exported agent (weights only: no optimizer, replay or RNG state), which "
                              "rlf can evaluate but not train; resume the run it came from instead")
        run = self.resolved.run
        done = int(self.counters.get("env_steps", 0))
        target = run.steps if steps is None else steps
        if done and target <= done:
            raise ConfigError(f"this run is already at env step {done:,}, so a target of {target:,} steps trains "
                              f"nothing; pass a larger total, e.g. --steps {done + max(done // 2, 1)}")
        run_dir = rundir.validate(self.run_dir)
        env_spec = self.check()
        if not self._continues and run_dir.is_dir():  # refused before anything is written there
            if not overwrite:
                rundir.refuse_existing_run(run_dir)
            rundir.refuse_foreign(run_dir, allowed=overwrite)
        lock = RunDirLock(run_dir)
        try:
            lock.acquire()
            if self._continues:
                rundir.truncate_history(run_dir, done)
            elif overwrite or rundir.holds_debris(run_dir):
                rundir.remove_run(run_dir)  # only the files rlf wrote
            else:
                rundir.refuse_existing_run(run_dir)
            # files rlf did not write are never deleted; a new run beside them needs --overwrite
            rundir.refuse_foreign(run_dir, allowed=overwrite or self._continues)
            if steps is not None:
                run.steps = steps
            if progress is not None:
                run.progress = progress
            return self._train_locked(env_spec, callbacks)
        except OSError as exc:
            error = files.disk_error(exc, run_dir, self.counters.get("env_steps"))
            if error is None:
                raise
            raise error from None
        finally:
            lock.release()

    def _train_locked(self, env_spec, callbacks: Sequence[Callback]) -> dict[str, float]:
        run = self.resolved.run
        self._write_run_file()
        self._continues = True
        self._saved_step = None
        context = self._context(env_spec)
        if self._pending is None and self.strategy is not None and self.strategy.agent is not None:
            # train() again on the same object continues, exactly as a resume from a checkpoint would
            from rlf.training.trainer import rng_state

            self._pending = {"strategy": self.strategy.state_dict(), "rng": rng_state(), "trainer": self._loop}
        self.strategy = build_strategy(self.resolved.algorithm, run.env, self.factory, context, self._collector(),
                                       self.resolved.strategy)
        loop = None
        if self._pending is not None:
            loop = self._pending.get("trainer")  # absent from checkpoints of older rlf versions
            self.strategy.load_state_dict(self._pending["strategy"])
            try:
                set_rng_state(self._pending["rng"])
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise CheckpointError(f"the checkpoint's RNG state (rng) is unusable ({type(exc).__name__}: {exc}); "
                                      "it was not written by this rlf or was edited") from None
            self._pending = None
        elif not self.counters.get("env_steps"):
            seed_global_rngs(run.seed)
        trainer = Trainer(self.strategy, run, self.run_dir, self._save_checkpoint, self.counters,
                          self._callbacks(callbacks), loop=loop)
        self.stop_reason = None
        try:
            return trainer.train()
        finally:
            self.counters = trainer.counters
            self._loop = trainer.loop_state()
            self.stop_reason = trainer.stop_reason
            self._agent_state = self.strategy.agent.state_dict() if self.strategy.agent else None

    def _callbacks(self, extra: Sequence[Callback]) -> list[Callback]:
        resolved, run = self.resolved, self.resolved.run
        built = []
        for kind, lookup, chosen in (("logger", self.registry.logger, resolved.loggers),
                                     ("callback", self.registry.callback, resolved.callbacks)):
            for name, config in chosen.items():
                spec = lookup(name)
                made = guarded(spec.plugin, f"{kind} {name!r} (its builder)", spec.build, self.run_dir, run, config)
                missing = [event for event in _EVENTS if not callable(getattr(made, event, None))]
                if missing:
                    raise PluginRunError(f"plugin {spec.plugin!r} failed in {kind} {name!r} (its builder): it returned "
                                         f"a {type(made).__name__}, not an rlf.{kind.capitalize()} (no "
                                         f"{', '.join(missing[:3])}); fix the plugin")
                made._rlf_label = (spec.plugin, f"{kind} {name!r}")
                built.append(made)
        if run.eval_interval:
            seed = run.seed + 2_000_003  # every evaluation plays the same episodes: scores compare
            built.append(PeriodicEval(run.eval_interval, run.eval_episodes,
                                      lambda episodes: self.evaluate(episodes=episodes, seed=seed)))
        if run.stop_at is not None:
            built.append(StopAt(run.stop_at.metric, run.stop_at.value, run.stop_at.mode))
        return built + list(extra)

    def _write_run_file(self) -> None:
        data = {"format": "rlf-run", "config": self.resolved.as_dict(),
                "plugins": {"algorithm": self.resolved.algorithm.plugin, "environment": self.resolved.environment.plugin},
                "versions": self.registry.plugin_versions()}
        ckpt.atomic_write(files.claim(self.run_dir, RUN_FILE), lambda h: h.write(json.dumps(data, indent=2).encode()))

    def _checkpoint_state(self, trainer_state: dict[str, Any]) -> dict[str, Any]:
        from rlf import __version__

        versions = self.registry.plugin_versions()
        algorithm, environment = self.resolved.algorithm.plugin, self.resolved.environment.plugin
        return {"rlf_version": __version__, "config": self.resolved.as_dict(),
                "plugins": {"algorithm": [algorithm, versions.get(algorithm)],
                            "environment": [environment, versions.get(environment)]},
                "saved_at": time.time(), **trainer_state}

    def _save_checkpoint(self, trainer_state: dict[str, Any], name: str = CHECKPOINT_FILE) -> Path:
        path = self.run_dir / name
        step = trainer_state["counters"]["env_steps"]
        main = name == CHECKPOINT_FILE
        if main and step == self._saved_step:  # the final checkpoint right after an interval one: same state
            return path
        # NaN weights never replace the last good checkpoint: the run stops here instead.
        check_tree(trainer_state["strategy"], "strategy", f"the checkpoint at env step {step}", self.run_dir)
        files.claim(self.run_dir, name)
        owned = files.owned_files(self.run_dir)
        ckpt.save(path, self._checkpoint_state(trainer_state), keep=self.resolved.run.keep_checkpoints if main else 1,
                  claim=lambda target: files.claim(self.run_dir, target.name), owns=lambda target: target.name in owned)
        if main:
            self._saved_step = step
        return path

    def save(self, path: Path | str) -> Path:
        """Write a self-describing checkpoint of the current state to ``path``."""
        from rlf.training.trainer import rng_state

        path = Path(path)
        if self.strategy is not None and self.strategy.agent is not None:
            trainer_state = {"counters": dict(self.counters), "rng": rng_state(),
                             "strategy": self.strategy.state_dict(), "trainer": self._loop}
        elif self._pending is not None:  # loaded, not trained since: save what was loaded
            trainer_state = {key: self._pending.get(key) for key in ("counters", "rng", "strategy", "trainer")}
        else:
            raise CheckpointError("nothing to save yet: call train() first (or rlf.load a checkpoint)")
        check_tree(trainer_state["strategy"], "strategy", "the state to save", None)
        ckpt.save(path, self._checkpoint_state(trainer_state))
        return path

    # -- evaluation -----------------------------------------------------------------------------
    def evaluate(self, episodes: int = 10, record: Path | str | None = None, seed: int | None = None,
                 max_steps: int = 1_000_000, tensorboard: bool = False,
                 stochastic: bool = False) -> dict[str, float]:
        """Episodes on a fresh env: mean return (per agent for multi-agent), length, env metrics.

        Greedy by default; ``stochastic`` acts as in training (a policy samples its distribution, an
        epsilon-greedy agent explores at its current epsilon): a deterministic policy can loop forever in
        one spot of a deterministic env where its stochastic version does not, so both are worth reporting.
        ``record``: write a video file; ``tensorboard``: also put the video in the run's TensorBoard
        files (tag ``eval/video`` at the run's env step)."""
        video = record is not None or tensorboard
        if episodes < 1:
            raise ConfigError("episodes must be at least 1")
        state = self._agent_state
        if self.strategy is not None and self.strategy.agent is not None:
            state = self.strategy.agent.state_dict()
        if state is None:
            raise CheckpointError("this algorithm has not been trained or loaded: call train() or rlf.load()")
        factory = EnvFactory(self.factory.build_env, self.factory.config, "rgb_array" if video else None)
        envs = make_vector_env(self.resolved.run.env, factory, 1, subprocess=False)
        frames: list = []
        try:
            context = self._context(envs.spec)
            agent = self.resolved.algorithm.build_agent(context)
            run_state.load_into(agent, state, "agent", check_shapes=True)
            tracker = EpisodeTracker(envs.spec.agent_ids, 1, envs.spec.multi_agent)
            obs = envs.reset(seed=(self.resolved.run.seed if seed is None else seed) + 1_000_003)
            rows: list[dict[str, float]] = []
            if video:
                envs.record_final_frames()
                frames.append(_render(envs))
            for _ in range(max_steps):
                batch = envs.step(agent.act(obs, explore=stochastic).actions)
                rows.extend(tracker.update(batch))
                if batch.ended_envs:
                    agent.reset_state(batch.episode_ended)
                    if video and batch.final_frames:
                        frames.append(batch.final_frames[0])
                if len(rows) >= episodes:
                    break
                if video:
                    frames.append(_render(envs))
                obs = batch.obs
        finally:
            envs.close()
        if record:
            from rlf.logging.video import write_video

            write_video(Path(record), frames, fps=_render_fps(envs))
        self.last_evaluation = rows  # per-episode rows, for callers that want more than the means
        if tensorboard:
            from rlf.logging.loggers import tensorboard_video

            tensorboard_video(self.run_dir, "eval/video", frames, _render_fps(envs), self.counters.get("env_steps", 0))
        result = average_metrics(rows)
        result.pop("episode", None)
        result["episodes"] = float(len(rows))
        return result


def _render_fps(envs) -> int:
    return int(envs.render_fps or 30)


def _render(envs):
    import gymnasium

    try:
        frame = envs.render()
    except (ImportError, gymnasium.error.DependencyNotInstalled) as exc:  # e.g. pygame for classic control
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"recording {envs.spec.name} needs a package its renderer imports: {message}") from None
    if frame is None:
        raise ConfigError(f"environment {envs.spec.name} has no RGB render; --record needs one")
    return frame


def _default_run_dir(run: RunConfig) -> Path:
    safe_env = run.env.replace(":", "-").replace("/", "-")
    return Path("runs") / f"{run.algorithm}-{safe_env}-{time.strftime('%Y%m%d-%H%M%S')}"


def _previous_hint(path: Path) -> str:
    """Where the latest checkpoint is unreadable, name the newest kept copy (keep_checkpoints) that reads."""
    for index in range(1, 100):
        older = ckpt.previous(path, index)
        if not older.is_file():
            return ""
        try:
            steps = run_state.validate_state(older, ckpt.load(older)).counters.get("env_steps")
        except CheckpointError:
            continue
        return (f"; the previous checkpoint {older.name} (env step {steps}) is intact: copy it over "
                f"{path.name} to resume from it")
    return ""


def make(algorithm: str, env: str | None = None, *, config_file: Path | None = None,
         overrides: Iterable[str] = (), config: Mapping[str, Mapping[str, Any]] | None = None,
         registry: Registry | None = None) -> Algorithm:
    """Build an algorithm by name with a validated config (see ``resolve`` for the layering)."""
    registry = registry or default_registry()
    return Algorithm(resolve(algorithm, env, config_file=config_file, overrides=overrides, config=config,
                             registry=registry), registry=registry)


WEIGHTS_ONLY = "agent-weights"
"""The ``contents`` of a file ``export`` wrote: the agent's state and the config, nothing to resume from."""


def _checkpoint_of(path: Path) -> tuple[Path, Path | None]:
    """(the checkpoint file, the run directory or None) for a run directory or a checkpoint file."""
    run_dir = None
    if path.is_dir():
        run_dir = path
        if not (path / RUN_FILE).is_file():
            raise CheckpointError(f"{path} is not an rlf run directory (no {RUN_FILE}); "
                                  "pass the directory `rlf train` created")
        path = path / CHECKPOINT_FILE
        if not path.is_file():
            again = " --overwrite" if rundir.holds_run(run_dir) else ""  # no data: a new run replaces it unasked
            raise CheckpointError(f"run directory {run_dir} has no checkpoint yet (it stopped before its first "
                                  f"one); start it again with `rlf train ALGO --run-dir {run_dir}{again}`")
    elif not path.exists():
        raise CheckpointError(f"{path} does not exist; pass a run directory or a checkpoint file")
    return path, run_dir


def load(path: Path | str, registry: Registry | None = None, overrides: Iterable[str] = ()) -> Algorithm:
    """An Algorithm from a checkpoint file or a run directory; training continues from it (not from
    an exported agent, which can only be evaluated)."""
    path, run_dir = _checkpoint_of(Path(path))
    try:
        state = ckpt.load(path)
        checked = run_state.validate_state(path, state)
    except CheckpointError as exc:
        if run_dir is None:
            raise
        raise CheckpointError(f"{exc}{_previous_hint(path)}") from None
    config = {section: dict(values) for section, values in state["config"].items()}
    _refuse_changed_names(config["run"], parse_overrides(overrides))
    changed = parse_overrides(overrides)["run"]
    vector = changed.get("vector")
    if vector is not None and vector != config["run"].get("vector"):
        config.pop("collector", None)  # the saved settings were for the collector being replaced
    for kind in ("logger", "callback"):  # keep the saved settings of those the resume still selects
        if isinstance(changed.get(f"{kind}s"), list) and isinstance(config.get(kind), dict):
            config[kind] = {name: values for name, values in config[kind].items() if name in changed[f"{kind}s"]}
    # A checkpoint file's stored run directory is never trusted as a place to write: it may be someone
    # else's run, or a path chosen by whoever made the file. Training a loaded file starts a new run
    # directory (the default name, or run_dir= in overrides); a loaded run directory continues itself.
    config["run"]["run_dir"] = str(run_dir) if run_dir is not None else None
    registry = registry or default_registry()
    resolved = resolve(checked.config.run.algorithm, checked.config.run.env, config=config, overrides=overrides,
                       registry=registry)
    algo = Algorithm(resolved, run_dir=run_dir or resolved.run.run_dir, registry=registry)
    algo._continues = run_dir is not None
    algo.counters = dict(checked.counters)
    algo._agent_state = state["strategy"]["agent"]
    algo._pending = state
    algo._weights_only = state.get("contents") == WEIGHTS_ONLY
    return algo


def export(source: Path | str, target: Path | str, overwrite: bool = False) -> dict[str, Any]:
    """Write the agent of a run (its latest checkpoint) or of a checkpoint file to ``target``: the
    weights and the config, without the learner's optimizer, replay buffer, env or RNG state. The file
    is what ``rlf eval`` needs to play, a fraction of a checkpoint's size, and cannot be resumed."""
    path, _ = _checkpoint_of(Path(source))
    target = Path(target)
    if target.suffix != ".rlf":
        raise ConfigError(f"{target}: name the exported agent <name>.rlf (what rlf eval reads)")
    if target.is_dir() or target.is_symlink() or (target.exists() and not overwrite):
        raise ConfigError(f"{target} already exists; pick another name, or pass --overwrite to replace it")
    if target.resolve() == path.resolve():
        raise ConfigError(f"{target} is the checkpoint being exported; write the agent to another file")
    state = ckpt.load(path)
    checked = run_state.validate_state(path, state)
    config = {section: dict(values) for section, values in state["config"].items()}
    config["run"]["run_dir"] = None
    agent = {key: state[key] for key in ("rlf_version", "plugins", "saved_at") if key in state}
    agent.update(contents=WEIGHTS_ONLY, config=config, counters=dict(checked.counters), rng=state["rng"],
                 strategy={"agent": state["strategy"]["agent"], "learner": None})
    check_tree(agent["strategy"], "strategy", f"the agent of {path}", None)
    target.parent.mkdir(parents=True, exist_ok=True)
    ckpt.save(target, agent)
    return {"path": str(target), "bytes": target.stat().st_size, "checkpoint_bytes": path.stat().st_size,
            "env_steps": int(checked.counters.get("env_steps", 0))}


def _refuse_changed_names(stored: Mapping[str, Any], overrides: Mapping[str, Mapping[str, Any]]) -> None:
    """A resumed run keeps its algorithm and environment: a --set that changed them would be ignored
    or would feed one environment's learning state to another."""
    for key in ("algorithm", "env"):
        if key in overrides["run"] and overrides["run"][key] != stored.get(key):
            raise ConfigError(f"--set {key}={overrides['run'][key]!r} on resume: a resumed run keeps its {key} "
                              f"({stored.get(key)!r}); start a new run to train another")


__all__ = ["Algorithm", "Resolved", "load", "make", "resolve", "check_compatible", "is_multi_agent", "export"]
