"""PPO's configuration. ``rollout_steps``, ``gamma`` and ``gae_lambda`` come from ``rlf.OnPolicyConfig``
because the core's on-policy strategy collects the rollout and computes GAE with them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from rlf import OnPolicyConfig


class PPOConfig(OnPolicyConfig):
    """Proximal Policy Optimization with a clipped surrogate objective and a learned value baseline."""

    lr: float = Field(2.5e-4, gt=0.0, le=1.0, description="Adam learning rate at the start of the run.")
    anneal_lr: bool = Field(
        True, description="Decay the learning rate linearly to 0 over schedule_steps (or run.steps).")
    schedule_steps: int = Field(
        0, ge=0, le=10**12,
        description="Env steps over which anneal_lr and anneal_clip decay to 0 (0 = the run's run.steps). Set it "
                    "when a run may be continued to a bigger budget: the schedule then does not change on resume.")
    adam_eps: float = Field(1e-5, gt=0.0, le=1e-2, description="Adam epsilon (numerical floor of the step size).")
    epochs: int = Field(4, ge=1, le=100, description="Passes over each rollout per update.")
    minibatches: int = Field(4, ge=1, le=1024, description="Minibatches each rollout is split into per epoch.")
    clip_coef: float = Field(0.2, gt=0.0, le=1.0, description="Policy ratio clip range epsilon of the surrogate.")
    anneal_clip: bool = Field(
        False, description="Decay clip_coef linearly to 0 over run.steps, on the learning rate's schedule "
                           "(rl-baselines3-zoo's linear clip_range).")
    value_clip: float = Field(
        0.0, ge=0.0, le=100.0,
        description="Clip the value change around the old value by this much (0 = plain squared error).")
    value_coef: float = Field(0.5, ge=0.0, le=100.0, description="Weight of the value loss.")
    entropy_coef: float = Field(0.01, ge=0.0, le=1.0, description="Weight of the entropy bonus.")
    max_grad_norm: float = Field(0.5, ge=0.0, le=1000.0, description="Gradient-norm clip per update (0 = off).")
    normalize_advantages: bool = Field(
        True, description="Standardize advantages over each agent's rollout before the update.")
    target_kl: float = Field(
        0.0, ge=0.0, le=10.0,
        description="Stop an agent's update early once its approximate KL exceeds this (0 = never).")
    network: Literal["auto", "mlp", "cnn"] = Field(
        "auto", description="auto: the Nature CNN for images ((C, H, W) or (H, W, C), C <= 16, H and W >= 36; "
                            "rlf.nn.image_layout), an MLP for everything else.")
    hidden_sizes: list[int] = Field(
        [64, 64], min_length=1, max_length=8,
        description="MLP: hidden layer widths (separate actor and critic networks of this shape).")
    activation: Literal["tanh", "relu"] = Field("tanh", description="MLP hidden activation.")
    ortho_init: bool = Field(
        True, description="Orthogonal initialisation of the MLPs (gain sqrt(2), 0.01 on the policy output, 1 on "
                          "the value output); false: torch's default init (rl-baselines3-zoo's MuJoCo settings).")
    log_std_init: float = Field(
        0.0, ge=-20.0, le=2.0,
        description="Box actions: the Gaussian policy's initial log standard deviation (one learned value per "
                    "action dimension, the same in every state).")
    normalize_obs: bool = Field(
        False, description="Standardise vector observations with running statistics (updated after each update, "
                           "kept in the network: checkpoints and exported agents carry them).")
    normalize_reward: bool = Field(
        False, description="Divide rewards by the running standard deviation of the discounted return before "
                           "GAE (the value function then learns the scaled returns); statistics in the checkpoint.")
    normalize_clip: float = Field(
        10.0, gt=0.0, le=1e6, description="Bound of normalised observations and rewards (+-).")
    cnn_features: int = Field(512, ge=16, le=4096, description="CNN: width of the dense layer after the convolutions.")
    backend: Literal["torch", "numpy"] = Field(
        "torch", description="How the update is computed: torch (autograd, loss.py: the definition) or numpy "
                             "(the same maths derived by hand, ~4x less CPU per minibatch for small MLPs on the "
                             "CPU; no value_clip, no extension, no CNN).")
    memory: Literal["none", "lstm", "gru"] = Field(
        "none", description="A recurrent policy: an LSTM or GRU cell between the observation encoder and the heads, "
                            "its state carried from step to step within an episode and reset at the episode's end "
                            "(for partially observed tasks; the torch backend only).")
    memory_size: int = Field(128, ge=1, le=8192, description="memory: width of the recurrent cell's state.")
    memory_critic: bool = Field(
        True, description="memory: the critic has a recurrent cell of its own (false: it reads the actor's, one "
                          "cell in all). Image observations share the CNN either way.")
    sequence_length: int = Field(
        0, ge=0, le=1_000_000,
        description="memory: env steps per sequence the update back-propagates through, each starting from the "
                    "state the policy acted with (0 = the whole rollout). Minibatches are sets of whole sequences.")
    torch_threads: int = Field(
        0, ge=0, le=1024,
        description="CPU threads torch uses in this process (0 = auto: 1 for MLPs; for CNNs 1 while acting "
                    "and torch's default while learning).")

    @field_validator("hidden_sizes")
    @classmethod
    def _widths(cls, value: list[int]) -> list[int]:
        if any(width < 1 or width > 65_536 for width in value):
            raise ValueError("every hidden width must be between 1 and 65536")
        return value

    @model_validator(mode="after")
    def _numpy_backend(self):
        if self.backend == "numpy" and self.value_clip > 0:
            raise ValueError("algo.backend='numpy' does not clip values: set algo.value_clip=0 or algo.backend='torch'")
        if self.backend == "numpy" and self.normalize_obs:
            raise ValueError("algo.backend='numpy' does not standardise observations: set algo.normalize_obs=false "
                             "or algo.backend='torch'")
        if self.memory != "none" and self.backend == "numpy":
            raise ValueError(f"algo.backend='numpy' has no recurrent policy: set algo.memory='none' or "
                             f"algo.backend='torch' (algo.memory={self.memory!r})")
        return self
