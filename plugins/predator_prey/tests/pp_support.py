"""Helpers shared by the predator-prey tests (a unique module name: other test dirs have a conftest too)."""


def pinned(env, predators, prey, obstacles=(), seed=0):
    """Reset ``env`` with a fixed layout of (x, y) cells."""
    return env.reset(seed=seed, options={"predators": list(predators), "prey": list(prey),
                                         "obstacles": list(obstacles)})


def cell(env, agent):
    """(x, y) of an agent by name (scripted agents included)."""
    return env.positions()[agent]


def reachable(size, obstacles, start):
    """Cells reachable from ``start`` by right/up/left/down moves that avoid ``obstacles``."""
    blocked = set(obstacles)
    seen, todo = {start}, [start]
    while todo:
        x, y = todo.pop()
        for nxt in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if 0 <= nxt[0] < size and 0 <= nxt[1] < size and nxt not in blocked and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
