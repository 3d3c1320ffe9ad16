"""Shared machinery of the peer comparisons: every case runs in its own child process, cases alternate
round by round, and the table shows medians and ratios to the peer.

Why children for both sides: the peers live in their own virtual environments (this repository installs
nothing into them), and a fresh process per run gives every case the same start (no warm torch caches,
no leftover threads). The child prints one JSON line; the parent only parses it. Only the stdlib is used
here, so a peer's interpreter can import this module too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULT_PREFIX = "RESULT "
RECORD_ENV = "RLF_BENCH_RECORD"
"""Where ``record`` appends each printed table as JSON (benchmarks/report.py sets it; unset: nothing is kept)."""
STARTED = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def evaluate_policy(policy: Callable, env_id: str, episodes: int, first_seed: int) -> float:
    """Mean return of ``policy`` (one raw observation -> one action) on a gymnasium env over the fixed
    reset seeds ``first_seed, first_seed + 1, ...``: the same episodes for every side of a comparison.
    (gymnasium is imported here, not at the top: this module stays stdlib-only for peer interpreters.)"""
    import gymnasium

    env = gymnasium.make(env_id)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=first_seed + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return statistics.fmean(returns)


class UsageError(Exception):
    """Bad input to a benchmark script: printed as one line, exit code 2."""


@dataclass
class Case:
    """One side of a comparison: which interpreter runs which worker, with which arguments."""

    name: str
    python: str
    worker: str
    args: dict = field(default_factory=dict)
    threads: int = 1
    peer: bool = False


def check_python(path: str, module: str, venv_hint: str) -> str:
    """The interpreter of a peer's venv, checked to import ``module``; one clear error otherwise."""
    if not Path(path).exists():
        raise UsageError(f"peer interpreter {path} does not exist; make it with: {venv_hint}")
    probe = subprocess.run([path, "-c", f"import {module}"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise UsageError(f"{path} cannot import {module}; make the peer venv with: {venv_hint}")
    return path


def run_case(script: Path, case: Case, seed: int, timeout: float) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(case.threads), "MKL_NUM_THREADS": str(case.threads),
           "PYTHONHASHSEED": "0"}
    command = [case.python, str(script), "--worker", case.worker, "--seed", str(seed),
               "--threads", str(case.threads), "--args", json.dumps(case.args)]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"case {case.name!r} (seed {seed}) failed with exit code {done.returncode}:\n  "
                           + "\n  ".join(tail))
    result = json.loads(lines[-1][len(RESULT_PREFIX):])
    result["process_seconds"] = time.perf_counter() - started
    # the 1-minute average lags by about a minute, so the mean of its value at both ends stands for the run
    result["load"] = (load_before + os.getloadavg()[0]) / 2
    return result


def alternate(script: Path, cases: Sequence[Case], rounds: int, seed: int, timeout: float) -> dict[str, list[dict]]:
    """Round r runs every case with seed ``seed + r``; the order flips each round so that load drifting
    over the run hits every case alike."""
    mismatch = thread_mismatch(cases)
    if mismatch:  # a ratio between different thread counts measures the threads, not the libraries
        raise UsageError(mismatch)
    results: dict[str, list[dict]] = {case.name: [] for case in cases}
    for r in range(rounds):
        order = list(cases) if r % 2 == 0 else list(reversed(cases))
        for case in order:
            result = run_case(script, case, seed + r, timeout)
            results[case.name].append(result)
            shown = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                              for k, v in result.items() if not isinstance(v, (list, dict)))
            print(f"  round {r + 1}/{rounds} seed {seed + r}  {case.name:34s} {shown}", flush=True)
    return results


def median(values: Sequence[float]) -> float:
    finite = [v for v in values if v is not None]
    return statistics.median(finite) if finite else float("nan")


def print_table(title: str, columns: Sequence[tuple[str, Callable[[list[dict]], str]]],
                results: dict[str, list[dict]], cases: Sequence[Case], ratio_key: str, header: str) -> None:
    """A markdown table: one row per case with its torch threads, rounds and load, the given columns, and
    the median of ``ratio_key`` divided by the peer's median of the same comparison group (the peer named
    in the same table). Threads and load sit in every row so that no ratio is read without them."""
    peer = next((c for c in cases if c.peer), None)
    peer_value = median([r[ratio_key] for r in results[peer.name]]) if peer else None
    print(f"\n{title}\n{header}")
    names = ["case", "torch threads", "rounds", "load (median)", *(name for name, _ in columns), "rlf/peer"]
    print("| " + " | ".join(names) + " |")
    print("|---" * len(names) + "|")
    table = []
    for case in cases:
        rows = results[case.name]
        load = median([r.get("load") for r in rows])
        ratio = "" if case.peer or not peer_value else f"{median([r[ratio_key] for r in rows]) / peer_value:.2f}x"
        cells = [case.name, str(case.threads), str(len(rows)), f"{load:.1f}", *(render(rows) for _, render in columns),
                 ratio]
        table.append(cells)
        print("| " + " | ".join(cells) + " |")
    record(title, header, names, table)


def record(title: str, header: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Keep a printed table for docs/BENCHMARKS.md's current table: with the command that made it, when it
    started, and the machine's load, so that no figure is read without them (see benchmarks/report.py)."""
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    entry = {"title": title, "header": header, "columns": list(columns), "rows": [list(row) for row in rows],
             "command": "python " + " ".join([os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]]),
             "started": STARTED, "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
             "machine": f"{os.cpu_count()} CPU cores", "load_at_end": round(os.getloadavg()[0], 1)}
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def thread_mismatch(cases: Sequence[Case]) -> str | None:
    """Why ``cases`` (one comparison) do not run at one torch thread count, or None when they do."""
    counts = {case.name: case.threads for case in cases}
    if len(set(counts.values())) > 1:
        return "torch threads differ between the sides: " + ", ".join(f"{k} {v}" for k, v in counts.items())
    return None


_MACHINE_LINE: list[str] = []


def machine_line() -> str:
    """The cores and the load when the script first asked (scripts ask at their start): every later call,
    such as a table's header at the end, repeats that line, so "at start" stays true."""
    if not _MACHINE_LINE:
        load = os.getloadavg()
        _MACHINE_LINE.append(
            f"machine: {os.cpu_count()} CPU cores, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
            f"(1/5/15 min) at start, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    return _MACHINE_LINE[0]


def worker_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace | None:
    """The child's arguments when this process is a worker, else None."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--worker")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--args", default="{}")
    known, _ = parser.parse_known_args(argv)
    if known.worker is None:
        return None
    known.args = json.loads(known.args)
    return known


def serve_worker(workers: Mapping[str, Callable[[int, int, dict], dict]]) -> bool:
    """In a process ``run_case`` started: run the worker it names, print its result and return True.
    In the parent (no worker arguments): return False."""
    worker = worker_arguments()
    if worker is None:
        return False
    emit(workers[worker.worker](worker.seed, worker.threads, worker.args))
    return True


def emit(result: dict) -> None:
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def main_guard(run: Callable[[], None]) -> None:
    try:
        run()
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
