"""What real checkpoints look like, to size the limits of rlf.storage.checkpoint.Limits (hostile-file caps).

    python benchmarks/checkpoint_sizes.py                      # PPO and DQN on Mario (rlf-plugin-mario)
    python benchmarks/checkpoint_sizes.py --env gym:CartPole-v1 --dqn-buffer 2000

Trains PPO and DQN for a short budget (DQN until its replay buffer is full), writes each checkpoint
and prints, side by side: file size, members, the largest array, structure.json size and nesting
depth, and the time to read it back with the limits on. DQN's size scales with the replay buffer, so
the bytes per stored transition are printed too, with the size that the default buffer (50,000
transitions) implies.
"""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

import rlf
from rlf.storage import checkpoint as ckpt


def measure(path: Path) -> dict[str, float]:
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        structure = json.loads(archive.read("structure.json"))
    start = time.perf_counter()
    ckpt.load(path)
    return {"file MB": path.stat().st_size / 1e6, "members": len(infos),
            "largest array MB": max((i.file_size for i in infos if i.filename != "structure.json"), default=0) / 1e6,
            "structure.json kB": next(i.file_size for i in infos if i.filename == "structure.json") / 1e3,
            "json depth": ckpt._depth(structure, 10_000), "load s": time.perf_counter() - start}


def _nbytes(tree) -> int:
    if isinstance(tree, np.ndarray):
        return tree.nbytes
    if isinstance(tree, dict):
        return sum(_nbytes(v) for v in tree.values())
    if isinstance(tree, list | tuple):
        return sum(_nbytes(v) for v in tree)
    return 0


def run(algorithm: str, env: str, steps: int, settings: list[str]) -> Path:
    run_dir = Path(tempfile.mkdtemp(prefix=f"rlf-ckpt-{algorithm}-"))
    atexit.register(shutil.rmtree, run_dir, True)
    algo = rlf.make(algorithm, env, overrides=[f"steps={steps}", "progress=false", f"run_dir='{run_dir}'",
                                               "checkpoint_interval=0", *settings])
    algo.train()
    return run_dir / "checkpoint.rlf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="mario")
    parser.add_argument("--ppo-steps", type=int, default=256)
    parser.add_argument("--dqn-buffer", type=int, default=2000)
    args = parser.parse_args()
    paths = {
        "ppo": run("ppo", args.env, args.ppo_steps, ["num_envs=2", "vector=sync", "algo.rollout_steps=128"]),
        "dqn": run("dqn", args.env, args.dqn_buffer + 100,
                   [f"algo.buffer_size={args.dqn_buffer}", f"algo.min_replay_size={args.dqn_buffer}", "vector=sync"]),
    }
    rows = {name: measure(path) for name, path in paths.items()}
    keys = list(rows["ppo"])
    print(f"{'':>18} " + " ".join(f"{k:>18}" for k in keys))
    for name, row in rows.items():
        print(f"{name + ' on ' + args.env:>18} " + " ".join(f"{row[k]:>18.3f}" for k in keys))
    state = ckpt.load(paths["dqn"])
    replay = _nbytes(state["strategy"]["learner"].get("replay"))
    rest = paths["dqn"].stat().st_size - replay
    per = replay / args.dqn_buffer
    print(f"dqn: replay {replay / 1e6:.1f} MB = {per:,.0f} bytes per stored transition, the rest {rest / 1e6:.1f} MB "
          f"-> with the default 50,000-transition buffer a checkpoint of about {(rest + per * 50_000) / 1e9:.2f} GB")
    limits = ckpt.Limits()
    print(f"limits: total {limits.max_total_bytes / 2**30:.0f} GiB, array {limits.max_array_bytes / 2**30:.0f} GiB, "
          f"members {limits.max_members:,}, json {limits.max_json_bytes >> 20} MiB / depth {limits.max_json_depth}")


if __name__ == "__main__":
    main()
