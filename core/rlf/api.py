"""The Python API: ``rlf.make`` builds an ``Algorithm`` from an algorithm and env name, and an ``Algorithm``
trains (in its run directory, one writer at a time), saves, evaluates and records.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from rlf.config import (
    RunConfig,
)
from rlf.envs.base import EnvFactory
from rlf.envs.collectors import Collector, make_vector_env
from rlf.envs.workers import prestart_workers
from rlf.errors import CheckpointError, ConfigError, PluginRunError, guarded
from rlf.finite import check_tree
from rlf.interfaces import BuildContext
from rlf.logging.callbacks import Callback, PeriodicEval, StopAt
from rlf.logging.means import average_metrics
from rlf.nn.torch_utils import check_device
from rlf.plugins.loading import registry as default_registry
from rlf.plugins.specs import (
    Registry,
    check_builders,
)
from rlf.resolution import Resolved, check_compatible, resolve
from rlf.storage import checkpoint as ckpt
from rlf.storage import files, run_state, rundir
from rlf.storage.lock import RunDirLock
from rlf.training.episodes import EpisodeTracker
from rlf.training.rng import rng_state, seed_global_rngs, set_rng_state
from rlf.training.strategy import build_strategy
from rlf.training.trainer import Trainer

_TRAINING = threading.Lock()
"""Held while a train() runs: the global generators it seeds belong to the process (see Algorithm.train)."""

RUN_FILE = "run.json"
CHECKPOINT_FILE = "checkpoint.rlf"
_EVENTS = ("on_start", "on_step", "on_episode_end", "on_log", "on_eval", "on_checkpoint", "on_end", "close")


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
        self._callback_states: dict[str, Any] = {}
        """Callbacks' saved states (``Callback.state_dict``) as the last ``train()`` left them."""
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
        check_resolved(self.resolved, env_spec)
        rundir.validate(self.run_dir)
        return env_spec

    def train(self, steps: int | None = None, progress: bool | None = None,
              callbacks: Sequence[Callback] = (), overwrite: bool = False) -> dict[str, float]:
        """Train until ``steps`` total env steps (default: the run config's), writing the run directory;
        returns the last training summary and, with ``run.eval_interval`` set, the evaluation at the end
        (keys ``eval/<metric>``, as in eval.csv).

        One ``train()`` at a time per process: the global random generators it seeds are per process, so
        a second one in another thread is refused (run parallel trials in processes).

        ``callbacks`` run after the configured loggers, plugin callbacks and built-in evaluation.
        The run directory is locked while training. A directory that already holds another run, or
        files rlf did not write, is refused unless ``overwrite`` (which removes the files rlf wrote
        there first and keeps every other file); continuing this object's
        own run (after ``rlf.load(run_dir)`` or an earlier ``train()``) tells every plugin (``on_resume``),
        and the CSV and TensorBoard loggers cut what they logged back to the checkpoint's env step.
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
        if not _TRAINING.acquire(blocking=False):
            raise ConfigError(
                "train() is already running in this process: Python's, numpy's and torch's global random "
                "generators are per process, so runs in threads of one process would not reproduce from their "
                "seeds; run them in processes instead (multiprocessing, `rlf tune --jobs N`, or one `rlf train` each)")
        try:
            return self._train_owned(run_dir, env_spec, steps, progress, callbacks, overwrite)
        finally:
            _TRAINING.release()

    def _train_owned(self, run_dir: Path, env_spec, steps: int | None, progress: bool | None,
                     callbacks: Sequence[Callback], overwrite: bool) -> dict[str, float]:
        run = self.resolved.run
        if not self._continues and run_dir.is_dir():  # refused before anything is written there
            if not overwrite:
                rundir.refuse_existing_run(run_dir)
            rundir.refuse_foreign(run_dir, allowed=overwrite)
        lock = RunDirLock(run_dir)
        try:
            lock.acquire()
            # continuing its own run, the loggers cut their files back to the checkpoint (on_resume)
            if not self._continues:
                if overwrite or rundir.holds_debris(run_dir):
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
            self._pending = {"strategy": self.strategy.state_dict(), "rng": rng_state(), "trainer": self._loop,
                             "callbacks": self._callback_states}
        self.strategy = build_strategy(self.resolved.algorithm, run.env, self.factory, context, self._collector(),
                                       self.resolved.strategy)
        loop, resuming, callback_states = None, self._pending is not None, None
        if self._pending is not None:
            loop = self._pending.get("trainer")  # absent from checkpoints of older rlf versions
            callback_states = self._pending.get("callbacks")
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
                          self._callbacks(callbacks), loop=loop, resuming=resuming, callback_states=callback_states)
        self.stop_reason = None
        try:
            summary = trainer.train()
            evaluation = next((c.last_result for c in trainer.callbacks if isinstance(c, PeriodicEval)), None)
            if evaluation:  # the evaluation at the end, under the names eval.csv and TensorBoard use
                summary.update({f"eval/{key}": value for key, value in evaluation.items() if key != "env_step"})
            return summary
        finally:
            self.counters = trainer.counters
            self._loop = trainer.loop_state()
            self._callback_states = dict(trainer.callback_states)
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
                made._rlf_state_key = f"{kind}.{name}"
                built.append(made)
        if run.eval_interval:
            seed = run.seed + 2_000_003  # every evaluation plays the same episodes: scores compare
            built.append(PeriodicEval(run.eval_interval, run.eval_episodes,
                                      lambda episodes: self.evaluate(episodes=episodes, seed=seed,
                                                                     stochastic=run.eval_stochastic)))
        if run.stop_at is not None:
            built.append(StopAt(run.stop_at.metric, run.stop_at.value, run.stop_at.mode))
        return built + list(extra)

    def _write_run_file(self) -> None:
        data = {"format": "rlf-run", "config": self.resolved.as_dict(),
                "plugins": {"algorithm": self.resolved.algorithm.plugin, "environment": self.resolved.environment.plugin},
                "versions": self.registry.plugin_versions()}
        ckpt.atomic_write(files.claim(self.run_dir, RUN_FILE), lambda h: h.write(json.dumps(data, indent=2).encode()))

    def _checkpoint_state(self, trainer_state: dict[str, Any]) -> dict[str, Any]:
        from rlf.version import __version__

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
        path = Path(path)
        if self.strategy is not None and self.strategy.agent is not None:
            trainer_state = {"counters": dict(self.counters), "rng": rng_state(),
                             "strategy": self.strategy.state_dict(), "trainer": self._loop,
                             "callbacks": self._callback_states}
        elif self._pending is not None:  # loaded, not trained since: save what was loaded
            trainer_state = {key: self._pending.get(key) for key in ("counters", "rng", "strategy", "trainer",
                                                                     "callbacks")}
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
        files (tag ``eval/video`` at the run's env step). ``seed`` picks the episodes (the env is reset with
        ``seed + 1_000_003``); by default the run's own seed, so every evaluation of a run (periodic, an
        experiment's check, its final evaluation) plays the same episodes. Pass another seed for episodes
        that neither training nor those evaluations saw."""
        video = record is not None or tensorboard
        if episodes < 1:
            raise ConfigError("episodes must be at least 1")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ConfigError(f"seed must be an integer >= 0, not {seed!r}")
        if record:
            from rlf.logging.video import check_video_path

            check_video_path(Path(record))
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
            # the state came from training: an agent with per-episode memory starts these episodes afresh
            agent.reset_state(np.ones(envs.num_envs, dtype=bool))
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


