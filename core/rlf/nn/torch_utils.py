"""Helpers for plugins that use torch. torch is imported inside each function, never at module
level, so the core keeps importing and running without torch installed."""

from __future__ import annotations

from typing import Any

from rlf.storage.checkpoint import map_arrays


def resolve_device(name: str) -> Any:
    """"auto" picks CUDA when available, else CPU; anything else is passed to torch.device."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def check_device(name: str) -> None:
    """A ConfigError line unless ``name`` ("cuda", "cuda:1", "mps") is a device this machine has.

    Checked before a run starts, so ``device=cuda`` on a CPU-only machine is not silently CPU or a
    torch traceback half-way into building the agent."""
    from importlib.util import find_spec

    from rlf.errors import ConfigError

    if name in ("auto", "cpu"):
        return
    if find_spec("torch") is None:
        raise ConfigError(f"device={name}, but torch is not installed; install torch with "
                          f"{name.split(':')[0].upper()} support or use --set device=cpu")
    import torch

    if name.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(name.partition(":")[2] or 0)
        if index >= count:
            have = f"only {count} CUDA device(s)" if count else "no CUDA device (or a CPU-only torch build)"
            raise ConfigError(f"device={name}, but this machine has {have}; use --set device=auto or device=cpu")
    elif name == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("device=mps, but MPS is not available here; use --set device=auto or device=cpu")


def to_numpy_tree(state: Any) -> Any:
    """A torch state dict (module or optimizer) as a checkpointable tree of numpy arrays.

    Arrays are copies: a CPU tensor's ``.numpy()`` shares memory, and a state taken now must not
    change when training goes on."""
    import torch

    if isinstance(state, torch.Tensor):
        return state.detach().cpu().numpy().copy()
    if isinstance(state, dict):
        return {k: to_numpy_tree(v) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(to_numpy_tree(v) for v in state)
    return state


def to_torch_tree(state: Any, device: Any = "cpu") -> Any:
    """The inverse of ``to_numpy_tree``: arrays become tensors on ``device``."""
    import numpy as np
    import torch

    return map_arrays(state, lambda a: torch.as_tensor(np.array(a), device=device))


def optimizer_state(optimizer) -> Any:
    return to_numpy_tree(optimizer.state_dict())


def load_optimizer_state(optimizer, state: Any, group_settings: dict[str, Any] | None = None) -> None:
    """Optimizer step counters must stay on the CPU; torch.optim moves the moments itself.

    ``group_settings`` override the saved param groups' (e.g. ``{"fused": ...}``: checkpoints from before
    fused Adam say ``fused=None``, and loading lets the saved groups win, so the setting is put back
    first; torch then also places the step counters where fused Adam wants them)."""
    import numpy as np
    import torch

    if group_settings:
        state = {**state, "param_groups": [{**group, **group_settings} for group in state["param_groups"]]}
    optimizer.load_state_dict(map_arrays(state, lambda a: torch.as_tensor(np.array(a))))
    for param_state in optimizer.state.values():
        # checkpoints may hand 0-d arrays back as shape (1,); Adam's step counter must stay a scalar
        step = param_state.get("step")
        if isinstance(step, torch.Tensor) and step.dim():
            param_state["step"] = step.reshape(())


def torch_rng_state() -> Any:
    import torch

    return torch.get_rng_state().numpy()


def set_torch_rng_state(state: Any) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(torch.as_tensor(np.asarray(state, dtype=np.uint8)))
