"""Acting on one CartPole observation: torch's eager path against rlf.nn.NumpyMLP, for PPO (64x64 tanh
actor and critic, categorical sampling) and DQN (256x256 ReLU, greedy choice).

    python benchmarks/small_mlp_acting.py [--calls 2000] [--rounds 5]

CPU time per call (time.process_time, so a loaded machine inflates it less than wall time), rounds
alternating in order, medians; 1 torch thread, as rlf acts with small MLPs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np
import torch
from rlf_plugin_dqn.agent import DQNAgent
from rlf_plugin_dqn.config import DQNConfig
from rlf_plugin_ppo.config import PPOConfig
from rlf_plugin_ppo.model import PPOAgent

from rlf.envs import describe_env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    spec = describe_env("gym:CartPole-v1", gym.make("CartPole-v1"), 1)
    ppo = PPOAgent(spec, PPOConfig(), 0)
    dqn = DQNAgent(spec, DQNConfig(hidden_sizes=[256, 256]), 0, torch.device("cpu"))
    obs = {"agent": np.random.default_rng(0).random((1, 4), dtype=np.float32)}
    cases = {
        "PPO act, torch": lambda: ppo._act_torch(obs, True),
        "PPO act, numpy": lambda: ppo._act_numpy(obs, True),
        "DQN greedy, torch": lambda: dqn.q_values("agent", obs["agent"]).argmax(dim=1).cpu().numpy(),
        "DQN greedy, numpy": lambda: dqn.greedy("agent", obs["agent"]),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(args.rounds):
        for name in (list(cases) if r % 2 == 0 else list(reversed(cases))):
            start = time.process_time()
            for _ in range(args.calls):
                cases[name]()
            times[name].append((time.process_time() - start) / args.calls * 1e6)
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, value in medians.items():
        print(f"{name:20s} {value:7.1f} us CPU per call (median of {args.rounds})")
    print(f"PPO: numpy {medians['PPO act, torch'] / medians['PPO act, numpy']:.2f}x faster; "
          f"DQN: numpy {medians['DQN greedy, torch'] / medians['DQN greedy, numpy']:.2f}x faster")


if __name__ == "__main__":
    main()