def previous_checkpoint_hint(path: Path) -> str:
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


def check_resolved(resolved: Resolved, env_spec) -> None:
    """What a resolved run needs beyond its settings: the env suits the algorithm, the plugin's builders
    import, the device exists (``Algorithm.check``, and ``rlf experiment`` for every run before any trains)."""
    check_compatible(resolved.algorithm, env_spec)
    check_builders(resolved.algorithm.build_agent, resolved.algorithm.build_learner)
    check_device(resolved.run.device)


def make(algorithm: str, env: str | None = None, *, config_file: Path | None = None,
         overrides: Iterable[str] = (), config: Mapping[str, Mapping[str, Any]] | None = None,
         registry: Registry | None = None, preset: bool = False) -> Algorithm:
    """Build an algorithm by name with a validated config (see ``resolve`` for the layering; ``preset=True``
    layers the plugin's tuned settings for the env under the given ones, as ``rlf train`` does)."""
    registry = registry or default_registry()
    return Algorithm(resolve(algorithm, env, config_file=config_file, overrides=overrides, config=config,
                             registry=registry, preset=preset), registry=registry)


__all__ = ["Algorithm", "make"]


def remove_run(run_dir: Path | str) -> bool:
    """Delete a run directory the way a tuner or a script cleaning up after itself should: only the files
    rlf wrote there (its manifest records them), then the directory itself if nothing else is left.
    Returns whether the directory is gone; files of the user's stay, and so does the directory holding them.
    A directory that is not an rlf run, or a run that is training now, is refused with a RunDirError."""
    from rlf.errors import RunDirError
    from rlf.storage.files import INTERNAL_FILES, MANIFEST_FILE, is_own_tmp

    path = Path(run_dir)
    if not path.is_dir():
        raise RunDirError(f"run directory {path} does not exist")
    names = os.listdir(path)
    # a process killed as it took the directory leaves only the lock, its owner record and maybe a
    # temporary file of its first manifest write: nothing of a run, all of it rlf's
    started = bool(names) and any(name in INTERNAL_FILES for name in names) and all(
        name in INTERNAL_FILES or is_own_tmp(name, INTERNAL_FILES.__contains__) for name in names)
    if not (started or (path / MANIFEST_FILE).is_file() or rundir.holds_run(path) or rundir.holds_debris(path)):
        raise RunDirError(f"{path} is not an rlf run directory (no run.json, checkpoint or record of rlf's "
                          "files); nothing was removed")
    with RunDirLock(path):  # refuses a run that is training, naming its process
        rundir.remove_run(path)
        _remove_orphans(path)
    for name in INTERNAL_FILES:
        (path / name).unlink(missing_ok=True)
    try:
        path.rmdir()
    except OSError:  # the user's files are there
        return False
    return True


def _remove_orphans(path: Path) -> None:
    """What a process killed as its run started can leave unrecorded: an event file TensorBoard had made
    before rlf recorded it, a temporary file of a write to one of rlf's names. Both are rlf's by name."""
    from rlf.storage.files import TENSORBOARD_DIR, is_event_file, is_own_tmp, rlf_name

    board = path / TENSORBOARD_DIR
    if board.is_dir() and not board.is_symlink():
        for entry in board.iterdir():
            if is_event_file(entry.name) and entry.is_file() and not entry.is_symlink():
                entry.unlink()
        if not any(board.iterdir()):
            board.rmdir()
    for entry in path.iterdir():
        if is_own_tmp(entry.name, rlf_name) and entry.is_file() and not entry.is_symlink():
            entry.unlink()
