"""PPO on CartPole-v1 against Stable-Baselines3, two comparisons in one run (alternating rounds, each
run in a fresh process):

  defaults  SB3's default PPO hyperparameters on both (1 env, 2048 steps x 10 epochs x minibatch 64,
            lr 3e-4 constant, gamma 0.99, lambda 0.95, no entropy bonus, 64x64 tanh actor and critic);
  presets   each at its best CartPole preset: rl-baselines3-zoo's (8 envs, 32 steps, 20 epochs, batch
            256, linear lr 1e-3 and clip 0.2 schedules, 100k steps) vs plugins/ppo/src/rlf_plugin_ppo/presets/cartpole.toml.

    python benchmarks/peers/ppo_cartpole.py                     # both comparisons, 3 rounds
    python benchmarks/peers/ppo_cartpole.py --only defaults --rounds 1
    python benchmarks/peers/ppo_cartpole.py --quick             # a few thousand steps: does it run?

Run it with rlf's interpreter; SB3 runs in its own venv, made once with (nothing here installs anything):

    python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install -c constraints.txt torch==2.13.0 stable-baselines3

Reported: env steps per CPU second of the run's process (what a loaded machine distorts least: the
ratio's main figure there), env steps/s from building the model to the end of training (SB3: the vector env, ``PPO(...)``
and ``learn()``; rlf: ``train()``; torch imported before the timer on both sides), and the env steps after which the
mean return of the last 100 episodes first reached 475 ("-" if it never did within the budget).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    REPO,
    Case,
    UsageError,
    alternate,
    check_python,
    machine_line,
    main_guard,
    median,
    print_table,
    serve_worker,
)

PRESET = REPO / "plugins" / "ppo" / "src" / "rlf_plugin_ppo" / "presets" / "cartpole.toml"
SB3_VENV = "python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install -c constraints.txt torch==2.13.0 stable-baselines3"
TARGET, WINDOW = 475.0, 100

# SB3's PPO defaults, spelled out in rlf's keys (SB3: separate 64x64 tanh networks, Adam eps 1e-5,
# advantages normalised per minibatch; rlf normalises per rollout, the one difference left). SB3's
# vf_coef 0.5 weighs the plain mean squared error; rlf's value loss is already 0.5 * mean squared error,
# so the same weight is value_coef 1.0 (0.5 would halve it).
RLF_SB3_DEFAULTS = ["num_envs=1", "algo.rollout_steps=2048", "algo.minibatches=32", "algo.epochs=10", "algo.lr=0.0003",
                    "algo.anneal_lr=false", "algo.gamma=0.99", "algo.gae_lambda=0.95", "algo.clip_coef=0.2",
                    "algo.entropy_coef=0.0", "algo.value_coef=1.0", "algo.max_grad_norm=0.5",
                    "algo.hidden_sizes=[64, 64]", "algo.activation='tanh'"]


def first_reaching(episodes: list[tuple[int, float]]) -> int | None:
    """Env steps at which the mean of the last WINDOW episode returns first reached TARGET."""
    returns: list[float] = []
    for step, episode_return in episodes:
        returns.append(episode_return)
        if len(returns) >= WINDOW and sum(returns[-WINDOW:]) / WINDOW >= TARGET:
            return step
    return None


def sb3_worker(seed: int, threads: int, args: dict) -> dict:
    import torch

    torch.set_num_threads(threads)  # first, before SB3 can start a thread pool
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    counter = {"steps": 0}
    episodes: list[tuple[int, float]] = []

    class Count(gym.Wrapper):
        """Every env's steps on one counter; each finished episode as (total env steps, return)."""

        def reset(self, **kwargs):
            self.total = 0.0
            return self.env.reset(**kwargs)

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            counter["steps"] += 1
            self.total += float(reward)
            if terminated or truncated:
                episodes.append((counter["steps"], self.total))
            return obs, reward, terminated, truncated, info

    start, cpu = time.perf_counter(), time.process_time()  # model construction inside the timer, as rlf's train()
    if args["preset"] == "zoo":
        def linear(start: float):
            return lambda remaining: remaining * start

        env = make_vec_env("CartPole-v1", n_envs=8, seed=seed, wrapper_class=Count)
        model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, n_steps=32, batch_size=256,
                    gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0, learning_rate=linear(1e-3),
                    clip_range=linear(0.2))
    else:
        env = make_vec_env("CartPole-v1", n_envs=1, seed=seed, wrapper_class=Count)
        model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0)
    model.learn(total_timesteps=args["steps"])
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"steps_per_second": counter["steps"] / seconds, "seconds": seconds,
            "steps_per_cpu_second": counter["steps"] / cpu,
            "steps_to_475": first_reaching(episodes), "episodes": len(episodes)}


def rlf_overrides(seed: int, threads: int, args: dict, run_dir: str) -> list[str]:
    """rlf's settings for one run (on top of the preset file, if any), threads last so that they win."""
    settings = [] if args["preset"] == "rlf" else RLF_SB3_DEFAULTS
    return [*settings, f"steps={args['steps']}", f"seed={seed}", "progress=false", "checkpoint_interval=0",
            f"log_interval={args['steps']}", f"run_dir='{run_dir}'", f"algo.torch_threads={threads}"]


