"""PPO's update at SB3's default settings (a 2048-step rollout of 1 env, 10 epochs x 32 minibatches of
64, separate 64x64 tanh actor and critic): the numpy update against autograd with torch's fused Adam.

    python benchmarks/ppo_update.py [--rounds 5] [--updates 2]

CPU time per minibatch step (time.process_time, which a loaded machine inflates less than wall time),
the two paths alternating round by round, medians; 1 torch thread, as rlf learns with small MLPs.
Both learners start from the same seed and see the same rollout; the weights they end with are
compared too, so the speed-up is shown next to the evidence that the maths is the same.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "ppo" / "tests"))
from ppo_helpers import fake_rollout, make_pair, single_spec, weights  # noqa: E402

SB3_DEFAULTS = {"epochs": 10, "minibatches": 32, "lr": 3e-4, "anneal_lr": False, "gamma": 0.99, "gae_lambda": 0.95,
                "entropy_coef": 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=2, help="updates (of 320 minibatch steps) per round and path")
    args = parser.parse_args()
    if args.rounds < 1 or args.updates < 1:
        print("error: --rounds and --updates must be at least 1", file=sys.stderr)
        raise SystemExit(2)
    torch.set_num_threads(1)
    spec = single_spec(num_envs=1)
    numpy_agent, numpy_learner = make_pair(spec, backend="numpy", **SB3_DEFAULTS)
    torch_agent, torch_learner = make_pair(spec, backend="torch", **SB3_DEFAULTS)  # autograd, torch's fused Adam
    rollout = fake_rollout(numpy_agent, steps=2048)
    learners = {"numpy update": numpy_learner, "torch (autograd, fused Adam)": torch_learner}
    times: dict[str, list[float]] = {name: [] for name in learners}
    steps_per_update = SB3_DEFAULTS["epochs"] * SB3_DEFAULTS["minibatches"]
    for r in range(args.rounds):
        for name in (list(learners) if r % 2 == 0 else list(reversed(learners))):
            start = time.process_time()
            for _ in range(args.updates):
                learners[name].learn(rollout)
            times[name].append((time.process_time() - start) / (args.updates * steps_per_update) * 1e6)
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, value in medians.items():
        print(f"{name:30s} {value:7.0f} us CPU per minibatch step (rounds: "
              + ", ".join(f"{v:.0f}" for v in times[name]) + ")")
    print(f"speed-up: {medians['torch (autograd, fused Adam)'] / medians['numpy update']:.1f}x")
    ours, theirs = weights(numpy_agent), weights(torch_agent)
    gap = max(float(np.abs(ours[a][k] - theirs[a][k]).max()) for a in ours for k in ours[a])
    print(f"largest weight difference after {args.rounds * args.updates} identical updates: {gap:.1e}")


if __name__ == "__main__":
    main()
