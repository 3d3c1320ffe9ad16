"""PPO's minibatch step for a small MLP actor-critic on the CPU, in numpy: the same loss, gradients,
gradient-norm clipping and Adam update as the torch path, written out by hand.

Why: with SB3's default settings (1 env, 2048 steps x 10 epochs x minibatches of 64) an update is
3,200 steps on two 64x64 networks, and each torch step is ~60 small ops through autograd, the
dispatcher and the optimizer (~1-1.5 ms) for a few thousand multiply-adds. Numpy runs the same
arithmetic with a fraction of the per-op overhead. What stays as in torch:

- the parameters are the network's own tensors (re-pointed into one flat buffer, so the Adam update
  is a handful of vector ops; ``state_dict`` keys and shapes are unchanged);
- Adam's moments and step counts live in ``torch.optim.Adam``'s own state (views of flat buffers),
  so checkpoints are the same and can be resumed by either path;
- ties of the clipped surrogate's ``max`` are resolved as autograd does (each side gets half, which
  adds up to the unclipped gradient), so gradients agree with autograd to float rounding.

Opt-in with ``algo.backend="numpy"``, for ``MLPActorCritic`` networks with a plain float encoder (what
``NumpyActing`` supports), no PPO extension and no value clipping. ``loss.py`` is the definition;
tests/test_ppo_backends.py fails when a config field changes one backend's update and not the other's.
"""

from __future__ import annotations

import numpy as np
import torch

from .model import MLPActorCritic, NumpyActing

# (kind, weight, bias, weight gradient, bias gradient) per Linear; (kind, None, ...) per activation
Layer = tuple[str, np.ndarray | None, np.ndarray | None, np.ndarray | None, np.ndarray | None]


def check_numpy_backend(networks: dict[str, torch.nn.Module], config, extension) -> None:
    """``algo.backend="numpy"`` covers PPO's MLP on the CPU, without an extension or value clipping
    (the config refuses that one itself); anything else is one line naming what to change."""
    from rlf import ConfigError

    if extension is not None:
        raise ConfigError(f"algo.backend='numpy' runs plain PPO only, not {type(extension).__name__}'s extra loss; "
                          "set algo.backend='torch'")
    unsupported = [agent_id for agent_id, network in networks.items() if not NumpyUpdate.supports(network)]
    if unsupported:
        raise ConfigError(f"algo.backend='numpy' runs only an MLP on the CPU, and agent {unsupported[0]!r} has "
                          f"{type(networks[unsupported[0]]).__name__} on "
                          f"{next(networks[unsupported[0]].parameters()).device.type}; set algo.backend='torch'")


