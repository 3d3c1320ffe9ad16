"""PPO on continuous actions: rlf-plugin-ppo's Gaussian policy against Stable-Baselines3's PPO at identical
settings (the preset rlf ships for the env, which is rl-baselines3-zoo's), for speed and for the return
both reach.

Per seed and implementation: training wall time, env steps/s and env steps per CPU second over the whole
run (collection and updates together; SB3: building the model and ``learn()``, rlf: ``train()``, which
builds its agent; torch imported before the timer on both sides), and the mean greedy return over
``--episodes`` evaluation episodes on fixed evaluation seeds (the same episodes for both; with observation
normalisation each side applies its own statistics). Every run is a fresh process and the order flips each
round (rlf seed 0, sb3 seed 0, sb3 seed 1, rlf seed 1, ...) so load on the machine hits both alike; the
summary gives medians and the rlf/sb3 ratios.

    python benchmarks/ppo_continuous.py --impl both                          # Pendulum-v1, 3 seeds x 100k
    python benchmarks/ppo_continuous.py --impl both --env HalfCheetah-v5 --steps 1000000

Run it with rlf's interpreter (MuJoCo tasks need rlf's ``mujoco`` extra). This script installs nothing.
SB3 lives in its own venv, made once with:

    python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install -c constraints.txt torch==2.13.0 stable-baselines3 \\
        'gymnasium[mujoco]'

The settings of both sides are read from rlf's preset file for the env (plugins/ppo/.../presets/), and
mapped to SB3's arguments here: ``batch_size = rollout_steps * num_envs / minibatches``,
``vf_coef = value_coef / 2`` (rlf's value loss is half the squared error), ``normalize_*`` as
``VecNormalize(norm_obs, norm_reward, clip 10, gamma)``, ``ortho_init``, ``log_std_init``, ``activation``
and ``hidden_sizes`` as ``policy_kwargs`` (separate actor and critic MLPs on both sides), a constant
learning rate. Both sides: torch on ``--threads`` threads, CPU, envs stepped in the process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from _common import (  # noqa: E402
    Case,
    UsageError,
    alternate,
    check_python,
    evaluate_policy,
    machine_line,
    main_guard,
    print_table,
    serve_worker,
)

SB3_VENV = ("python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install -c constraints.txt torch==2.13.0 "
            "stable-baselines3 'gymnasium[mujoco]'")
PRESETS = Path(__file__).resolve().parents[1] / "plugins" / "ppo" / "src" / "rlf_plugin_ppo" / "presets"
PRESET_FILES = {"Pendulum-v1": "pendulum.toml", "HalfCheetah-v5": "halfcheetah.toml", "Hopper-v5": "hopper.toml",
                "Walker2d-v5": "walker2d.toml"}
EVAL_SEED = 10_000


def preset(env_id: str) -> dict:
    """rlf's preset for ``env_id``, with PPOConfig's defaults for what it leaves out."""
    text = tomllib.loads((PRESETS / PRESET_FILES[env_id]).read_text())
    algo = {"ortho_init": True, "log_std_init": 0.0, "activation": "tanh", "hidden_sizes": [64, 64],
            "normalize_obs": False, "normalize_reward": False, "max_grad_norm": 0.5, "normalize_clip": 10.0,
            **text["algo"]}
    return {"num_envs": text["run"]["num_envs"], **algo}


def evaluate(policy: Callable, env_id: str, episodes: int) -> float:
    """Mean return of ``policy`` (one raw observation -> one action) over fixed evaluation seeds."""
    return evaluate_policy(policy, env_id, episodes, EVAL_SEED)


def run_rlf(seed: int, threads: int, args: dict) -> dict[str, float]:
    import torch  # noqa: F401  imported before the timer, as in the SB3 worker (rlf imports it lazily in train())

    import rlf

    env_id = args["env"]
    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make("ppo", f"gym:{env_id}", preset=True, overrides=[
            f"seed={seed}", "progress=false", "checkpoint_interval=0", f"run_dir='{run_dir}'", "vector='sync'",
            f"algo.torch_threads={threads}", f"steps={args['steps']}"])
        start, cpu = time.perf_counter(), time.process_time()
        algo.train()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        agent = algo.strategy.agent
        result = evaluate(lambda obs: agent.act({"agent": obs[None]}, explore=False).actions["agent"][0],
                          env_id, args["episodes"])
    return {"seconds": seconds, "steps_per_s": args["steps"] / seconds, "steps_per_cpu_s": args["steps"] / cpu,
            "return": result}


def run_sb3(seed: int, threads: int, args: dict) -> dict[str, float]:
    import torch

    torch.set_num_threads(threads)  # first, before SB3 can start a thread pool
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    p = preset(args["env"])
    start, cpu = time.perf_counter(), time.process_time()  # model construction inside the timer, as rlf's train()
    env = make_vec_env(args["env"], n_envs=p["num_envs"], seed=seed)
    if p["normalize_obs"] or p["normalize_reward"]:
        env = VecNormalize(env, norm_obs=p["normalize_obs"], norm_reward=p["normalize_reward"],
                           clip_obs=p["normalize_clip"], clip_reward=p["normalize_clip"], gamma=p["gamma"])
    batch = p["rollout_steps"] * p["num_envs"] // p["minibatches"]
    hidden = list(p["hidden_sizes"])
    model = PPO("MlpPolicy", env, learning_rate=p["lr"], n_steps=p["rollout_steps"], batch_size=batch,
                n_epochs=p["epochs"], gamma=p["gamma"], gae_lambda=p["gae_lambda"], clip_range=p["clip_coef"],
                ent_coef=p["entropy_coef"], vf_coef=p["value_coef"] / 2, max_grad_norm=p["max_grad_norm"],
                policy_kwargs={"net_arch": {"pi": hidden, "vf": hidden}, "ortho_init": p["ortho_init"],
                               "log_std_init": p["log_std_init"],
                               "activation_fn": torch.nn.ReLU if p["activation"] == "relu" else torch.nn.Tanh},
                seed=seed, device="cpu", verbose=0)
    model.learn(total_timesteps=args["steps"])
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    normalizer = env if isinstance(env, VecNormalize) else None

    def policy(obs):
        if normalizer is not None and p["normalize_obs"]:
            obs = normalizer.normalize_obs(obs)
        return model.predict(obs, deterministic=True)[0]

    result = evaluate(policy, args["env"], args["episodes"])
    env.close()
    return {"seconds": seconds, "steps_per_s": args["steps"] / seconds, "steps_per_cpu_s": args["steps"] / cpu,
            "return": result}


WORKERS = {"rlf": run_rlf, "sb3": run_sb3}


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=("rlf", "sb3", "both"), default="rlf")
    parser.add_argument("--env", choices=sorted(PRESET_FILES), default="Pendulum-v1")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=10, help="greedy evaluation episodes per run")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of both sides (default 1)")
    parser.add_argument("--sb3-python", default="/tmp/sb3/bin/python", help="SB3's interpreter (--impl sb3/both)")
    parser.add_argument("--timeout", type=float, default=4 * 3600.0, help="seconds one run may take")
    args = parser.parse_args(argv)
    if min(args.steps, args.episodes, args.threads) < 1 or not args.seeds:
        raise UsageError("--steps, --episodes and --threads must be at least 1, with at least one seed")
    if args.seeds != list(range(args.seeds[0], args.seeds[0] + len(args.seeds))):
        raise UsageError("--seeds must be consecutive (rounds run seeds s, s+1, ...), e.g. --seeds 0 1 2")
    return args


def main() -> None:
    if serve_worker(WORKERS):
        return
    args = arguments()
    sb3 = check_python(args.sb3_python, "stable_baselines3", SB3_VENV) if args.impl != "rlf" else ""
    common = {"steps": args.steps, "env": args.env, "episodes": args.episodes}
    every = {"rlf": Case("rlf", sys.executable, "rlf", common, args.threads),
             "sb3": Case("sb3", sb3, "sb3", common, args.threads, peer=True)}
    cases = [every[impl] for impl in (("rlf", "sb3") if args.impl == "both" else (args.impl,))]
    print(f"# PPO {args.env}, rlf's preset on both sides ({PRESET_FILES[args.env]}), {args.steps:,} env steps, "
          f"seeds {args.seeds}, {args.episodes} greedy eval episodes, torch threads {args.threads} on both sides")
    print(f"# {machine_line()}")
    results = alternate(Path(__file__), cases, len(args.seeds), args.seeds[0], args.timeout)

    def med(key: str, fmt: str):
        return lambda rows: fmt.format(statistics.median(r[key] for r in rows))

    print_table(f"PPO (Gaussian) {args.env}, {args.steps:,} env steps", [
        ("env steps/s", med("steps_per_s", "{:.1f}")), ("env steps per CPU s", med("steps_per_cpu_s", "{:.1f}")),
        ("greedy return (median)", med("return", "{:.1f}")),
        ("greedy returns", lambda rows: " ".join(f"{r['return']:.0f}" for r in rows))],
        results, cases, "steps_per_s",
        f"medians over seeds {args.seeds}; rlf/peer = env steps/s (wall) over SB3's; {machine_line()}")
    if len(cases) == 2:
        for key, label in (("steps_per_s", "steps/s"), ("steps_per_cpu_s", "steps per CPU s")):
            ratio = statistics.median(r[key] for r in results["rlf"]) / statistics.median(
                r[key] for r in results["sb3"])
            print(f"rlf/sb3 {label} ratio: {ratio:.2f}")


if __name__ == "__main__":
    main_guard(main)
