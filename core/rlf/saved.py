"""Runs and files already on disk: ``rlf.load`` (resume a run or open a checkpoint) and ``rlf.export``
(the agent's weights and config only, for sharing a trained agent; or its policy as ONNX, for running it
without rlf).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rlf import observations
from rlf.api import CHECKPOINT_FILE, RUN_FILE, Algorithm, previous_checkpoint_hint
from rlf.config import (
    parse_overrides,
)
from rlf.errors import CheckpointError, ConfigError, IncompatibleError
from rlf.finite import check_tree
from rlf.plugins.loading import registry as default_registry
from rlf.plugins.specs import (
    Registry,
)
from rlf.resolution import resolve
from rlf.storage import checkpoint as ckpt
from rlf.storage import run_state, rundir
from rlf.version import __version__

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
        raise CheckpointError(f"{exc}{previous_checkpoint_hint(path)}") from None
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
    is what ``rlf eval`` needs to play, a fraction of a checkpoint's size, and cannot be resumed.

    A ``target`` named ``*.onnx`` gets the agent's policy as an ONNX graph instead (docs/EXPORT.md): raw
    observations in, greedy actions and the distribution's parameters out, checked against the agent on
    1,000 observations before it is written."""
    path, _ = _checkpoint_of(Path(source))
    target = Path(target)
    if target.suffix not in EXPORT_SUFFIXES:
        raise ConfigError(f"{target}: name the exported agent <name>.rlf (the agent for `rlf eval`) or "
                          "<name>.onnx (its policy for onnxruntime)")
    if target.is_dir() or target.is_symlink() or (target.exists() and not overwrite):
        raise ConfigError(f"{target} already exists; pick another name, or pass --overwrite to replace it")
    if target.resolve() == path.resolve():
        raise ConfigError(f"{target} is the checkpoint being exported; write the agent to another file")
    if target.suffix == ".onnx":
        return _export_onnx(path, target)
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
            "env_steps": int(checked.counters.get("env_steps", 0)), "format": "rlf"}


EXPORT_SUFFIXES = (".rlf", ".onnx")
PROBES = 1000
"""Observations (samples of each observation space, seeded) the ONNX export is checked on."""


def _export_onnx(path: Path, target: Path) -> dict[str, Any]:
    """The agent's policies as an ONNX graph (``rlf.nn.onnx_export``), checked against the agent itself."""
    from rlf.nn import onnx_export

    algo = load(path)
    spec = algo._probe_spec()
    for agent_id, space in spec.observation_spaces.items():
        if observations.is_structured(space):
            # one graph input per agent: a Dict/Tuple would need one input per part, which rlf does not name yet
            raise IncompatibleError(f"ONNX export takes one array observation per agent, but agent {agent_id!r} "
                                    f"observes {type(space).__name__} observations; export it as <name>.rlf for "
                                    "`rlf eval` instead")
    agent = algo.resolved.algorithm.build_agent(algo._context(spec))
    run_state.load_into(agent, algo._agent_state, "agent", check_shapes=True)
    name = algo.resolved.run.algorithm
    try:
        exports = {agent_id: agent.export_policy(agent_id) for agent_id in spec.agent_ids}
    except NotImplementedError as exc:
        why = str(exc) or "its agent does not implement export_policy"
        raise IncompatibleError(f"algorithm {name!r} has no exportable policy ({why}); export it as <name>.rlf "
                                "for `rlf eval` instead") from None
    probes = {}
    for index, agent_id in enumerate(spec.agent_ids):
        space = spec.observation_spaces[agent_id]
        space.seed(index)
        probes[agent_id] = np.stack([space.sample() for _ in range(PROBES)])
    greedy = {agent_id: agent.act({agent_id: probes[agent_id]}, explore=False).actions[agent_id]
              for agent_id in spec.agent_ids}
    env_steps = int(algo.counters.get("env_steps", 0))
    about = {"algorithm": name, "env": algo.resolved.run.env, "env_steps": env_steps, "rlf_version": __version__,
             "source": path.name}
    done = onnx_export.export_onnx(exports, spec.observation_spaces, spec.action_spaces, target, about, probes,
                                   greedy)
    return {**done, "checkpoint_bytes": path.stat().st_size, "env_steps": env_steps, "format": "onnx"}


def _refuse_changed_names(stored: Mapping[str, Any], overrides: Mapping[str, Mapping[str, Any]]) -> None:
    """A resumed run keeps its algorithm and environment: a --set that changed them would be ignored
    or would feed one environment's learning state to another."""
    for key in ("algorithm", "env"):
        if key in overrides["run"] and overrides["run"][key] != stored.get(key):
            raise ConfigError(f"--set {key}={overrides['run'][key]!r} on resume: a resumed run keeps its {key} "
                              f"({stored.get(key)!r}); start a new run to train another")