def rlf_worker(seed: int, threads: int, args: dict) -> dict:
    import torch  # noqa: F401  imported before the timer, as in the SB3 worker (rlf imports it lazily in train())

    import rlf

    with tempfile.TemporaryDirectory() as run_dir:
        preset = args.get("config", str(PRESET)) if args["preset"] == "rlf" else None
        algo = rlf.make("ppo", "gym:CartPole-v1", config_file=preset,
                        overrides=rlf_overrides(seed, threads, args, run_dir))
        start, cpu = time.perf_counter(), time.process_time()
        algo.train()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        with open(Path(run_dir) / "episodes.csv") as handle:
            episodes = [(int(float(row["env_step"])), float(row["return"])) for row in csv.DictReader(handle)]
    return {"steps_per_second": args["steps"] / seconds, "seconds": seconds,
            "steps_per_cpu_second": args["steps"] / cpu, "steps_to_475": first_reaching(episodes), "episodes": len(episodes)}


WORKERS = {"sb3": sb3_worker, "rlf": rlf_worker}


def reached(rows: list[dict]) -> str:
    values = [r["steps_to_475"] for r in rows]
    hit = [v for v in values if v is not None]
    shown = ", ".join("-" if v is None else f"{v / 1000:.0f}k" for v in values)
    return f"{shown} (median {median(hit) / 1000:.0f}k of {len(hit)})" if hit else shown


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("defaults", "presets"))
    parser.add_argument("--rounds", type=int, default=3, help="rounds = seeds (seed, seed+1, ...)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--defaults-steps", type=int, default=100_000)
    parser.add_argument("--zoo-steps", type=int, default=100_000, help="rl-zoo's n_timesteps for CartPole PPO")
    parser.add_argument("--preset-steps", type=int, default=None,
                        help="env steps of the rlf preset's runs (default: the preset's own run.steps)")
    parser.add_argument("--rlf-preset", type=Path, default=PRESET,
                        help="the rlf preset's config file (to compare a candidate with rl-zoo's)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every case (SB3 is fastest at 1)")
    parser.add_argument("--sb3-python", default=os.environ.get("SB3_PYTHON", "/tmp/sb3/bin/python"))
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run before it counts as failed")
    parser.add_argument("--ratio", choices=("wall", "cpu"), default="wall",
                        help="rlf/peer of env steps per wall second, or per CPU second of the run's process "
                             "(steadier on a loaded machine; with 1 torch thread)")
    parser.add_argument("--quick", action="store_true", help="4,096 steps per run, 1 round: a smoke run")
    args = parser.parse_args(argv)
    if not args.rlf_preset.is_file():
        raise UsageError(f"--rlf-preset {args.rlf_preset} is not a file; pass an rlf config file (TOML)")
    if args.preset_steps is None:
        try:
            with open(args.rlf_preset, "rb") as handle:
                args.preset_steps = int(tomllib.load(handle).get("run", {}).get("steps", 100_000))
        except tomllib.TOMLDecodeError as error:
            raise UsageError(f"--rlf-preset {args.rlf_preset} is not valid TOML ({error}); fix the file") from None
    if args.quick:
        args.defaults_steps = args.zoo_steps = args.preset_steps = 4096
        args.rounds = 1
    if min(args.rounds, args.defaults_steps, args.zoo_steps, args.preset_steps, args.threads) < 1:
        raise UsageError("--rounds, --threads and every --*-steps must be at least 1")
    return args


def comparisons(args: argparse.Namespace, peer_python: str) -> dict[str, list[Case]]:
    """The compared sides, by comparison: one thread count (``--threads``) for all of them."""
    sb3 = peer_python
    return {
        "defaults": [Case("SB3 PPO, SB3 defaults", sb3, "sb3", {"preset": "sb3", "steps": args.defaults_steps},
                          args.threads, peer=True),
                     Case("rlf PPO, SB3 defaults", sys.executable, "rlf",
                          {"preset": "sb3", "steps": args.defaults_steps}, args.threads)],
        "presets": [Case("SB3 PPO, rl-zoo preset", sb3, "sb3", {"preset": "zoo", "steps": args.zoo_steps},
                         args.threads, peer=True),
                    Case("rlf PPO, its CartPole preset", sys.executable, "rlf",
                         {"preset": "rlf", "steps": args.preset_steps, "config": str(args.rlf_preset.resolve())},
                         args.threads)],
    }


def main() -> None:
    if serve_worker(WORKERS):
        return
    args = arguments()
    sb3 = check_python(args.sb3_python, "stable_baselines3", SB3_VENV)
    print(machine_line())
    for name, cases in comparisons(args, sb3).items():
        if args.only and name != args.only:
            continue
        print(f"== PPO CartPole-v1, {name}: {args.rounds} rounds (seeds {args.seed}..{args.seed + args.rounds - 1}), "
              f"torch threads {args.threads}", flush=True)
        results = alternate(Path(__file__), cases, args.rounds, args.seed, args.timeout)
        print_table(f"PPO CartPole-v1, {name}", [
            ("env steps", lambda rows: f"{rows[0]['steps_per_second'] * rows[0]['seconds']:,.0f}"),
            ("env steps/s (median)", lambda rows: f"{median([r['steps_per_second'] for r in rows]):,.0f}"),
            ("env steps per CPU second (median)",
             lambda rows: f"{median([r['steps_per_cpu_second'] for r in rows]):,.0f}"),
            (f"steps until {WINDOW}-episode mean >= {TARGET:.0f}", reached),
        ], results, cases, "steps_per_second" if args.ratio == "wall" else "steps_per_cpu_second", machine_line())


if __name__ == "__main__":
    main_guard(main)
