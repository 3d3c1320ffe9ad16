"""The counting collector of ``third_party_plugin``: the core's in-process envs behind a wrapper that
counts what the strategy asks of it and writes that down at close."""

from __future__ import annotations

import json

import rlf


class CountingCollector(rlf.VectorEnv):
    def __init__(self, env_name: str, factory: rlf.EnvFactory, num_envs: int, config) -> None:
        self.inner = rlf.make_vector_env(env_name, factory, num_envs, subprocess=False)
        self.spec = self.inner.spec
        self.num_envs = num_envs
        self.config = config
        self.steps = 0
        self.resets: list[int | None] = []

    def reset(self, seed: int | None = None):
        seed = None if seed is None else seed + self.config.seed_offset
        self.resets.append(seed)
        return self.inner.reset(seed)

    def step(self, actions) -> rlf.StepBatch:
        self.steps += 1
        return self.inner.step(actions)

    def render(self):
        return self.inner.render()

    def close(self) -> None:
        self.inner.close()
        if self.config.report is not None:
            self.config.report.write_text(json.dumps(
                {"num_envs": self.num_envs, "steps": self.steps, "resets": self.resets, "env": self.spec.name}))


def build_counting_collector(env_name, factory, num_envs, config) -> CountingCollector:
    return CountingCollector(env_name, factory, num_envs, config)