class NumpyUpdate:
    """Owns the flat parameter, gradient and Adam-moment buffers of one agent's network."""

    def __init__(self, network: MLPActorCritic, optimizer: torch.optim.Adam):
        self.network = network
        self.optimizer = optimizer
        self.params = list(network.parameters())
        sizes = [p.numel() for p in self.params]
        self.offsets = np.cumsum([0, *sizes]).tolist()
        flat = torch.empty(self.offsets[-1], dtype=torch.float32)
        with torch.no_grad():
            for param, start, stop in zip(self.params, self.offsets[:-1], self.offsets[1:], strict=True):
                flat[start:stop].copy_(param.reshape(-1))
                param.data = flat[start:stop].view_as(param)  # the module's tensor, now in the flat buffer
        self.theta = flat.numpy()
        self.grad = np.zeros_like(self.theta)
        self.exp_avg = torch.zeros_like(flat)
        self.exp_avg_sq = torch.zeros_like(flat)
        self.step_count = 0
        self.bound = False
        views = {id(p): (self.theta[a:b].reshape(p.shape), self.grad[a:b].reshape(p.shape))
                 for p, a, b in zip(self.params, self.offsets[:-1], self.offsets[1:], strict=True)}
        self.actor = self._layers(network.actor, views)
        self.critic = self._layers(network.critic, views)

    @staticmethod
    def supports(network: torch.nn.Module) -> bool:
        return (NumpyActing.supports(network, torch.device("cpu"))
                and all(p.device.type == "cpu" and p.dtype == torch.float32 for p in network.parameters()))

    @staticmethod
    def _layers(sequential: torch.nn.Sequential, views: dict) -> list[Layer]:
        layers: list[Layer] = []
        for module in sequential:
            if isinstance(module, torch.nn.Linear):
                weight, weight_grad = views[id(module.weight)]
                bias, bias_grad = views[id(module.bias)] if module.bias is not None else (None, None)
                layers.append(("linear", weight, bias, weight_grad, bias_grad))
            else:
                layers.append(("tanh" if isinstance(module, torch.nn.Tanh) else "relu", None, None, None, None))
        return layers

    # -- Adam's state, shared with torch.optim.Adam ---------------------------------------------
    def bind(self) -> None:
        """Point the optimizer's state for these parameters at the flat moment buffers, taking over
        whatever it holds (a resumed checkpoint, or steps the torch path took). Called before the
        first step and after the optimizer's state was replaced (``load_state_dict``)."""
        states = [self.optimizer.state.get(p) for p in self.params]
        steps = {int(s["step"]) for s in states if s}
        if len(steps) > 1 or (steps and not all(states)):
            raise ValueError("the parameters of one PPO network have different Adam step counts")
        self.step_count = steps.pop() if steps else 0
        fused = bool(self.optimizer.param_groups[0].get("fused"))
        for param, state, a, b in zip(self.params, states, self.offsets[:-1], self.offsets[1:], strict=True):
            exp_avg, exp_avg_sq = self.exp_avg[a:b].view_as(param), self.exp_avg_sq[a:b].view_as(param)
            if state:
                exp_avg.copy_(state["exp_avg"])
                exp_avg_sq.copy_(state["exp_avg_sq"])
            # the step counter's dtype and device as torch's Adam makes them (float32 tensor when fused)
            step = torch.zeros((), dtype=torch.float32) if fused else torch.tensor(0.0)
            self.optimizer.state[param] = {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
        self.sync()
        self.bound = True

    def sync(self) -> None:
        """Write the step count into the optimizer's state (read by checkpoints and by tests)."""
        for param in self.params:
            self.optimizer.state[param]["step"].fill_(self.step_count)

    # -- one minibatch ----------------------------------------------------------------------------
    def minibatch(self, obs: np.ndarray, actions: np.ndarray, old_log_probs: np.ndarray, advantages: np.ndarray,
                  returns: np.ndarray, clip: float, value_coef: float, entropy_coef: float, max_grad_norm: float,
                  target_kl: float) -> tuple[np.ndarray, bool]:
        """PPO's loss on one minibatch and, unless the approximate KL already exceeds ``target_kl``
        (> 0), one Adam step. Returns (policy_loss, value_loss, entropy, approx_kl, clip_fraction)
        and whether the update must stop."""
        if not self.bound:
            self.bind()
        count = len(actions)
        x = np.asarray(obs, dtype=np.float32).reshape(count, -1)
        logits, actor_cache = self._forward(self.actor, x)
        values, critic_cache = self._forward(self.critic, x)
        values = values[:, 0]

        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        probs = np.exp(log_probs)
        rows = np.arange(count)
        log_ratio = log_probs[rows, actions] - old_log_probs
        ratio = np.exp(log_ratio)
        unclipped = -advantages * ratio
        clipped = -advantages * np.clip(ratio, 1 - clip, 1 + clip)
        row_entropy = -(probs * log_probs).sum(axis=1)
        value_error = values - returns
        stats = np.array([np.maximum(unclipped, clipped).mean(), 0.5 * (value_error ** 2).mean(), row_entropy.mean(),
                          ((ratio - 1) - log_ratio).mean(), (np.abs(ratio - 1) > clip).mean()], dtype=np.float64)
        if target_kl > 0 and stats[3] > target_kl:
            return stats, True

        # d loss / d log pi(a|s): where the unclipped term is the larger (ties included: autograd
        # splits a tie half and half, and the clipped half passes its clamp) it is -A * ratio / B;
        # where the clipped term is strictly larger the clamp is active and nothing flows.
        d_log_prob = np.where(unclipped >= clipped, -advantages * ratio, 0.0).astype(np.float32) / count
        d_logits = -d_log_prob[:, None] * probs
        d_logits[rows, actions] += d_log_prob
        if entropy_coef:
            d_logits += (entropy_coef / count) * probs * (log_probs + row_entropy[:, None])
        d_values = ((value_coef / count) * value_error)[:, None].astype(np.float32)
        self._backward(self.actor, actor_cache, d_logits)
        self._backward(self.critic, critic_cache, d_values)
        self._adam(max_grad_norm)
        return stats, False

    @staticmethod
    def _forward(layers: list[Layer], x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        cache = [x]  # the input of every layer, then the output
        for kind, weight, bias, _, _ in layers:
            if kind == "linear":
                x = x @ weight.T
                if bias is not None:
                    x += bias
            elif kind == "tanh":
                x = np.tanh(x)
            else:
                x = np.maximum(x, 0.0)
            cache.append(x)
        return x, cache

    @staticmethod
    def _backward(layers: list[Layer], cache: list[np.ndarray], grad: np.ndarray) -> None:
        for index in range(len(layers) - 1, -1, -1):
            kind, weight, bias, weight_grad, bias_grad = layers[index]
            if kind == "linear":
                np.matmul(grad.T, cache[index], out=weight_grad)
                if bias is not None:
                    np.sum(grad, axis=0, out=bias_grad)
                if index:
                    grad = grad @ weight
            elif kind == "tanh":
                out = cache[index + 1]
                grad = grad * (1.0 - out * out)
            else:
                grad = grad * (cache[index + 1] > 0)

    def _adam(self, max_grad_norm: float) -> None:
        grad = self.grad
        if max_grad_norm > 0:  # torch.nn.utils.clip_grad_norm_: scale by max / (norm + 1e-6), at most 1
            scale = max_grad_norm / (float(np.sqrt(np.dot(grad, grad))) + 1e-6)
            if scale < 1.0:
                grad *= np.float32(scale)
        group = self.optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        self.step_count += 1
        exp_avg, exp_avg_sq = self.exp_avg.numpy(), self.exp_avg_sq.numpy()
        exp_avg *= np.float32(beta1)
        exp_avg += np.float32(1 - beta1) * grad
        exp_avg_sq *= np.float32(beta2)
        exp_avg_sq += np.float32(1 - beta2) * grad * grad
        bias_correction2_sqrt = (1 - beta2 ** self.step_count) ** 0.5
        denom = np.sqrt(exp_avg_sq)
        denom /= np.float32(bias_correction2_sqrt)
        denom += np.float32(group["eps"])
        self.theta -= np.float32(group["lr"] / (1 - beta1 ** self.step_count)) * exp_avg / denom
