"""Replay memory that stores each frame of an image-stack observation once.

A frame stack ``[f1, f2, f3, f4]`` is followed by ``[f2, f3, f4, f5]``: storing obs and next_obs
whole would keep every frame eight times. Here frames live once in a ring of single frames, and a
transition is two rows of frame numbers (obs and next_obs) from which stacks are rebuilt at sample
time. Nothing about the env is assumed: a stack is only shared when its content is equal to what
is already stored (the previous next_obs of the same env, or the shifted obs), so episode starts,
resets with repeated frames, parallel envs and even non-stack images stay correct; they merely
share less.

Frame numbers are absolute (they only grow) so a transition whose frames were overwritten by the
ring is recognisable and never sampled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlf import StateTree


class FrameReplay:
    def __init__(self, capacity: int, obs_shape: tuple[int, ...], stack_axis: int = 0,
                 frame_capacity: int | None = None, action_dtype=np.int64):
        if capacity < 1:
            raise ValueError("replay capacity must be at least 1")
        if len(obs_shape) < 2:
            raise ValueError(f"frame replay needs stacked observations, got shape {obs_shape}")
        self.capacity = capacity
        self.obs_shape = tuple(obs_shape)
        self.stack_axis = stack_axis % len(obs_shape)
        self.stack = obs_shape[self.stack_axis]
        frame_shape = tuple(s for i, s in enumerate(obs_shape) if i != self.stack_axis)
        # One new frame per transition, plus the first frames of every episode: 1/8 spare covers
        # episodes of 8 steps or more even when each one starts with a fully new stack.
        self.frame_capacity = frame_capacity or capacity + capacity // 8 + 4 * self.stack
        self.frames = np.zeros((self.frame_capacity, *frame_shape), dtype=np.uint8)
        self.frames_written = 0
        self.obs_frames = np.zeros((capacity, self.stack), dtype=np.int64)
        self.next_frames = np.zeros((capacity, self.stack), dtype=np.int64)
        self.oldest_frame = np.zeros(capacity, dtype=np.int64)
        self.actions = np.zeros(capacity, dtype=action_dtype)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=np.float32)
        self.position = 0
        self.size = 0
        self.filled = 0
        self._streams: dict[int, np.ndarray] = {}
        """Env index -> frame numbers of that env's last next_obs, the likely next obs."""

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        arrays = (self.frames, self.obs_frames, self.next_frames, self.oldest_frame, self.actions, self.rewards,
                  self.terminated)
        return int(sum(a.nbytes for a in arrays))

    # -- writing -----------------------------------------------------------------------------------
    def _frames_of(self, stack: np.ndarray) -> np.ndarray:
        return np.moveaxis(stack, self.stack_axis, 0) if self.stack_axis else stack

    def _first_live_frame(self) -> int:
        return self.frames_written - self.frame_capacity

    def _write(self, frame: np.ndarray) -> int:
        number = self.frames_written
        self.frames[number % self.frame_capacity] = frame
        self.frames_written += 1
        return number

    def _stored(self, numbers: np.ndarray, frames: np.ndarray) -> bool:
        if numbers.min() < self._first_live_frame():
            return False
        return bool(np.array_equal(self.frames[numbers % self.frame_capacity], frames))

    def _store_stack(self, frames: np.ndarray) -> np.ndarray:
        numbers = np.empty(self.stack, dtype=np.int64)
        for j, frame in enumerate(frames):
            # reset stacks repeat a frame (or a blank one): keep each distinct neighbour once
            if j and np.array_equal(frame, frames[j - 1]):
                numbers[j] = numbers[j - 1]
            else:
                numbers[j] = self._write(frame)
        return numbers

    def add(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray, next_obs: np.ndarray,
            terminated: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        """Add a batch of transitions; ``env_ids`` says which env each row came from (default: row i = env i)."""
        if obs.dtype != np.uint8 or obs.shape[1:] != self.obs_shape:
            raise ValueError(f"frame replay expects uint8 observations of shape {self.obs_shape}, "
                             f"got {obs.dtype} {obs.shape[1:]}")
        env_ids = np.arange(len(actions)) if env_ids is None else env_ids
        for row, env in enumerate(env_ids):
            obs_frames = self._frames_of(obs[row])
            next_frames = self._frames_of(next_obs[row])
            previous = self._streams.get(int(env))
            if previous is not None and self._stored(previous, obs_frames):
                obs_numbers = previous
            else:
                obs_numbers = self._store_stack(obs_frames)
            if np.array_equal(next_frames[:-1], obs_frames[1:]):
                next_numbers = np.append(obs_numbers[1:], self._write(next_frames[-1]))
            else:
                next_numbers = self._store_stack(next_frames)
            self._streams[int(env)] = next_numbers
            slot = self.position
            self.obs_frames[slot] = obs_numbers
            self.next_frames[slot] = next_numbers
            self.oldest_frame[slot] = min(obs_numbers.min(), next_numbers.min())
            self.actions[slot] = actions[row]
            self.rewards[slot] = rewards[row]
            self.terminated[slot] = terminated[row]
            self.position = (slot + 1) % self.capacity
            self.size = min(self.capacity, self.size + 1)
            self.filled = max(self.filled, self.size)
        self._evict()

    def _evict(self) -> None:
        """Drop the oldest transitions whose frames the ring has overwritten."""
        first_live = self._first_live_frame()
        while self.size and self.oldest_frame[(self.position - self.size) % self.capacity] < first_live:
            self.size -= 1

    # -- reading -----------------------------------------------------------------------------------
    def _slots(self, count: int, rng: np.random.Generator) -> np.ndarray:
        start = self.position - self.size
        slots = (start + rng.integers(0, self.size, size=count)) % self.capacity
        # Parallel envs interleave, so a stale transition can sit just behind the eviction point.
        stale = self.oldest_frame[slots] < self._first_live_frame()
        if stale.any():
            live = (start + np.arange(self.size)) % self.capacity
            live = live[self.oldest_frame[live] >= self._first_live_frame()]
            if len(live) == 0:
                raise ValueError("no transition in the frame replay has all its frames stored")
            slots[stale] = live[rng.integers(0, len(live), size=int(stale.sum()))]
        return slots

    def _stacks(self, numbers: np.ndarray) -> np.ndarray:
        stacks = self.frames[numbers % self.frame_capacity]  # (B, K, *frame)
        return np.moveaxis(stacks, 1, self.stack_axis + 1) if self.stack_axis else stacks

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        slots = self._slots(batch_size, rng)
        return {"obs": self._stacks(self.obs_frames[slots]), "actions": self.actions[slots],
                "rewards": self.rewards[slots], "next_obs": self._stacks(self.next_frames[slots]),
                "terminated": self.terminated[slots]}

    # -- checkpoints -------------------------------------------------------------------------------
    def state_dict(self) -> StateTree:
        """The rings as they are (views, no copy): a 100k-transition replay is most of a GB."""
        filled_frames = min(self.frames_written, self.frame_capacity)
        return {"frames": self.frames[:filled_frames], "frames_written": self.frames_written,
                "obs_frames": self.obs_frames[:self.filled], "next_frames": self.next_frames[:self.filled],
                "oldest_frame": self.oldest_frame[:self.filled], "actions": self.actions[:self.filled],
                "rewards": self.rewards[:self.filled], "terminated": self.terminated[:self.filled],
                "position": self.position, "size": self.size, "capacity": self.capacity,
                "frame_capacity": self.frame_capacity}

    def load_state_dict(self, state: StateTree) -> None:
        """Restore a saved replay, also into a ring of another capacity (keeping the newest transitions)."""
        saved_frames = np.asarray(state["frames"])
        if saved_frames.shape[1:] != self.frames.shape[1:]:
            raise ValueError(f"saved replay frames are {saved_frames.shape[1:]}, this env gives "
                             f"{self.frames.shape[1:]}")
        self._streams.clear()
        if int(state["capacity"]) == self.capacity and int(state["frame_capacity"]) == self.frame_capacity:
            # same rings: same slots, so a resumed run samples exactly what the saved one would have
            self.frames[:len(saved_frames)] = saved_frames
            filled = len(state["actions"])
            for name in ("obs_frames", "next_frames", "oldest_frame", "actions", "rewards", "terminated"):
                getattr(self, name)[:filled] = state[name]
            self.frames_written, self.filled = int(state["frames_written"]), filled
            self.position, self.size = int(state["position"]), int(state["size"])
            return
        written = int(state["frames_written"])
        size, position = int(state["size"]), int(state["position"])
        order = (position - size + np.arange(size)) % int(state["capacity"])  # oldest first
        first = max(0, written - len(saved_frames), written - self.frame_capacity)
        numbers = np.arange(first, written)
        if len(numbers):
            self.frames[numbers % self.frame_capacity] = saved_frames[numbers % len(saved_frames)]
        self.frames_written = written
        keep = order[np.asarray(state["oldest_frame"])[order] >= first][-self.capacity:]
        count = len(keep)
        for name in ("obs_frames", "next_frames", "oldest_frame", "actions", "rewards", "terminated"):
            getattr(self, name)[:count] = np.asarray(state[name])[keep]
        self.position = count % self.capacity
        self.size = self.filled = count


class PartsReplay:
    """Replay for Dict and Tuple observations whose uint8 image parts should keep each frame once.

    Each such part gets its own ``FrameReplay``, and all of them take every transition in lockstep, so a
    transition sits at the same slot in each; the other parts are plain arrays at those slots. A slot is
    sampled only while every part still holds its frames."""

    def __init__(self, capacity: int, space: Any, frame_parts: dict[Any, tuple[tuple[int, ...], int]],
                 dtypes: Callable[[Any], np.dtype], action_dtype=np.int64):
        """``frame_parts``: part key -> (its shape, its stack axis), for the parts to deduplicate;
        ``dtypes(part space)``: how every other part is stored."""
        if capacity < 1:
            raise ValueError("replay capacity must be at least 1")
        self.capacity = capacity
        self.structure = type(space.spaces) if isinstance(space.spaces, dict) else tuple
        self.keys = list(space.spaces) if isinstance(space.spaces, dict) else list(range(len(space.spaces)))
        self.frames = {key: FrameReplay(capacity, shape, stack_axis=axis, action_dtype=action_dtype)
                       for key, (shape, axis) in frame_parts.items()}
        self.plain = {key: np.zeros((capacity, *(space[key].shape or ())), dtype=dtypes(space[key]))
                      for key in self.keys if key not in self.frames}
        self.plain_next = {key: np.zeros_like(array) for key, array in self.plain.items()}
        self.position = 0
        self.size = 0
        self.filled = 0

    def __len__(self) -> int:
        return min(self.size, *(part.size for part in self.frames.values()))

    def add(self, obs: Any, actions: np.ndarray, rewards: np.ndarray, next_obs: Any, terminated: np.ndarray,
            env_ids: np.ndarray | None = None) -> None:
        count = len(actions)
        for key, part in self.frames.items():
            part.add(obs[key], actions, rewards, next_obs[key], terminated, env_ids=env_ids)
        index = (self.position + np.arange(count)) % self.capacity
        for key, array in self.plain.items():
            array[index] = obs[key]
            self.plain_next[key][index] = next_obs[key]
        self.position = int((self.position + count) % self.capacity)
        self.size = int(min(self.capacity, self.size + count))
        self.filled = max(self.filled, self.size)

    def _slots(self, count: int, rng: np.random.Generator) -> np.ndarray:
        size = len(self)
        start = self.position - size
        slots = (start + rng.integers(0, size, size=count)) % self.capacity

        def stale(where: np.ndarray) -> np.ndarray:
            out = np.zeros(len(where), dtype=bool)
            for part in self.frames.values():
                out |= part.oldest_frame[where] < part._first_live_frame()
            return out

        bad = stale(slots)
        if bad.any():  # parallel envs interleave: a stale transition can sit just behind the eviction point
            live = (start + np.arange(size)) % self.capacity
            live = live[~stale(live)]
            if len(live) == 0:
                raise ValueError("no transition in the replay has all its frames stored")
            slots[bad] = live[rng.integers(0, len(live), size=int(bad.sum()))]
        return slots

    def _assemble(self, slots: np.ndarray, frames_of: str, plain: dict[Any, np.ndarray]) -> Any:
        parts = {}
        for key in self.keys:
            if key in self.frames:
                part = self.frames[key]
                parts[key] = part._stacks(getattr(part, frames_of)[slots])
            else:
                parts[key] = plain[key][slots]
        return parts if self.structure is not tuple else tuple(parts[key] for key in self.keys)

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, Any]:
        if len(self) == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        slots = self._slots(batch_size, rng)
        first = next(iter(self.frames.values()))  # every part holds the same actions, rewards, flags
        return {"obs": self._assemble(slots, "obs_frames", self.plain), "actions": first.actions[slots],
                "rewards": first.rewards[slots], "next_obs": self._assemble(slots, "next_frames", self.plain_next),
                "terminated": first.terminated[slots]}

    def state_dict(self) -> StateTree:
        return {"frames": {str(key): part.state_dict() for key, part in self.frames.items()},
                "plain": {str(key): array[:self.filled] for key, array in self.plain.items()},
                "plain_next": {str(key): array[:self.filled] for key, array in self.plain_next.items()},
                "position": self.position, "size": self.size, "capacity": self.capacity}

    def load_state_dict(self, state: StateTree) -> None:
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"the saved replay holds {int(state['capacity'])} transitions and algo.buffer_size is "
                             f"{self.capacity}; resume with the saved buffer_size, or from a checkpoint without "
                             "replay (run.save_replay=false)")
        for key, part in self.frames.items():
            part.load_state_dict(state["frames"][str(key)])
        filled = 0
        for key, array in self.plain.items():
            saved = np.asarray(state["plain"][str(key)])
            filled = len(saved)
            array[:filled] = saved
            self.plain_next[key][:filled] = state["plain_next"][str(key)]
        self.position, self.size = int(state["position"]), int(state["size"])
        self.filled = filled or self.size
