"""Mario env throughput: rlf-plugin-mario's env against the bare emulator, then subprocess workers.

    python benchmarks/mario_env.py [--seconds 2] [--rounds 5] [--workers 2,4]

1. Side by side in one process, alternating rounds so both see the same machine load:
   * bare: gym-super-mario-bros' ``SuperMarioBrosEnv`` stepped 4 times per agent step (what the env
     emulates), no preprocessing, reset at episode ends;
   * env:  ``make_mario()`` with the standard preprocessing (skip 4 + max of the last two frames,
     luminance, 84x84 area resize, stack 4), same actions.
   Reported: agent steps/s by wall clock and per CPU-second of this process (robust to other load),
   their ratio env/bare (target >= 0.9), and emulated frames/s per core.
2. The preprocessing alone (us per agent step).
3. Gymnasium ``AsyncVectorEnv`` (shared memory, spawn: how rlf runs ``vector=async``) with N workers:
   total agent steps/s and frames/s.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

FRAMES_PER_STEP = 4


def bare_runner(actions):
    from rlf_plugin_mario import compat
    from rlf_plugin_mario.env import action_set

    compat.apply()  # the bare emulator needs the numpy-2 fixes as much as the env does
    from gym_super_mario_bros.smb_env import SuperMarioBrosEnv

    codes, _ = action_set("SIMPLE_MOVEMENT")
    emulator = SuperMarioBrosEnv(rom_mode="vanilla", target=(1, 1))
    emulator.reset()
    state = {"t": 0}

    def run(steps):
        t = state["t"]
        for _ in range(steps):
            code = codes[actions[t % len(actions)]]
            t += 1
            for _ in range(FRAMES_PER_STEP):
                _, _, done, _ = emulator.step(code)
                if done:
                    emulator.reset()
                    break
        state["t"] = t

    return run, emulator.close


def env_runner(actions):
    from rlf_plugin_mario.config import MarioConfig
    from rlf_plugin_mario.env import make_mario

    env = make_mario(MarioConfig(frame_skip=FRAMES_PER_STEP))
    env.reset(seed=0)
    state = {"t": 0}

    def run(steps):
        t = state["t"]
        for _ in range(steps):
            _, _, terminated, truncated, _ = env.step(actions[t % len(actions)])
            t += 1
            if terminated or truncated:
                env.reset()
        state["t"] = t

    return run, env.close


def side_by_side(seconds: float, rounds: int) -> dict[str, dict[str, float]]:
    actions = np.random.default_rng(0).integers(0, 7, size=100_000)
    runners = {"bare": bare_runner(actions), "env": env_runner(actions)}
    totals = {name: {"steps": 0, "wall": 0.0, "cpu": 0.0} for name in runners}
    chunk = 25
    for run, _ in runners.values():  # warm up
        run(chunk)
    for _ in range(rounds):
        for name, (run, _) in runners.items():
            wall0, cpu0 = time.perf_counter(), time.process_time()
            steps = 0
            while time.perf_counter() - wall0 < seconds:
                run(chunk)
                steps += chunk
            totals[name]["steps"] += steps
            totals[name]["wall"] += time.perf_counter() - wall0
            totals[name]["cpu"] += time.process_time() - cpu0
    for _, close in runners.values():
        close()
    return {name: {"wall_sps": t["steps"] / t["wall"], "cpu_sps": t["steps"] / t["cpu"]} for name, t in totals.items()}


def preprocessing_cost(repeats: int = 300) -> dict[str, float]:
    from rlf_plugin_mario.preprocess import FramePipeline

    frame = np.random.default_rng(0).integers(0, 256, (240, 256, 4), dtype=np.uint8)
    previous = frame.copy()
    out = {}
    for interpolation in ("area", "nearest"):
        pipeline = FramePipeline(240, 256, 4, (2, 1, 0), interpolation=interpolation)
        target = np.empty(pipeline.out_shape, dtype=np.uint8)
        stack = np.zeros((4, 84, 84), dtype=np.uint8)
        best = float("inf")
        for _ in range(5):
            start = time.process_time()
            for _ in range(repeats):
                pooled = np.maximum(previous, frame, out=previous)
                pipeline(pooled, target)
                stack[:-1] = stack[1:]
                stack[-1:] = target
                stack.copy()
            best = min(best, (time.process_time() - start) / repeats)
        out[interpolation] = best * 1e6
    return out


def _cpu_seconds(pids: list[int]) -> float | None:
    """User + system CPU time of these processes (Linux /proc), None where unavailable."""
    total = 0.0
    try:
        for pid in pids:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return total


def vector_throughput(workers: int, seconds: float) -> tuple[float, float | None]:
    """(agent steps/s, agent steps per CPU-second of the workers and this process)."""
    import gymnasium
    from gymnasium.vector import AutoresetMode
    from rlf_plugin_mario.config import MarioConfig
    from rlf_plugin_mario.env import make_mario

    from rlf.envs import EnvFactory

    factory = EnvFactory(make_mario, MarioConfig(frame_skip=FRAMES_PER_STEP))
    vector = gymnasium.vector.AsyncVectorEnv([factory] * workers, shared_memory=True, context="spawn",
                                             autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        vector.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(20):  # warm up
            vector.step(rng.integers(0, 7, size=workers))
        pids = [process.pid for process in vector.processes]
        cpu_start, main_start = _cpu_seconds(pids), time.process_time()
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            vector.step(rng.integers(0, 7, size=workers))
            steps += workers
        wall = time.perf_counter() - start
        cpu_end, main_cpu = _cpu_seconds(pids), time.process_time() - main_start
        per_cpu = None if cpu_start is None or cpu_end is None else steps / (cpu_end - cpu_start + main_cpu)
        return steps / wall, per_cpu
    finally:
        vector.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per round and per side")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of bare and env")
    parser.add_argument("--workers", default="2,4", help="subprocess worker counts ('' to skip)")
    parser.add_argument("--vector-seconds", type=float, default=8.0, help="seconds per worker count")
    args = parser.parse_args()

    print(f"cores: {os.cpu_count()}, load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"numpy {np.__version__}")
    result = side_by_side(args.seconds, args.rounds)
    print(f"\n{FRAMES_PER_STEP} emulated frames per agent step, {args.rounds} alternating rounds of {args.seconds:g} s")
    print(f"{'':28}{'steps/s (wall)':>16}{'steps/s (CPU)':>16}{'frames/s/core':>16}")
    for name, label in (("bare", "bare emulator"), ("env", "mario env (preprocessed)")):
        r = result[name]
        print(f"{label:28}{r['wall_sps']:16.1f}{r['cpu_sps']:16.1f}{r['cpu_sps'] * FRAMES_PER_STEP:16.1f}")
    wall_ratio = result["env"]["wall_sps"] / result["bare"]["wall_sps"]
    cpu_ratio = result["env"]["cpu_sps"] / result["bare"]["cpu_sps"]
    print(f"{'ratio env / bare':28}{wall_ratio:16.3f}{cpu_ratio:16.3f}   (target >= 0.9)")

    cost = preprocessing_cost()
    print(f"\npreprocessing per agent step (max-pool, luminance, resize, stack): "
          f"area {cost['area']:.0f} us, nearest {cost['nearest']:.0f} us "
          f"(emulating {FRAMES_PER_STEP} frames: {1e6 / result['bare']['cpu_sps']:.0f} us)")

    counts = [int(n) for n in args.workers.split(",") if n.strip()]
    if counts:
        print(f"\nAsyncVectorEnv (shared memory, spawn), {args.vector_seconds:g} s each")
        print(f"{'workers':>8}{'steps/s':>12}{'frames/s':>12}{'per worker':>12}{'steps/CPU-s':>14}")
        for n in counts:
            sps, per_cpu = vector_throughput(n, args.vector_seconds)
            cpu = "n/a" if per_cpu is None else f"{per_cpu:.1f}"
            print(f"{n:8d}{sps:12.1f}{sps * FRAMES_PER_STEP:12.1f}{sps / n:12.1f}{cpu:>14}")
        print("steps/CPU-s: agent steps per CPU-second spent by the workers and the stepping process together "
              "(independent of other load); with a free core per worker, steps/s approaches workers x this")


if __name__ == "__main__":
    main()
