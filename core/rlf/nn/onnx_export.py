"""An agent's policies as one ONNX file: what ``rlf export --format onnx`` writes.

The graph takes each agent id's observations exactly as the environment gives them (dtype and shape of
its space, batch axis first and of any size) and returns, per agent id, the greedy action and the
parameters a sampled action is drawn from (``rlf.interfaces.POLICY_HEADS``). The file's metadata
(``metadata_props``, key ``rlf``) is JSON that says which output is which, the action spaces, how to
sample, and where the policy came from, so a deployment needs onnxruntime and nothing else.

Why the TorchScript-based exporter (``dynamo=False``): these policies are feed-forward graphs of
standard layers, which it exports in about a second with no extra dependency; the torch.export-based
one needs onnxscript and took minutes on a loaded core for a two-layer MLP. Its deprecation warning is
silenced here, and the onnxruntime check below is what says an export is right.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlf.errors import ConfigError, IncompatibleError
from rlf.interfaces import PolicyExport

FORMAT = "rlf-onnx-policy/1"
OPSET = 17
TOLERANCE = 1e-4
"""Largest difference between onnxruntime's and torch's outputs an export accepts (float32 rounding)."""


def names(agent_id: str, single: bool) -> dict[str, str]:
    """The graph's input and output names for one agent id: ``obs``, ``action``, ... for a single agent,
    ``obs.<id>``, ``action.<id>``, ... for several."""
    keys = ("obs", "action", "logits", "q_values", "mean", "log_std")
    return {key: key if single else f"{key}.{agent_id}" for key in keys}


def head_outputs(head: str) -> tuple[str, ...]:
    """The outputs after ``action`` that a head adds."""
    return {"categorical": ("logits",), "q_values": ("q_values",)}.get(head, ("mean", "log_std"))


class _Heads(nn.Module):
    """Every agent id's policy module followed by its greedy action."""

    def __init__(self, exports: Mapping[str, PolicyExport], action_spaces: Mapping[str, spaces.Space]):
        super().__init__()
        self.ids = list(exports)
        self.policies = nn.ModuleList([exports[agent_id].module for agent_id in self.ids])
        self.heads = [exports[agent_id].head for agent_id in self.ids]
        self.starts: list[int] = []
        self.shapes: list[tuple[int, ...]] = []
        for i, agent_id in enumerate(self.ids):
            space, head = action_spaces[agent_id], self.heads[i]
            discrete = head in ("categorical", "q_values")
            if discrete != isinstance(space, spaces.Discrete) or not isinstance(space, spaces.Discrete | spaces.Box):
                raise IncompatibleError(f"agent {agent_id!r}: a {head!r} policy cannot act in {space}")
            self.starts.append(int(space.start) if discrete else 0)
            self.shapes.append(tuple(int(s) for s in space.shape))
            low, high = (np.zeros(1), np.ones(1)) if discrete else (np.asarray(space.low), np.asarray(space.high))
            low, high = low.astype(np.float32).reshape(-1), high.astype(np.float32).reshape(-1)
            self.register_buffer(f"low{i}", torch.as_tensor(low), persistent=False)
            self.register_buffer(f"high{i}", torch.as_tensor(high), persistent=False)
            self.register_buffer(f"scale{i}", torch.as_tensor((high - low) / 2), persistent=False)
            self.register_buffer(f"center{i}", torch.as_tensor((high + low) / 2), persistent=False)

    def forward(self, *observations: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs: list[torch.Tensor] = []
        for i, (policy, head, obs) in enumerate(zip(self.policies, self.heads, observations, strict=True)):
            out = policy(obs)
            if head in ("categorical", "q_values"):
                outputs += [out.argmax(dim=-1) + self.starts[i], out]
                continue
            mean, log_std = out
            if head == "squashed_gaussian":
                action = torch.tanh(mean) * getattr(self, f"scale{i}") + getattr(self, f"center{i}")
            else:
                action = torch.minimum(torch.maximum(mean, getattr(self, f"low{i}")), getattr(self, f"high{i}"))
            outputs += [action.reshape(-1, *self.shapes[i]), mean, log_std]
        return tuple(outputs)


def describe(exports: Mapping[str, PolicyExport], observation_spaces: Mapping[str, spaces.Space],
             action_spaces: Mapping[str, spaces.Space], about: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON stored under metadata key ``rlf``."""
    single = len(exports) == 1
    agents = {}
    for agent_id, export in exports.items():
        obs_space, action_space = observation_spaces[agent_id], action_spaces[agent_id]
        io = names(agent_id, single)
        action: dict[str, Any] = {"shape": list(action_space.shape), "dtype": str(action_space.dtype)}
        if isinstance(action_space, spaces.Discrete):
            action.update(kind="Discrete", n=int(action_space.n), start=int(action_space.start))
        else:
            action.update(kind="Box", low=np.asarray(action_space.low).reshape(-1).tolist(),
                          high=np.asarray(action_space.high).reshape(-1).tolist())
        agents[agent_id] = {
            "head": export.head, "input": io["obs"], "action": io["action"],
            "outputs": {key: io[key] for key in head_outputs(export.head)},
            "observation": {"shape": list(obs_space.shape or ()), "dtype": str(obs_space.dtype)},
            "action_space": action,
        }
    return {"format": FORMAT, **about, "agents": agents, "sampling": SAMPLING}


SAMPLING = {
    "categorical": "sample an index from softmax(logits), add the action space's start",
    "q_values": "the greedy action is the one rlf evaluates with; an epsilon-greedy agent picks a uniform "
                "action with probability epsilon instead",
    "squashed_gaussian": "u = mean + exp(log_std) * N(0, 1); action = tanh(u) * (high - low) / 2 + (high + low) / 2",
    "gaussian": "action = clip(mean + exp(log_std) * N(0, 1), low, high)",
}


def _same_action(want: np.ndarray, have: np.ndarray, scores: np.ndarray) -> bool:
    """Equal actions; an argmax (integer actions) may differ only where its two best ``scores`` are
    within rounding of each other."""
    if want.dtype.kind not in "iu":
        return bool(np.allclose(want, have, atol=TOLERANCE, rtol=TOLERANCE))
    differ = np.asarray(want != have)
    top = np.sort(scores[differ], axis=-1)
    return bool(((top[:, -1] - top[:, -2]) <= TOLERANCE).all())


def export_onnx(exports: Mapping[str, PolicyExport], observation_spaces: Mapping[str, spaces.Space],
                action_spaces: Mapping[str, spaces.Space], target: Path, about: Mapping[str, Any],
                probes: Mapping[str, np.ndarray], greedy: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Write ``target`` and check it on ``probes`` (a batch of observations per agent id): the policy
    modules' greedy actions must be ``greedy`` (what the agent itself does with ``explore=False``), and
    onnxruntime's outputs must match torch's within ``TOLERANCE``. Argmax actions may differ only where
    two scores tie within it. Nothing is written unless both hold. Returns {"path", "bytes", "checked":
    observations compared}."""
    try:
        import onnx
        import onnxruntime
    except ImportError as exc:
        raise ConfigError(f"exporting to ONNX needs the onnx and onnxruntime packages ({exc.name} is missing); "
                          "pip install 'rlf[onnx]'") from None
    single = len(exports) == 1
    wrapper = _Heads(exports, action_spaces).eval()
    ids = wrapper.ids
    input_names = [names(a, single)["obs"] for a in ids]
    output_names = [name for a in ids for name in
                    (names(a, single)["action"], *(names(a, single)[k] for k in head_outputs(exports[a].head)))]
    examples = tuple(torch.as_tensor(np.ascontiguousarray(probes[a][:1])) for a in ids)
    with torch.no_grad():
        expected = [t.numpy() for t in wrapper(*(torch.as_tensor(np.ascontiguousarray(probes[a])) for a in ids))]
    for agent_id in ids:
        index = output_names.index(names(agent_id, single)["action"])
        mine, theirs = expected[index], np.asarray(greedy[agent_id]).reshape(expected[index].shape)
        if not _same_action(mine, theirs, expected[index + 1]):
            raise IncompatibleError(f"agent {agent_id!r}: the exported policy's greedy actions are not the agent's "
                                    f"own (export_policy and act disagree); report it to the algorithm's plugin")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(handle)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer notices
            torch.onnx.export(wrapper, examples, scratch, dynamo=False, opset_version=OPSET,
                              input_names=input_names, output_names=output_names,
                              dynamic_axes={name: {0: "batch"} for name in input_names + output_names})
        model = onnx.load(scratch)
        entry = model.metadata_props.add()
        entry.key, entry.value = "rlf", json.dumps(describe(exports, observation_spaces, action_spaces, about))
        onnx.save(model, scratch)
        session = onnxruntime.InferenceSession(scratch, providers=["CPUExecutionProvider"])
        got = session.run(output_names, {name: np.ascontiguousarray(probes[a]) for name, a in zip(input_names, ids,
                                                                                                   strict=True)})
        produced = dict(zip(output_names, got, strict=True))
        for name, want in zip(output_names, expected, strict=True):
            index = output_names.index(name)
            if name.split(".")[0] == "action":
                same = _same_action(want, produced[name], expected[index + 1])
            else:
                same = np.allclose(want, produced[name], atol=TOLERANCE, rtol=TOLERANCE)
            if not same:
                raise IncompatibleError(f"the exported graph's {name!r} differs from the agent's on the probe "
                                        "observations; the policy module does something the ONNX exporter "
                                        "cannot trace (report it to the algorithm's plugin)")
        os.replace(scratch, target)
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)
    return {"path": str(target), "bytes": target.stat().st_size,
            "checked": int(sum(len(probes[a]) for a in ids))}
