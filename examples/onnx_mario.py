"""Play Super Mario Bros with a policy exported by `rlf export RUN mario.onnx`, without rlf or torch.

    pip install onnxruntime gym-super-mario-bros==7.4.0 nes-py==8.2.1
    python examples/onnx_mario.py mario.onnx                  # one greedy episode of World 1-1
    python examples/onnx_mario.py mario.onnx --sample --episodes 5 --seed 3

The observation must be made as rlf's Mario environment makes it with its default settings (frame skip 4
with the max of the last two frames, BT.601 luminance, area resize, a stack of 4 frames, oldest first,
uint8 channel-first); the frame size comes from the exported file. Episodes end at the flag or at the
first death, as in training. Prints one line per episode: furthest x, flag, agent steps.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys

import numpy as np
import onnxruntime

LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)  # of red, green, blue
FRAME_SKIP, STACK = 4, 4


def area_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in): output pixel i averages the input interval [i * s, (i + 1) * s), s = n_in / n_out."""
    edges = np.arange(n_out + 1) * (n_in / n_out)
    pixel = np.arange(n_in)[None, :]
    covered = np.clip(np.minimum(edges[1:, None], pixel + 1) - np.maximum(edges[:-1, None], pixel), 0, None)
    covered[covered < 1e-6 * (n_in / n_out)] = 0.0
    return (covered / covered.sum(axis=1, keepdims=True)).astype(np.float32)


class Frames:
    """Screens to the stacked, resized luminance frames the policy was trained on."""

    def __init__(self, size: int):
        self.rows, self.cols = area_matrix(240, size), area_matrix(256, size).T
        self.stack = np.zeros((STACK, size, size), dtype=np.uint8)

    def frame(self, rgb: np.ndarray) -> np.ndarray:
        gray = rgb.astype(np.float32) @ LUMA
        return (self.rows @ gray @ self.cols + 0.5).astype(np.uint8)  # round half up

    def reset(self, rgb: np.ndarray) -> np.ndarray:
        self.stack[:] = self.frame(rgb)
        return self.stack[None].copy()

    def push(self, rgb: np.ndarray) -> np.ndarray:
        self.stack[:-1] = self.stack[1:]
        self.stack[-1] = self.frame(rgb)
        return self.stack[None].copy()


def quiet_gym() -> None:
    with contextlib.redirect_stderr(io.StringIO()):  # gym 0.26's notice about numpy 2, on every import
        import gym  # noqa: F401


def mario(stage: str):
    """The emulator for one level, with the numpy-2 fixes nes-py 8.2.1 and gym-super-mario-bros 7.4.0 need
    (their uint8 arithmetic overflows under NEP 50): header sizes and Mario's x as Python ints."""
    quiet_gym()
    from gym_super_mario_bros.smb_env import SuperMarioBrosEnv
    from nes_py._rom import ROM

    ROM.prg_rom_size = property(lambda self: 16 * int(self.header[4]))
    ROM.chr_rom_size = property(lambda self: 8 * int(self.header[5]))
    ROM.prg_ram_size = property(lambda self: 8 * (int(self.header[8]) or 1))
    SuperMarioBrosEnv._x_position = property(lambda self: int(self.ram[0x6D]) * 0x100 + int(self.ram[0x86]))
    SuperMarioBrosEnv._left_x_position = property(lambda self: (int(self.ram[0x86]) - int(self.ram[0x071C])) % 256)
    world, level = (int(part) for part in stage.split("-"))
    return SuperMarioBrosEnv(rom_mode="vanilla", target=(world, level))


def buttons(meanings: list[list[str]]) -> list[int]:
    from nes_py.wrappers import JoypadSpace

    return [sum(JoypadSpace._button_map[b] for b in combo) for combo in meanings]


def play(session, about, env, codes, sample: bool, rng, noops: int, max_steps: int) -> dict:
    agent = next(iter(about["agents"].values()))
    _, size, _ = agent["observation"]["shape"]
    frames = Frames(size)
    env.reset()
    for _ in range(noops):
        env.step(0)
    obs = frames.reset(env.screen)
    furthest, steps, info = 0, 0, {}
    while steps < max_steps:
        action, scores = session.run([agent["action"], *agent["outputs"].values()], {agent["input"]: obs})
        choice = int(action[0])
        if sample:  # the categorical head: softmax(logits)
            p = np.exp(scores[0] - scores[0].max())
            choice = int(rng.choice(len(p), p=p / p.sum()))
        pooled, done = None, False
        for i in range(FRAME_SKIP):
            _, _, done, info = env.step(codes[choice])
            if done:
                break
            if i == FRAME_SKIP - 2:
                pooled = env.screen.copy()
        screen = env.screen if pooled is None or done else np.maximum(pooled, env.screen)
        obs = frames.push(screen)
        steps += 1
        furthest = max(furthest, int(info["x_pos"]))
        if done:
            break
    return {"x_pos_max": furthest, "flag": bool(info.get("flag_get", False)), "steps": steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", help="the .onnx file rlf export wrote from a Mario run")
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--sample", action="store_true", help="sample the policy instead of its greedy action")
    parser.add_argument("--seed", type=int, default=0, help="seeds the no-op starts and the sampling")
    parser.add_argument("--noop-max", type=int, default=0, help="random 0..N no-op frames after each reset")
    parser.add_argument("--stage", default="1-1")
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--actions", default="SIMPLE_MOVEMENT",
                        help="the action set the run trained with (env.actions): SIMPLE_MOVEMENT, COMPLEX_MOVEMENT, ...")
    args = parser.parse_args(argv)
    session = onnxruntime.InferenceSession(args.policy, providers=["CPUExecutionProvider"])
    about = json.loads(session.get_modelmeta().custom_metadata_map["rlf"])
    if about.get("env") != "mario":
        print(f"{args.policy} was exported from a {about.get('env')!r} run, not a Mario one", file=sys.stderr)
        return 2
    quiet_gym()
    from gym_super_mario_bros import actions

    codes = buttons(getattr(actions, args.actions))
    n_actions = next(iter(about["agents"].values()))["action_space"]["n"]
    if len(codes) != n_actions:
        print(f"the policy has {n_actions} actions and {args.actions} {len(codes)}: pass --actions as trained",
              file=sys.stderr)
        return 2
    env, rng = mario(args.stage), np.random.default_rng(args.seed)
    try:
        for episode in range(args.episodes):
            noops = int(rng.integers(0, args.noop_max + 1)) if args.noop_max else 0
            result = play(session, about, env, codes, args.sample, rng, noops, args.max_steps)
            print(f"episode {episode}: x {result['x_pos_max']}, flag {result['flag']}, {result['steps']} steps")
    finally:
        env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
