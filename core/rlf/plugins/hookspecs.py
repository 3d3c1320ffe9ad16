"""The plugin contract: a plugin implements any of the hooks and registers through the callback.

The ``Register*`` protocols type each hook's ``register`` callback, so editors and type checkers
can help plugin authors (``def rlf_register_collectors(register: rlf.RegisterCollector): ...``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    from pathlib import Path

    from pydantic import BaseModel

    from rlf.config import RunConfig
    from rlf.envs.base import EnvFactory, VectorEnv
    from rlf.logging.callbacks import Callback

hookspec = pluggy.HookspecMarker("rlf")
hookimpl = pluggy.HookimplMarker("rlf")

BuildCollector = Callable[[str, "EnvFactory", int, Any], "VectorEnv"]
"""``build_collector(env_name, factory, num_envs, config) -> VectorEnv``."""


BuildCallback = Callable[["Path", "RunConfig", Any], "Callback"]
"""``build_logger(run_dir, run, config) -> rlf.Logger`` / ``build_callback(...) -> rlf.Callback``."""


class RegisterAlgorithm(Protocol):
    def __call__(self, name: str, *, build_agent: Callable | str, build_learner: Callable | str, family: str,
                 config: type[BaseModel], default_env: str | None = None,
                 action_spaces: tuple[str, ...] = ("discrete",), multi_agent: bool = True,
                 run_defaults: dict[str, Any] | None = None, observation_spaces: tuple[str | type, ...] | None = None,
                 observation_check: Callable[[Any], str | None] | None = None,
                 presets: dict[str, str] | None = None) -> None: ...


class RegisterEnvironment(Protocol):
    def __call__(self, name: str, *, build_env: Callable | str, config: type[BaseModel],
                 prefer_subprocess: bool = False) -> None: ...


class RegisterStrategy(Protocol):
    def __call__(self, name: str, *, strategy: type | str, config: type[BaseModel] | None = None,
                 description: str = "") -> None: ...


class RegisterCollector(Protocol):
    def __call__(self, name: str, *, build_collector: BuildCollector | str, config: type[BaseModel] | None = None,
                 description: str = "", build_actor_pool: Callable | str | None = None) -> None: ...


class RegisterLogger(Protocol):
    def __call__(self, name: str, *, build_logger: BuildCallback | str, config: type[BaseModel] | None = None,
                 description: str = "") -> None: ...


class RegisterCallback(Protocol):
    def __call__(self, name: str, *, build_callback: BuildCallback | str, config: type[BaseModel] | None = None,
                 description: str = "") -> None: ...


TuneJobCallable = Callable[[Any], None]
"""``launch(job)`` / ``check(job)``: ``job`` is an ``rlf.tune.TuneJob`` (not imported here: rlf.tune sits above
the plugins, and imports Optuna when used)."""


class RegisterTuneLauncher(Protocol):
    def __call__(self, name: str, *, launch: TuneJobCallable | str, check: TuneJobCallable | str | None = None,
                 description: str = "") -> None: ...


@hookspec
def rlf_register_algorithms(register: RegisterAlgorithm):
    """Call ``register(name, *, build_agent, build_learner, family, config, ...)`` once per algorithm.

    Builders may be given as ``"package.module:function"`` strings, imported on first use."""


@hookspec
def rlf_register_environments(register: RegisterEnvironment):
    """Call ``register(name, *, build_env, config, ...)`` once per environment."""


@hookspec
def rlf_register_strategies(register: RegisterStrategy):
    """Call ``register(name, *, strategy, config=None, description="")`` once per strategy family.

    ``strategy`` is an ``rlf.TrainStrategy`` subclass (or a ``"package.module:Class"`` string, imported
    on first use), constructed as ``strategy(algorithm, env_name, env_factory, context, collector)``.
    ``config`` is the model of the settings it reads (default ``rlf.AlgorithmConfig``): every
    algorithm that names this family (``family="<name>"``) must have a config that subclasses it."""


@hookspec
def rlf_register_collectors(register: RegisterCollector):
    """Call ``register(name, *, build_collector, config=None, description="")`` once per collector.

    A collector steps N copies of an environment behind ``rlf.VectorEnv``; ``run.vector = "<name>"``
    selects it and the config section ``[collector]`` is validated against ``config`` (a pydantic
    model class; default: ``rlf.CollectorConfig``, which has no fields).
    ``build_collector(env_name, factory, num_envs, config)`` returns the ``VectorEnv``; it may be a
    ``"package.module:function"`` string, imported on first use.

    ``build_actor_pool(job, config)`` (optional, same string form) hosts the off-policy strategy's
    actors (``algo.actors > 0``) where this collector hosts envs; it gets an
    ``rlf.training.actors.ActorJob`` and returns an ``ActorPool``. Without it, actors are local
    processes whatever ``run.vector`` is."""


@hookspec
def rlf_register_loggers(register: RegisterLogger):
    """Call ``register(name, *, build_logger, config=None, description="")`` once per metric sink.

    ``run.loggers = ["csv", "tensorboard", "progress", "<name>"]`` selects them; each one's settings
    are the config table ``[logger.<name>]``, validated against ``config`` (default: no settings).
    ``build_logger(run_dir, run, config)`` returns an ``rlf.Logger`` (a callback: ``on_log``,
    ``on_episode_end``, ``on_eval``, ... and ``close``); it may be a ``"module:function"`` string."""


@hookspec
def rlf_register_callbacks(register: RegisterCallback):
    """Call ``register(name, *, build_callback, config=None, description="")`` once per callback.

    ``run.callbacks = ["<name>"]`` selects them, with settings in ``[callback.<name>]``;
    ``build_callback(run_dir, run, config)`` returns an ``rlf.Callback``."""


@hookspec
def rlf_register_tune_launchers(register: RegisterTuneLauncher):
    """Call ``register(name, *, launch, check=None, description="")`` once per place ``rlf tune`` can run
    its worker loops (the built-in one, ``processes``, is local worker processes).

    ``rlf tune --jobs N --launcher <name> [--address ADDRESS]`` selects it. Both builders get an
    ``rlf.tune.TuneJob`` (picklable: ``options``, ``workers``, ``address``) and may be
    ``"module:function"`` strings. ``check(job)`` runs before the study is opened and raises
    ``rlf.ConfigError`` for what cannot work (an address, a storage the workers cannot reach);
    ``launch(job)`` runs ``job.run_worker(index)`` for ``index`` in ``range(job.workers)`` wherever it
    places them, calls ``job.poll()`` now and then in this process (it prints the trials that finished,
    as local workers do), and returns when all are done; rlf tune then prints the table and best.toml."""
