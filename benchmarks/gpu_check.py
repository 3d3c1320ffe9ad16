"""The CUDA paths of the training stack, one short run each (see benchmarks/gpu.sh).

Each case trains through ``rlf.make(...).train()`` with ``device='cuda'`` and reports env steps/s over
the whole run (start-up included) and ``torch.cuda.max_memory_allocated`` during it. A case whose run
allocated nothing on the GPU failed: the plugin ignored ``run.device``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

CASES = [
    # (name, algorithm, env, env steps, settings)
    ("PPO Mario, 16 envs", "ppo", "mario", 16 * 128 * 4, ["num_envs=16", "algo.rollout_steps=128"]),
    ("DQN CartPole, its CartPole preset", "dqn", "gym:CartPole-v1", 20_000, ["config:plugins/dqn/src/rlf_plugin_dqn/presets/cartpole.toml"]),
    ("DQN Mario, 1 env", "dqn", "mario", 3_000,
     ["algo.min_replay_size=500", "algo.train_frequency=4", "algo.batch_size=32", "algo.buffer_size=20000"]),
    ("ICM Mario, 8 envs", "icm", "mario", 8 * 128 * 4, ["num_envs=8", "algo.rollout_steps=128"]),
]


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of every budget: does each path run?")
    parser.add_argument("--device", default="cuda", help="torch device to check (cuda, cuda:N)")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        fail("torch is not installed; install a CUDA build of torch and the rlf plugins (docker/Dockerfile.gpu)")
    if not torch.cuda.is_available():
        fail(f"no CUDA device: torch {torch.__version__} (CUDA build: {torch.version.cuda or 'none'}) sees no GPU; "
             "run this on a machine with an NVIDIA GPU and a CUDA build of torch (docker/Dockerfile.gpu)")
    import rlf

    registry = rlf.registry()
    device = torch.device(args.device)
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    failures = 0
    print("| case | env steps | env steps/s | peak GPU memory (MiB) | result |\n|---|---|---|---|---|")
    for name, algorithm, env, steps, settings in CASES:
        steps = max(256, steps // 10) if args.quick else steps
        missing = [n for n in (algorithm, env) if n not in registry.algorithms and n not in registry.environments
                   and not n.startswith("gym:")]
        if missing:
            failures += 1
            print(f"| {name} | | | | FAILED: not installed: {', '.join(missing)} |", flush=True)
            continue
        config = next((s.split(":", 1)[1] for s in settings if s.startswith("config:")), None)
        overrides = [s for s in settings if not s.startswith("config:")]
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        try:
            with tempfile.TemporaryDirectory() as run_dir:
                algo = rlf.make(algorithm, env, config_file=config, overrides=[
                    *overrides, f"steps={steps}", f"device='{args.device}'", "progress=false",
                    "checkpoint_interval=0", f"run_dir='{run_dir}'"])
                start = time.perf_counter()
                algo.train()
                torch.cuda.synchronize(device)
                seconds = time.perf_counter() - start
        except Exception as error:  # report every case, then fail the run
            failures += 1
            print(f"| {name} | {steps} | | | FAILED: {type(error).__name__}: {error} |", flush=True)
            continue
        peak = torch.cuda.max_memory_allocated(device) / 2**20
        result = "ok" if peak > 0 else "FAILED: nothing allocated on the GPU (run.device ignored?)"
        failures += peak <= 0
        print(f"| {name} | {steps} | {steps / seconds:,.0f} | {peak:,.0f} | {result} |", flush=True)
    if failures:
        print(f"{failures} case(s) failed", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
