"""Fixed policies for the team that does not learn. They run inside the env, on the env's RNG.

Each policy sees the grid as the env holds it (``World``) and returns one action per scripted agent.
``chase`` and ``flee`` look one cell ahead with Manhattan distance (obstacles only through the move
table: a blocked move counts as staying), and break ties uniformly at random.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STAY = 4
N_ACTIONS = 5


@dataclass
class World:
    """The env's per-episode state, shared by reference with the policies."""

    pos: list[int]
    """Cell index (y * size + x) of every agent, predators first."""
    active: list[bool]
    """False for a captured prey."""
    opponents: list[list[int]]
    """Agent index -> indices of the agents of the other role."""
    nxt: list[list[int]]
    """Cell -> the cell each of the 5 actions leads to (walls and obstacles already applied)."""
    xs: list[int]
    ys: list[int]


class ScriptedPolicy:
    name = "base"

    def __init__(self, noise: float = 0.0):
        self.noise = noise

    def actions(self, world: World, agents: list[int], rng: np.random.Generator) -> list[int]:
        chosen = [self.act(world, i, rng) for i in agents]
        if self.noise > 0.0:
            for k in range(len(chosen)):
                if rng.random() < self.noise:
                    chosen[k] = int(rng.integers(N_ACTIONS))
        return chosen

    def act(self, world: World, agent: int, rng: np.random.Generator) -> int:
        raise NotImplementedError


class RandomPolicy(ScriptedPolicy):
    """Uniform over the 5 actions."""

    name = "random"

    def actions(self, world: World, agents: list[int], rng: np.random.Generator) -> list[int]:
        return rng.integers(N_ACTIONS, size=len(agents)).tolist()


class StayPolicy(ScriptedPolicy):
    """Never moves (noise aside)."""

    name = "stay"

    def act(self, world: World, agent: int, rng: np.random.Generator) -> int:
        return STAY


def _distances(world: World, agent: int) -> list[tuple[int, int, int]] | None:
    """(action, min distance, summed distance) to the active opponents after each action; None if none."""
    xs, ys = world.xs, world.ys
    targets = [(xs[world.pos[j]], ys[world.pos[j]]) for j in world.opponents[agent] if world.active[j]]
    if not targets:
        return None
    out = []
    for action, cell in enumerate(world.nxt[world.pos[agent]]):
        x, y = xs[cell], ys[cell]
        dists = [abs(x - tx) + abs(y - ty) for tx, ty in targets]
        out.append((action, min(dists), sum(dists)))
    return out


def _pick(best: list[int], rng: np.random.Generator) -> int:
    return best[0] if len(best) == 1 else best[int(rng.integers(len(best)))]


class ChasePolicy(ScriptedPolicy):
    """Step to the neighbouring cell closest to the nearest opponent."""

    name = "chase"

    def act(self, world: World, agent: int, rng: np.random.Generator) -> int:
        scored = _distances(world, agent)
        if scored is None:
            return STAY
        low = min(d for _, d, _ in scored)
        return _pick([a for a, d, _ in scored if d == low], rng)


class FleePolicy(ScriptedPolicy):
    """Step to the neighbouring cell farthest from the nearest opponent (then from all of them)."""

    name = "flee"

    def act(self, world: World, agent: int, rng: np.random.Generator) -> int:
        scored = _distances(world, agent)
        if scored is None:
            return STAY
        top = max((d, s) for _, d, s in scored)
        return _pick([a for a, d, s in scored if (d, s) == top], rng)


POLICIES: dict[str, type[ScriptedPolicy]] = {
    cls.name: cls for cls in (RandomPolicy, StayPolicy, ChasePolicy, FleePolicy)
}


def make_policy(name: str, noise: float = 0.0) -> ScriptedPolicy:
    try:
        return POLICIES[name](noise)
    except KeyError:
        raise ValueError(f"unknown opponent policy {name!r}; choose one of {sorted(POLICIES)}") from None
