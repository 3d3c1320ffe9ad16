"""What starting rlf costs: CPU seconds of `import rlf` and `rlf list` (every installed plugin discovered),
next to a bare `python -c pass` and to importing the two libraries rlf cannot start without (numpy,
pydantic), and how many core modules each loads.

    python benchmarks/import_time.py [--rounds 15]

Each command runs in a fresh interpreter; rounds alternate between the commands so a load change on the
machine touches all of them alike; the table gives medians of user+system CPU time (what the process
itself spent, less sensitive to other load than wall time) and the wall-time median beside it. Target:
`rlf list` under 0.5 CPU seconds with every plugin installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

COUNT = ("import sys, json\n{code}\n"
         "print(json.dumps(sorted(m for m in sys.modules if m == 'rlf' or m.startswith('rlf.'))))")

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import rlf": [sys.executable, "-c", "import rlf"],
    "import numpy, pydantic": [sys.executable, "-c", "import numpy, pydantic"],
    "rlf list": [shutil.which("rlf") or "rlf", "list"],
}


def cpu_and_wall(command: list[str]) -> tuple[float, float]:
    before = os.times()
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system), wall


def modules_loaded(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", COUNT.format(code=code)], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    problem = ("--rounds must be a positive number of rounds, such as 15" if args.rounds < 1 else
               "no `rlf` command on PATH; activate the environment rlf is installed in" if shutil.which("rlf") is None
               else None)
    if problem:
        print(f"benchmarks/import_time.py: {problem}", file=sys.stderr)
        sys.exit(2)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(2):  # warm the file cache
        for command in COMMANDS.values():
            cpu_and_wall(command)
    for round_ in range(args.rounds):
        names = list(COMMANDS) if round_ % 2 == 0 else list(reversed(COMMANDS))
        for name in names:
            samples[name].append(cpu_and_wall(COMMANDS[name]))
    listed = modules_loaded("import contextlib, io\nfrom rlf.cli import main\nsys.argv = ['rlf', 'list']\n"
                            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
                            "    main()")
    counts = {"import rlf": len(modules_loaded("import rlf")),
              "rlf list": len(listed)}
    base = statistics.median(cpu for cpu, _ in samples["python -c pass"])
    print(f"{'command':<24} {'CPU s (median)':>15} {'minus python':>13} {'wall s':>8} {'rlf modules':>12}")
    for name, values in samples.items():
        cpu = statistics.median(c for c, _ in values)
        wall = statistics.median(w for _, w in values)
        print(f"{name:<24} {cpu:>15.3f} {cpu - base:>13.3f} {wall:>8.3f} {counts.get(name, 0):>12}")
    listed_cpu = statistics.median(c for c, _ in samples["rlf list"])
    print(f"rlf list: {listed_cpu:.3f} CPU s against the 0.5 s target: {'met' if listed_cpu < 0.5 else 'MISSED'} "
          f"({args.rounds} rounds, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
