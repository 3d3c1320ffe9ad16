"""PPO on Super Mario Bros 1-1 against Stable-Baselines3, over a whole run, start-up included: 8
subprocess envs, identical hyperparameters and the identical env on both sides, alternating rounds,
each run in a fresh process.

    python benchmarks/peers/ppo_mario.py                        # 8,192 env steps, 3 rounds, 1 torch thread
    python benchmarks/peers/ppo_mario.py --threads 2            # both sides at 2 torch threads
    python benchmarks/peers/ppo_mario.py --steps 16384 --rounds 3
    python benchmarks/peers/ppo_mario.py --quick                # 2,048 steps, 1 round: does it run?

Run it with rlf's interpreter; SB3 runs in its own venv, which needs the Mario env importable (the
same ``rlf_plugin_mario`` env on both sides: frame skip 4 with max-pool, grayscale 84x84, 4 stacked
frames, SIMPLE_MOVEMENT, the game's reward). Made once with (nothing here installs anything):

    python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install -c constraints.txt torch==2.13.0 stable-baselines3 \\
        . plugins/mario

Hyperparameters (both): 128 steps per env per rollout (1,024 samples), 4 epochs, minibatch 256, Adam
lr 2.5e-4 constant (eps 1e-5), gamma 0.99, lambda 0.95, clip 0.2, entropy 0.01, value-loss weight 0.5 x
squared error (SB3's ``vf_coef=0.5``, rlf's ``algo.value_coef=1.0``), grad norm 0.5, Nature CNN (512
features) shared by actor and critic, pixels / 255. SB3's envs: ``SubprocVecEnv`` (forkserver, as its
default on Linux); rlf's: ``vector=async`` (its default for Mario). Torch threads: ``--threads`` (default
1) on both sides, set explicitly in each process (SB3: ``torch.set_num_threads``; rlf:
``algo.torch_threads``) and shown in every row.

A third case runs rlf with ``algo.overlap_update=true`` (the same hyperparameters; each update runs in a
second Python thread while the envs collect the next rollout, acted by the weights from before that
update). Each thread computes on 1 torch thread, so during an update two threads may compute at once
where SB3's loop has one; that overlap, which SB3's design has no setting for, is the point of the row.

Reported per case (medians): **whole run** = env steps / seconds from creating the child process to
its exit (interpreter start, imports, env workers, model, training, teardown: what a user waits for);
training only = env steps / seconds of ``learn()`` (SB3: from building the vector env to the end of
``learn``) or ``train()`` (rlf; both imports done before that timer); main-process CPU seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
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

SB3_VENV = ("python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install -c constraints.txt torch==2.13.0 "
            "stable-baselines3 . plugins/mario")
NUM_ENVS, ROLLOUT, EPOCHS, BATCH = 8, 128, 4, 256
RLF_SETTINGS = [f"num_envs={NUM_ENVS}", "vector='async'", f"algo.rollout_steps={ROLLOUT}", f"algo.epochs={EPOCHS}",
                f"algo.minibatches={NUM_ENVS * ROLLOUT // BATCH}", "algo.lr=0.00025", "algo.anneal_lr=false",
                "algo.adam_eps=1e-05", "algo.gamma=0.99", "algo.gae_lambda=0.95", "algo.clip_coef=0.2",
                # rlf's value loss is already 0.5 * mean squared error, SB3's is the plain mean squared error:
                # value_coef 1.0 here is SB3's vf_coef 0.5, the same weight
                "algo.value_clip=0.0", "algo.entropy_coef=0.01", "algo.value_coef=1.0", "algo.max_grad_norm=0.5",
                "algo.network='cnn'", "algo.cnn_features=512"]


def rlf_overrides(seed: int, threads: int, args: dict, run_dir: str) -> list[str]:
    """rlf's settings for one run; the thread count is explicit, never rlf's own plan (algo.torch_threads=0
    would learn on every core while SB3 learns on ``threads``)."""
    return [*RLF_SETTINGS, f"steps={args['steps']}", f"seed={seed}", "progress=false", "checkpoint_interval=0",
            f"run_dir='{run_dir}/run'", f"algo.torch_threads={threads}",
            f"algo.overlap_update={str(bool(args.get('overlap'))).lower()}"]


def sb3_worker(seed: int, threads: int, args: dict) -> dict:
    import torch

    torch.set_num_threads(threads)  # first, before SB3 or the env can start a thread pool
    from rlf_plugin_mario.config import MarioConfig
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import SubprocVecEnv

    start, cpu = time.perf_counter(), time.process_time()
    env = SubprocVecEnv([_Builder(MarioConfig()) for _ in range(NUM_ENVS)])
    env.seed(seed)
    model = PPO("CnnPolicy", env, n_steps=ROLLOUT, batch_size=BATCH, n_epochs=EPOCHS, learning_rate=2.5e-4,
                gamma=0.99, gae_lambda=0.95, clip_range=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
                seed=seed, device="cpu", verbose=0)
    model.learn(total_timesteps=args["steps"])
    steps = model.num_timesteps
    env.close()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"steps": steps, "train_seconds": seconds, "cpu_seconds": cpu}


class _Builder:
    """A picklable env builder for SubprocVecEnv (a lambda would need cloudpickle to reach the worker)."""

    def __init__(self, config):
        self.config = config

    def __call__(self):
        from rlf_plugin_mario.env import make_mario

        return make_mario(self.config)


def rlf_worker(seed: int, threads: int, args: dict) -> dict:
    import rlf

    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make("ppo", "mario", overrides=rlf_overrides(seed, threads, args, run_dir))
        start, cpu = time.perf_counter(), time.process_time()
        algo.train()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"steps": int(algo.counters["env_steps"]), "train_seconds": seconds, "cpu_seconds": cpu}


WORKERS = {"sb3": sb3_worker, "rlf": rlf_worker}


def column(key: str, fmt: str):
    def render(rows: list[dict]) -> str:
        return fmt.format(median([r[key] for r in rows]))
    return render


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8192, help="env steps per run (default 8192)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sb3-python", default="/tmp/sb3/bin/python")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of both sides (default 1)")
    parser.add_argument("--quick", action="store_true", help="2,048 steps, 1 round")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one run may take")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.rounds = 2048, 1
    if args.steps < NUM_ENVS * ROLLOUT or args.rounds < 1:
        raise UsageError(f"--steps must be at least {NUM_ENVS * ROLLOUT} (one rollout) and --rounds at least 1")
    if args.threads < 1:
        raise UsageError("--threads must be at least 1")
    return args


def comparisons(args: argparse.Namespace, peer_python: str) -> dict[str, list[Case]]:
    """The compared sides, by comparison: one thread count for all of them."""
    return {"whole run": [
        Case("SB3 PPO", peer_python, "sb3", {"steps": args.steps}, threads=args.threads, peer=True),
        Case("rlf PPO", sys.executable, "rlf", {"steps": args.steps}, threads=args.threads),
        Case("rlf PPO, algo.overlap_update", sys.executable, "rlf", {"steps": args.steps, "overlap": True},
             threads=args.threads)]}


def main() -> None:
    if serve_worker(WORKERS):
        return
    args = arguments()
    sb3 = check_python(args.sb3_python, "stable_baselines3, rlf_plugin_mario", SB3_VENV)
    at_start = machine_line()
    print(at_start)
    print(f"PPO Mario 1-1, SB3 {_sb3_version(sb3)} vs rlf, {NUM_ENVS} subprocess envs, {ROLLOUT} steps x {EPOCHS} "
          f"epochs x batch {BATCH}, {args.steps:,} env steps per run, {args.rounds} round(s) alternating, "
          f"torch threads {args.threads} on both sides")
    cases = comparisons(args, sb3)["whole run"]
    results = alternate(Path(__file__), cases, args.rounds, args.seed, args.timeout)
    for rows in results.values():
        for row in rows:
            row["whole_run_steps_per_second"] = row["steps"] / row["process_seconds"]
            row["train_steps_per_second"] = row["steps"] / row["train_seconds"]
            row["startup_and_teardown_seconds"] = row["process_seconds"] - row["train_seconds"]
    print_table("whole run (process creation to exit)",
                [("env steps/s, whole run", column("whole_run_steps_per_second", "{:.1f}")),
                 ("process seconds", column("process_seconds", "{:.1f}")),
                 ("env steps/s, training only", column("train_steps_per_second", "{:.1f}")),
                 ("outside training, s", column("startup_and_teardown_seconds", "{:.1f}")),
                 ("main-process CPU s (training)", column("cpu_seconds", "{:.1f}"))],
                results, cases, "whole_run_steps_per_second",
                f"medians of {args.rounds}; rlf/peer = whole-run env steps/s over SB3's (target >= 1.3x); "
                + at_start)
    peer = median([r["train_steps_per_second"] for r in results[cases[0].name]])
    for case in cases[1:]:
        ours = median([r["train_steps_per_second"] for r in results[case.name]])
        print(f"training only, {case.name} / SB3: {ours / peer:.2f}x")


def _sb3_version(python: str) -> str:
    import subprocess

    done = subprocess.run([python, "-c", "import stable_baselines3; print(stable_baselines3.__version__)"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return done.stdout.strip() or "?"


if __name__ == "__main__":
    main_guard(main)
