"""SAC on Pendulum-v1: does rlf-plugin-sac reach a mean return of -250 within 20,000 env steps, and
how does it compare with Stable-Baselines3's SAC at the same settings?

Per seed and implementation: training wall time, env steps/s over the whole run (acting and the one
gradient step per env step together), and the mean greedy return over ``--episodes`` evaluation
episodes on fixed evaluation seeds (the same episodes for both implementations). Runs alternate
(rlf seed 0, sb3 seed 0, rlf seed 1, ...) so load on the machine hits both alike; the summary gives
medians and the rlf/sb3 ratio of steps/s.

    python benchmarks/sac_pendulum.py                      # rlf only, 3 seeds x 20k steps
    /tmp/sb3/bin/python benchmarks/sac_pendulum.py --impl both

This script installs nothing. SB3 lives in its own venv (the rlf side is imported in the same process,
so that venv has the core and the SAC plugin too), made once with:

    python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install -c constraints.txt torch==2.13.0 stable-baselines3 -e . -e plugins/sac

Both sides: torch on one thread, CPU, ReLU MLPs (``--hidden``, default [256, 256]), Adam, lr 3e-4 for
policy, critics and temperature (``--lr`` changes all three), batch 256, buffer 1e6, 100 uniformly random steps first,
one gradient step per env step, tau 0.005, gamma 0.99, entropy temperature tuned from 1.0 towards
-dim(A).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import gymnasium
import numpy as np

ENV_ID = "Pendulum-v1"
EVAL_SEED = 10_000
THRESHOLD = -250.0


def evaluate(policy: Callable[[np.ndarray], np.ndarray], episodes: int) -> float:
    """Mean return of ``policy`` (one observation -> one action) over fixed evaluation seeds."""
    env = gymnasium.make(ENV_ID)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=EVAL_SEED + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def run_rlf(seed: int, steps: int, lr: float, hidden: list[int], episodes: int) -> dict[str, float]:
    import rlf

    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make("sac", f"gym:{ENV_ID}", overrides=[
            f"seed={seed}", "progress=false", "checkpoint_interval=0", f"run_dir='{run_dir}'",
            f"algo.actor_lr={lr}", f"algo.critic_lr={lr}", f"algo.alpha_lr={lr}", f"algo.hidden_sizes={hidden}",
            "algo.torch_threads=1"])
        start = time.perf_counter()
        algo.train(steps=steps)
        seconds = time.perf_counter() - start
        agent = algo.strategy.agent
        result = evaluate(lambda obs: agent.act({"agent": obs[None]}, explore=False).actions["agent"][0], episodes)
    return {"seconds": seconds, "steps_per_s": steps / seconds, "return": result}


def run_sb3(seed: int, steps: int, lr: float, hidden: list[int], episodes: int) -> dict[str, float]:
    from stable_baselines3 import SAC

    from rlf.nn import set_threads

    set_threads(1)
    env = gymnasium.make(ENV_ID)
    model = SAC("MlpPolicy", env, learning_rate=lr, buffer_size=1_000_000, learning_starts=100, batch_size=256,
                tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1, ent_coef="auto_1.0",
                policy_kwargs={"net_arch": list(hidden)}, seed=seed, device="cpu", verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - start
    result = evaluate(lambda obs: model.predict(obs, deterministic=True)[0], episodes)
    env.close()
    return {"seconds": seconds, "steps_per_s": steps / seconds, "return": result}


RUNNERS = {"rlf": run_rlf, "sb3": run_sb3}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=("rlf", "sb3", "both"), default="rlf")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--lr", type=float, default=3e-4, help="policy, critic and temperature learning rate")
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256], help="hidden widths of every MLP")
    parser.add_argument("--episodes", type=int, default=10, help="greedy evaluation episodes per run")
    args = parser.parse_args()
    impls = ("rlf", "sb3") if args.impl == "both" else (args.impl,)
    if "sb3" in impls:
        try:
            import stable_baselines3  # noqa: F401
        except ImportError:
            print("stable-baselines3 is not installed here; see this script's docstring for the one-line venv",
                  file=sys.stderr)
            return 2
    print(f"# {ENV_ID}, {args.steps} env steps, seeds {args.seeds}, lr {args.lr}, hidden {args.hidden}, "
          f"{args.episodes} greedy eval episodes, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'impl':<5} {'seed':>4} {'seconds':>8} {'steps/s':>8} {'return':>8}  >= {THRESHOLD:.0f}")
    results: dict[str, list[dict[str, float]]] = {impl: [] for impl in impls}
    for seed in args.seeds:
        for impl in impls:
            row = RUNNERS[impl](seed, args.steps, args.lr, args.hidden, args.episodes)
            results[impl].append(row)
            print(f"{impl:<5} {seed:>4} {row['seconds']:>8.1f} {row['steps_per_s']:>8.1f} {row['return']:>8.1f}  "
                  f"{'yes' if row['return'] >= THRESHOLD else 'no'}", flush=True)
    print("# summary (medians over seeds)")
    for impl, rows in results.items():
        passed = sum(r["return"] >= THRESHOLD for r in rows)
        print(f"{impl:<5} steps/s {statistics.median(r['steps_per_s'] for r in rows):.1f}  "
              f"return {statistics.median(r['return'] for r in rows):.1f}  seeds >= {THRESHOLD:.0f}: "
              f"{passed}/{len(rows)}")
    if len(results) == 2:
        ratio = statistics.median(r["steps_per_s"] for r in results["rlf"]) / statistics.median(
            r["steps_per_s"] for r in results["sb3"])
        print(f"rlf/sb3 steps/s ratio: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
