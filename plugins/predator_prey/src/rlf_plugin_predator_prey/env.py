"""The predator-prey grid as a PettingZoo ParallelEnv.

Coordinates are Cartesian: ``x`` grows to the right, ``y`` grows upward, a cell's index is
``y * size + x``. Actions: 0 right, 1 up, 2 left, 3 down, 4 stay. Everything that stays fixed for an
episode (obstacles, the move table with walls and obstacles applied, the local-view background,
the render background) is built once at reset, so a step is a handful of list look-ups per agent.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from .config import PredatorPreyConfig
from .encoding import BLOCKED, OPPONENT, TEAMMATE, layout
from .scripted import STAY, World, make_policy

ACTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1), (0, 0))
ACTION_NAMES = ("right", "up", "left", "down", "stay")
PREDATOR, PREY = 0, 1
ROLE_NAMES = ("predator", "prey")
CELL_PX = 16
PLACEMENT_TRIES = 200
REDRAWS = 20
OBSERVATION_CACHE = 4096
"""Joint observation arrays ``step_arrays`` keeps per obstacle layout (a few hundred KiB at most)."""

_COLORS = {
    "floor": (236, 236, 230), "line": (205, 205, 198), "obstacle": (70, 70, 78),
    "predator": (200, 40, 40), "prey": (40, 150, 60), "captured": (160, 160, 160),
}


class PredatorPreyEnv(ParallelEnv):
    """Predators chase prey on a grid; one team (or both) learns, the other follows a scripted policy.

    Only learning agents are in ``possible_agents``; scripted ones are moved inside ``step``.
    """

    metadata = {"name": "predator_prey_v0", "render_modes": ["ansi", "rgb_array", "human"], "render_fps": 4,
                "is_parallelizable": True}

    def __init__(self, config: PredatorPreyConfig | dict | None = None, render_mode: str | None = None):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']}")
        if config is None or isinstance(config, dict):
            config = PredatorPreyConfig.model_validate(config or {})
        self.config = c = config
        self.render_mode = render_mode
        self.size = s = c.size
        n_pred, n_prey = c.n_predators, c.n_prey
        self._n = n_pred + n_prey
        self._names = [f"predator_{i}" for i in range(n_pred)] + [f"prey_{j}" for j in range(n_prey)]
        self._role = [PREDATOR] * n_pred + [PREY] * n_prey
        self._speed = [c.predator_speed] * n_pred + [c.prey_speed] * n_prey
        self._max_speed = max(self._speed)
        self._predators = list(range(n_pred))
        self._prey = list(range(n_pred, self._n))
        self._opponents = [self._prey if r == PREDATOR else self._predators for r in self._role]
        self._teammates = [[j for j in (self._predators if r == PREDATOR else self._prey) if j != i]
                           for i, r in enumerate(self._role)]
        roles = {ROLE_NAMES.index(r) for r in c.learning_roles}
        learners = [i for i in range(self._n) if self._role[i] in roles]
        self._scripted = [i for i in range(self._n) if self._role[i] not in roles]
        self.possible_agents = [self._names[i] for i in learners]
        self._learners = learners
        self.agents: list[str] = []
        self._index = {self._names[i]: i for i in learners}
        self._policy = make_policy(c.opponent_policy, c.opponent_noise)

        self.encoder = layout(c)
        low = np.asarray(self.encoder.low, dtype=np.float32)
        high = np.asarray(self.encoder.high, dtype=np.float32)
        self._obs_spaces = {a: spaces.Box(low, high, dtype=np.float32) for a in self.possible_agents}
        self._zero_obs = [0] * self.encoder.state_dim
        self._act_spaces = {a: spaces.Discrete(len(ACTIONS)) for a in self.possible_agents}
        state_high = np.concatenate([np.tile([s - 1, s - 1, 1], self._n), np.ones(s * s)]).astype(np.float32)
        self.state_space = spaces.Box(np.zeros_like(state_high), state_high, dtype=np.float32)
        self.rlf_metadata = {
            "teams": {a: ROLE_NAMES[self._role[self._index[a]]] for a in self.possible_agents},
            "encoder": self.encoder,
            "state_dim": self.encoder.state_dim,
            "observation_fields": self.encoder.fields,
            "action_names": ACTION_NAMES,
            "scenario": c.scenario,
            "learners": c.learners,
            "opponent_policy": c.opponent_policy if self._scripted else None,
        }

        cells = s * s
        self._xs = [cell % s for cell in range(cells)]
        self._ys = [cell // s for cell in range(cells)]
        self._clip = c.clip
        self._missing = [c.clip + 1, c.clip + 1]
        w = c.rewards
        self._w_capture, self._w_step, self._w_captured, self._w_prey_step = w.capture, w.step, w.captured, w.prey_step

        self._rng: np.random.Generator | None = None
        self._pos: list[int] = []
        self._active: list[bool] = []
        self._obstacles = np.zeros(cells, dtype=bool)
        self._nxt: list[list[int]] = []
        self._blocked: list[tuple[int, ...]] = []
        self._view_bg: np.ndarray | None = None
        self._render_bg: np.ndarray | None = None
        self._geometry_of: bytes | None = None
        self._observation_cache: dict[tuple, np.ndarray] = {}
        """(positions, free flags, took part) -> ``step_arrays``' observations; see ``_observation_rows``."""
        """The obstacle mask the move table, view and render backgrounds were built for."""
        self._world: World | None = None
        self._steps = 0
        self._captures = 0
        self._capture_step: int | None = None

    # -- PettingZoo API -----------------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Box:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._act_spaces[agent]

    @property
    def num_steps(self) -> int:
        """Decisions taken in the current episode."""
        return self._steps

    @property
    def captures(self) -> int:
        """Prey captured so far in the current episode."""
        return self._captures

    def positions(self) -> dict[str, tuple[int, int]]:
        """(x, y) of every agent, scripted ones and captured (frozen) prey included."""
        return {name: (self._xs[c], self._ys[c]) for name, c in zip(self._names, self._pos, strict=True)}

    @property
    def captured_prey(self) -> list[str]:
        """Names of the prey captured so far in this episode."""
        return [self._names[i] for i in self._prey if not self._active[i]]

    @property
    def obstacle_cells(self) -> list[tuple[int, int]]:
        """(x, y) of this episode's obstacles."""
        return [(self._xs[c], self._ys[c]) for c in np.flatnonzero(self._obstacles).tolist()]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        """New episode. ``seed`` restarts the env's RNG (without it the RNG continues).

        ``options`` may pin the layout (cells as ``(x, y)``): ``{"predators": [...], "prey": [...],
        "obstacles": [...]}``; ``predators`` and ``prey`` go together, each part left out is drawn; other keys are ignored.
        """
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            for k, agent in enumerate(self.possible_agents):
                self._act_spaces[agent].seed(seed + k)
        elif self._rng is None:
            self._rng = np.random.default_rng()
        pos, obstacles = self._draw_layout(options or {})
        self._set_geometry(obstacles)
        self._pos = pos
        self._active = [True] * self._n
        self._world = World(self._pos, self._active, self._opponents, self._nxt, self._xs, self._ys)
        self._steps = 0
        self._captures = 0
        self._capture_step = None
        self.agents = list(self.possible_agents)
        observations = {a: self._observe(self._index[a]) for a in self.agents}
        return observations, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise RuntimeError("the episode is over (env.agents is empty): call reset() before step()")
        n, active, index = self._n, self._active, self._index
        acts = [STAY] * n
        for name, action in actions.items():
            i = index.get(name)
            if i is None:
                raise ValueError(f"unknown agent {name!r}; the learning agents are {self.possible_agents}")
            if not active[i]:
                continue  # a captured prey's action is ignored
            acts[i] = self._checked_action(action, name)
        present = self.agents
        captured, credited, terminated, truncated = self._advance(acts)

        observations, rewards, terms, truncs, infos = {}, {}, {}, {}, {}
        for name in present:
            i = index[name]
            rewards[name], terms[name], truncs[name] = self._outcome(i, credited, terminated, truncated)
            observations[name] = self._observe(i)
            infos[name] = {}
        if terminated or truncated:
            metrics = self._episode_metrics(terminated)
            for name in infos:
                infos[name]["episode_metrics"] = dict(metrics)
        self._after_step(captured, terminated or truncated)
        return observations, rewards, terms, truncs, infos

    def step_arrays(self, actions: list[Any]):
        """rlf's batched step protocol (docs/plugin-guide/step-arrays.md): ``step`` without the per-agent dicts.

        ``actions`` in ``possible_agents`` order (entries of agents not in ``self.agents`` ignored).
        Returns the next observations as one (agents, state_dim) float32 array (zeros for agents that
        took no part in the step), rewards, terminated, truncated and took-part flags as lists in the
        same order, and the episode metrics when the episode ended (else None). Same rules, RNG
        stream and results as ``step``.
        """
        if not self.agents:
            raise RuntimeError("the episode is over (env.agents is empty): call reset() before step()")
        active, learners = self._active, self._learners
        if len(actions) != len(learners):
            raise ValueError(f"step_arrays got {len(actions)} actions for the {len(learners)} agents "
                             f"{self.possible_agents}")
        acts = [STAY] * self._n
        alive = [active[i] for i in learners]  # who is in the episode now: the agents that take part
        for k, i in enumerate(learners):
            if alive[k]:
                a = actions[k]
                if a.__class__ is not int or not 0 <= a < 5:  # ints in range pass with one test
                    a = self._checked_action(a, self.possible_agents[k])
                acts[i] = a
        captured, credited, terminated, truncated = self._advance(acts)

        # _outcome inlined: at one env this loop is a good part of a whole training step
        role, w_step, w_capture, w_prey, w_captured = (self._role, self._w_step, self._w_capture,
                                                       self._w_prey_step, self._w_captured)
        rewards, terms, truncs = [], [], []
        for k, i in enumerate(learners):
            if not alive[k]:
                rewards.append(0.0)
                terms.append(False)
                truncs.append(False)
                continue
            if role[i] == PREDATOR:
                rewards.append(w_step + (w_capture if i in credited else 0.0))
                term = terminated
            elif active[i]:
                rewards.append(w_prey)
                term = terminated
            else:  # captured on this step
                rewards.append(w_captured)
                term = True
            terms.append(term)
            truncs.append(truncated and not term)
        metrics = self._episode_metrics(terminated) if terminated or truncated else None
        if terminated or truncated or captured or self.render_mode == "human":
            self._after_step(captured, terminated or truncated)
        return self._observation_rows(alive), rewards, terms, truncs, alive, metrics

    def _observation_rows(self, alive: list[bool]) -> np.ndarray:
        """Every learner's observation as one (agents, state_dim) array, zeros where not alive.

        An observation is a function of the positions and who is still free (on this episode's
        obstacles), and on small grids those recur all the time: the arrays are kept per layout
        (up to OBSERVATION_CACHE, dropped when the obstacles change) and copied out, which costs
        half of building one. A copy, not the kept array: torch warns on read-only arrays, and a
        consumer writing into a shared one would change later observations."""
        key = (*self._pos, *self._active, *alive)
        rows = self._observation_cache.get(key)
        if rows is None:
            zeros, observe = self._zero_obs, self._observe_values
            rows = np.array([observe(i) if took_part else zeros for i, took_part in zip(self._learners, alive,
                                                                                     strict=True)],
                            dtype=np.float32)
            if len(self._observation_cache) < OBSERVATION_CACHE:
                self._observation_cache[key] = rows.copy()
            return rows
        return rows.copy()

    def _checked_action(self, action: Any, name: str) -> int:
        a = int(action)
        if not 0 <= a < 5:
            raise ValueError(f"action {action!r} of {name} is not in 0..4 (right, up, left, down, stay)")
        return a

    def _advance(self, acts: list[int]) -> tuple[list[int], set[int], bool, bool]:
        """Move everyone (scripted agents choose here), capture, count the step: what ``step`` and
        ``step_arrays`` share. Returns the prey captured now, the predators credited, terminated, truncated."""
        n, pos, active = self._n, self._pos, self._active
        if self._scripted:
            movers = [i for i in self._scripted if active[i]]
            if movers:
                for i, a in zip(movers, self._policy.actions(self._world, movers, self._rng), strict=True):
                    acts[i] = a

        captured: list[int] = []
        credited: set[int] = set()
        nxt, speed, sharing = self._nxt, self._speed, self.config.allow_same_role_sharing
        predators, prey = self._predators, self._prey
        for sub in range(self._max_speed):  # fast agents move one cell per sub-step
            old = None if sharing else pos[:]
            for i in range(n):
                if speed[i] > sub and acts[i] != STAY and active[i]:
                    pos[i] = nxt[pos[i]][acts[i]]
            if old is not None:
                self._separate(old)
            hunters = {pos[i] for i in predators}
            for i in prey:
                if active[i] and pos[i] in hunters:
                    active[i] = False
                    captured.append(i)
                    credited.update(j for j in predators if pos[j] == pos[i])

        self._steps += 1
        if captured:
            self._captures += len(captured)
        terminated = self._captures >= self.config.capture_threshold
        truncated = not terminated and self._steps >= self.config.max_steps
        if terminated and self._capture_step is None:
            self._capture_step = self._steps
        return captured, credited, terminated, truncated

    def _outcome(self, i: int, credited: set[int], terminated: bool, truncated: bool) -> tuple[float, bool, bool]:
        """Reward, terminated, truncated of agent ``i``, which took part in the step just taken."""
        if self._role[i] == PREDATOR:
            reward = self._w_step + (self._w_capture if i in credited else 0.0)
            term = terminated
        elif self._active[i]:
            reward, term = self._w_prey_step, terminated
        else:  # captured on this step
            reward, term = self._w_captured, True
        return reward, term, truncated and not term

    def _episode_metrics(self, terminated: bool) -> dict[str, float]:
        metrics = {"capture": 1.0 if terminated else 0.0, "captures": float(self._captures)}
        if terminated:
            metrics["steps_to_capture"] = float(self._capture_step)
        return metrics

    def _after_step(self, captured: list[int], ended: bool) -> None:
        if ended:
            self.agents = []
        elif captured:
            active, index = self._active, self._index
            self.agents = [a for a in self.agents if active[index[a]]]
        if self.render_mode == "human":
            self.render()

    def state(self) -> np.ndarray:
        """Global state for centralised learners: (x, y, free) of every agent, then the obstacle mask."""
        xs, ys = self._xs, self._ys
        flat = [v for i, c in enumerate(self._pos) for v in (xs[c], ys[c], int(self._active[i]))]
        return np.concatenate([np.asarray(flat, dtype=np.float32), self._obstacles.astype(np.float32)])

    # -- rlf's env state protocol: an exact resume continues the episode under way ---------------------
    def get_state(self) -> dict[str, Any]:
        """Everything a step reads that reset() draws or step() changes, as JSON-able data and arrays.

        The layout-derived tables (move table, blocked flags, view background) are rebuilt from the
        obstacles by ``set_state``; the scripted opponents keep no state of their own.
        """
        from rlf import generator_state

        return {"rng": generator_state(self._rng),
                "action_rngs": {a: generator_state(space._np_random) for a, space in self._act_spaces.items()},
                "started": bool(self._pos), "positions": list(self._pos), "active": list(self._active),
                "obstacles": self._obstacles.copy(), "steps": self._steps, "captures": self._captures,
                "capture_step": self._capture_step, "agents": list(self.agents)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue exactly where ``get_state`` was called, on a copy built from the same config."""
        from rlf import generator_from_state

        cells = self.size * self.size
        pos = [int(cell) for cell in state["positions"]]
        active = [bool(flag) for flag in state["active"]]
        obstacles = np.asarray(state["obstacles"], dtype=bool)
        agents = [str(agent) for agent in state["agents"]]
        if state["started"] and (len(pos) != self._n or len(active) != self._n or obstacles.shape != (cells,)
                                 or not all(0 <= cell < cells for cell in pos)):
            raise ValueError(f"the saved state is for another grid than this {self.size}x{self.size} one "
                             f"with {self._n} agents")
        if set(agents) - set(self.possible_agents):
            raise ValueError(f"the saved agents {agents} are not all among {self.possible_agents}")
        self._rng = generator_from_state(state["rng"])
        for agent, saved in state["action_rngs"].items():
            if agent in self._act_spaces and saved is not None:
                self._act_spaces[agent]._np_random = generator_from_state(saved)
        self._steps, self._captures = int(state["steps"]), int(state["captures"])
        self._capture_step = None if state["capture_step"] is None else int(state["capture_step"])
        self.agents = agents
        if not state["started"]:
            return
        self._set_geometry(obstacles)
        self._pos, self._active = pos, active
        self._world = World(self._pos, self._active, self._opponents, self._nxt, self._xs, self._ys)

    def render(self):
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without a render_mode; pass render_mode='rgb_array' or 'ansi'")
            return None
        if not self._pos:
            raise RuntimeError("call reset() before render()")
        if self.render_mode == "rgb_array":
            return self._render_rgb()
        text = self._render_text()
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        pass

    # -- layout ---------------------------------------------------------------------------------
    def _cells_of(self, items: Any, what: str) -> list[int]:
        s = self.size
        out = []
        for item in items:
            x, y = (int(v) for v in item)
            if not (0 <= x < s and 0 <= y < s):
                raise ValueError(f"options[{what!r}]: cell {(x, y)} is outside the {s}x{s} grid")
            out.append(y * s + x)
        return out

    def _draw_layout(self, options: dict[str, Any]) -> tuple[list[int], np.ndarray]:
        c, s, rng = self.config, self.size, self._rng
        cells = s * s
        obstacles = np.zeros(cells, dtype=bool)
        fixed_obstacles = "obstacles" in options
        if fixed_obstacles:
            obstacles[self._cells_of(options["obstacles"], "obstacles")] = True
        if "predators" in options or "prey" in options:
            pred = self._cells_of(options.get("predators", ()), "predators")
            prey = self._cells_of(options.get("prey", ()), "prey")
            if len(pred) != c.n_predators or len(prey) != c.n_prey:
                raise ValueError(f"options need {c.n_predators} predator and {c.n_prey} prey cells, "
                                 f"got {len(pred)} and {len(prey)}")
            pos = pred + prey
            if len(set(pos)) != len(pos) or obstacles[pos].any():
                raise ValueError("options: agents need distinct cells that hold no obstacle")
        else:
            pos = self._draw_agents(np.flatnonzero(~obstacles))
        if not fixed_obstacles and c.n_obstacles:
            taken = np.zeros(cells, dtype=bool)
            taken[pos] = True
            rest = np.flatnonzero(~taken)
            for _ in range(REDRAWS):
                obstacles[:] = False
                obstacles[rng.choice(rest, size=c.n_obstacles, replace=False)] = True
                if not c.connected_layout or self._connected(obstacles, pos):
                    break
            else:  # dense grids: grow a connected free region around the agents instead
                grown = self._grow_free_region(pos, cells - c.n_obstacles)
                if grown is not None:
                    obstacles = grown
        return pos, obstacles

    def _draw_agents(self, allowed: np.ndarray) -> list[int]:
        c, rng = self.config, self._rng
        n_pred, n_prey = c.n_predators, c.n_prey
        if not c.min_start_distance:
            return rng.permutation(allowed)[: n_pred + n_prey].tolist()
        xs, ys = np.asarray(self._xs), np.asarray(self._ys)
        for _ in range(PLACEMENT_TRIES):
            order = rng.permutation(allowed)
            pred = order[:n_pred]
            rest = order[n_pred:]
            dist = np.min(np.abs(xs[rest][:, None] - xs[pred][None, :])
                          + np.abs(ys[rest][:, None] - ys[pred][None, :]), axis=1)
            far = rest[dist >= c.min_start_distance]
            if len(far) >= n_prey:
                return pred.tolist() + far[:n_prey].tolist()
        raise RuntimeError(f"could not place {n_prey} prey at distance >= {c.min_start_distance} from "
                           f"{n_pred} predators in {PLACEMENT_TRIES} tries; lower min_start_distance")

    def _connected(self, obstacles: np.ndarray, agents: list[int]) -> bool:
        """All ``agents`` lie in one 4-connected region of free cells (pockets nobody is in do not matter)."""
        s = self.size
        seen = bytearray(obstacles.tobytes())  # obstacles count as seen
        start = agents[0]
        seen[start] = 1
        queue = deque([start])
        targets = set(agents)
        targets.discard(start)
        while queue and targets:
            cell = queue.popleft()
            x, y = cell % s, cell // s
            for nb, ok in ((cell + 1, x + 1 < s), (cell - 1, x > 0), (cell + s, y + 1 < s), (cell - s, y > 0)):
                if ok and not seen[nb]:
                    seen[nb] = 1
                    targets.discard(nb)
                    queue.append(nb)
        return not targets

    def _grow_free_region(self, pos: list[int], n_free: int) -> np.ndarray | None:
        """Obstacles for a layout whose agents are connected: join every agent to the first by a random
        monotone path, then grow the free region from its border at random until it has ``n_free``
        cells. None when the joining paths alone need more free cells than that."""
        s, rng, xs, ys = self.size, self._rng, self._xs, self._ys
        free = bytearray(s * s)
        for cell in pos:
            free[cell] = 1
        x0, y0 = xs[pos[0]], ys[pos[0]]
        for cell in pos[1:]:
            x, y = xs[cell], ys[cell]
            moves = [0] * abs(x0 - x) + [1] * abs(y0 - y)
            rng.shuffle(moves)
            for axis in moves:
                if axis == 0:
                    x += 1 if x0 > x else -1
                else:
                    y += 1 if y0 > y else -1
                free[y * s + x] = 1
        count = sum(free)
        if count > n_free:
            return None
        border = [nb for cell in range(s * s) if free[cell] for nb in self._neighbours(cell) if not free[nb]]
        while count < n_free and border:
            k = int(rng.integers(len(border)))
            border[k], border[-1] = border[-1], border[k]
            cell = border.pop()
            if not free[cell]:
                free[cell] = 1
                count += 1
                border.extend(nb for nb in self._neighbours(cell) if not free[nb])
        return np.frombuffer(bytes(free), dtype=np.uint8) == 0

    def _neighbours(self, cell: int) -> list[int]:
        s = self.size
        x, y = cell % s, cell // s
        return [nb for nb, ok in ((cell + 1, x + 1 < s), (cell - 1, x > 0), (cell + s, y + 1 < s), (cell - s, y > 0))
                if ok]

    def _set_geometry(self, obstacles: np.ndarray) -> None:
        """Precompute what the episode's obstacles fix: the move table, blocked flags, view background."""
        s = self.size
        self._obstacles = obstacles
        key = obstacles.tobytes()
        if key == self._geometry_of:  # the same obstacles as the last episode (always, without any)
            return
        self._geometry_of = key
        self._observation_cache.clear()  # observations read the obstacles (blocked flags, local view)
        idx = np.arange(s * s)
        x, y = idx % s, idx // s
        columns = []
        for dx, dy in ACTIONS:
            target = np.clip(y + dy, 0, s - 1) * s + np.clip(x + dx, 0, s - 1)
            columns.append(np.where(obstacles[target], idx, target))  # into an obstacle: the move is skipped
        table = np.stack(columns, axis=1)
        self._nxt = table.tolist()
        if self.config.obs_blocked:
            self._blocked = [tuple(row) for row in (table[:, :4] == idx[:, None]).astype(int).tolist()]
        if self.config.observation == "local":
            r = self.config.view_radius
            padded = np.full((s + 2 * r, s + 2 * r), BLOCKED, dtype=np.int64)  # row = y + r
            padded[r:r + s, r:r + s] = obstacles.reshape(s, s).astype(np.int64) * BLOCKED
            self._view_bg = padded
        self._render_bg = None

    def _separate(self, old: list[int]) -> None:
        """Same-role agents may not share a cell: cancel the moves of every agent in a shared cell,
        repeating until no two same-role agents share one (an agent that did not move keeps its cell)."""
        pos, active, role = self._pos, self._active, self._role
        occupied = [(role[i], pos[i]) for i in range(self._n) if active[i]]
        if len(set(occupied)) == len(occupied):
            return
        while True:
            cells: dict[tuple[int, int], list[int]] = {}
            for i in range(self._n):
                if active[i]:
                    cells.setdefault((role[i], pos[i]), []).append(i)
            changed = False
            for group in cells.values():
                if len(group) > 1:
                    for i in group:
                        if pos[i] != old[i]:
                            pos[i] = old[i]
                            changed = True
            if not changed:
                return

    # -- observations -----------------------------------------------------------------------------
    def _observe(self, i: int) -> np.ndarray:
        return np.array(self._observe_values(i), dtype=np.float32)

    def _observe_values(self, i: int) -> list[int]:
        c = self.config
        cell = self._pos[i]
        x, y = self._xs[cell], self._ys[cell]
        values: list[int] = self._view(i, x, y) if c.observation == "local" else []
        if c.obs_position:
            values += (x, y)
        if c.obs_opponents:
            values += self._offsets(x, y, self._opponents[i], c.obs_opponents)
        if c.obs_teammates:
            values += self._offsets(x, y, self._teammates[i], c.obs_teammates)
        if c.obs_blocked:
            values += self._blocked[cell]
        return values

    def _offsets(self, x: int, y: int, others: list[int], k: int) -> list[int]:
        """(dx, dy) to the k nearest free agents among ``others`` (Manhattan, ties by agent order),
        clipped to [-clip, clip]; (clip + 1, clip + 1) fills the slots of agents that are not there."""
        pos, active, xs, ys, clip = self._pos, self._active, self._xs, self._ys, self._clip
        if k == 1:  # the common case, without sorting
            best, bx, by = -1, 0, 0
            for j in others:
                if active[j]:
                    cell = pos[j]
                    dx, dy = xs[cell] - x, ys[cell] - y
                    d = (dx if dx >= 0 else -dx) + (dy if dy >= 0 else -dy)
                    if best < 0 or d < best:
                        best, bx, by = d, dx, dy
            if best < 0:
                return list(self._missing)
            return [clip if bx > clip else -clip if bx < -clip else bx,
                    clip if by > clip else -clip if by < -clip else by]
        found = []
        for j in others:
            if active[j]:
                cell = pos[j]
                dx, dy = xs[cell] - x, ys[cell] - y
                found.append((abs(dx) + abs(dy), j, dx, dy))
        found.sort()
        out: list[int] = []
        for _, _, dx, dy in found[:k]:
            out.append(clip if dx > clip else -clip if dx < -clip else dx)
            out.append(clip if dy > clip else -clip if dy < -clip else dy)
        for _ in range(k - min(k, len(found))):
            out += self._missing
        return out

    def _view(self, i: int, x: int, y: int) -> list[int]:
        """The (2r+1)^2 cells around the agent, top row first: 0 free, 1 obstacle/outside, 2 teammate,
        3 opponent (an opponent hides a teammate on the same cell)."""
        r = self.config.view_radius
        view = self._view_bg[y:y + 2 * r + 1, x:x + 2 * r + 1][::-1].copy()  # rows: y + r down to y - r
        pos, active, xs, ys, role = self._pos, self._active, self._xs, self._ys, self._role
        for j in range(self._n):
            if j != i and active[j]:
                dx, dy = xs[pos[j]] - x, ys[pos[j]] - y
                if -r <= dx <= r and -r <= dy <= r:
                    if role[j] != role[i]:
                        view[r - dy, r + dx] = OPPONENT
                    elif view[r - dy, r + dx] != OPPONENT:
                        view[r - dy, r + dx] = TEAMMATE
        return view.ravel().tolist()

    # -- rendering --------------------------------------------------------------------------------
    def _render_rgb(self) -> np.ndarray:
        s = self.size
        if self._render_bg is None:
            floor = np.empty((s, s, 3), dtype=np.uint8)
            floor[:] = _COLORS["floor"]
            floor[self._obstacles.reshape(s, s)[::-1]] = _COLORS["obstacle"]  # image row 0 = top (y = s-1)
            image = np.repeat(np.repeat(floor, CELL_PX, axis=0), CELL_PX, axis=1)
            image[::CELL_PX, :] = _COLORS["line"]
            image[:, ::CELL_PX] = _COLORS["line"]
            self._render_bg = image
        image = self._render_bg.copy()
        order = sorted(range(self._n), key=lambda i: (self._active[i], self._role[i] == PREDATOR))
        for i in order:  # captured prey first, predators last (on top)
            cell = self._pos[i]
            row, col = s - 1 - self._ys[cell], self._xs[cell]
            if not self._active[i]:
                color, inset = _COLORS["captured"], 6
            elif self._role[i] == PREDATOR:
                color, inset = _COLORS["predator"], 2
            else:
                color, inset = _COLORS["prey"], 4
            image[row * CELL_PX + inset:(row + 1) * CELL_PX - inset + 1,
                  col * CELL_PX + inset:(col + 1) * CELL_PX - inset + 1] = color
        return image

    def _render_text(self) -> str:
        """One character per cell, top row first: . free, # obstacle, P predator, o prey,
        x a captured prey's last cell."""
        s = self.size
        grid = [["#" if self._obstacles[y * s + x] else "." for x in range(s)] for y in range(s)]
        for i in sorted(range(self._n), key=lambda i: (self._active[i], self._role[i] == PREDATOR)):
            cell = self._pos[i]
            char = "x" if not self._active[i] else ("P" if self._role[i] == PREDATOR else "o")
            grid[self._ys[cell]][self._xs[cell]] = char
        header = (f"step {self._steps}/{self.config.max_steps}  "
                  f"captures {self._captures}/{self.config.capture_threshold}")
        return "\n".join([header] + [" ".join(grid[y]) for y in range(s - 1, -1, -1)])


def make_env(config: PredatorPreyConfig | dict | None = None, render_mode: str | None = None) -> PredatorPreyEnv:
    """The builder rlf calls: one env from a validated config."""
    return PredatorPreyEnv(config, render_mode=render_mode)


def parallel_env(render_mode: str | None = None, **fields: Any) -> PredatorPreyEnv:
    """PettingZoo-style constructor outside rlf: ``parallel_env(scenario="grid-3v3", learners="all")``."""
    return PredatorPreyEnv(PredatorPreyConfig.model_validate(fields), render_mode=render_mode)
