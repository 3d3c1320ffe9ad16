"""Per-env times and one aggregate test count for a tox run (scripts/test.sh calls it).

    python scripts/summarize.py RESULT_JSON JUNIT_DIR

Counts come from each env's pytest JUnit XML. An env that failed without a failing test (an install
error, a lint finding, pytest's exit 5 for collecting no test) counts as one failure, so nothing that
went wrong can hide behind a green count. Skipped tests are listed with their reasons, so a skip cannot
read as a pass. The last line is always the count, `N passed, N failed[, N skipped]` (what CI reads).
Exits non-zero when anything failed.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def junit_counts(path: Path) -> dict[str, int]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    total = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    return {"passed": total["tests"] - total["failures"] - total["errors"] - total["skipped"],
            "failed": total["failures"] + total["errors"], "skipped": total["skipped"]}


SHOWN_SKIPS = 100


def junit_skips(path: Path) -> list[tuple[str, str]]:
    """(test id, reason) of every skipped (or xfailed) test in a JUnit XML file."""
    skips = []
    for case in ET.parse(path).getroot().iter("testcase"):
        skipped = case.find("skipped")
        if skipped is not None:
            test = "::".join(part for part in (case.get("classname"), case.get("name")) if part)
            skips.append((test, " ".join((skipped.get("message") or skipped.text or "no reason given").split())))
    return skips


def main(result_json: Path, junit_dir: Path) -> int:
    envs = json.loads(result_json.read_text())["testenvs"]
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    rows, skips = [], []
    for name, env in envs.items():
        result = env.get("result")
        if result is None:  # listed in env_list but not selected for this run
            continue
        ok = bool(result.get("success"))
        junit = junit_dir / f"{name}.xml"
        counts = junit_counts(junit) if junit.is_file() else {"passed": 0, "failed": 0, "skipped": 0}
        skips += [(name, test, reason) for test, reason in (junit_skips(junit) if junit.is_file() else [])]
        note = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
        if not junit.is_file():
            note = "no pytest run" + ("" if ok else " (failed before or outside pytest)")
        if not ok and counts["failed"] == 0:
            counts["failed"] = 1
            note += f"; env failed with exit code {result.get('exit_code')}"
        for key in totals:
            totals[key] += counts[key]
        rows.append((name, "OK" if ok else "FAIL", float(result.get("duration", 0.0)), note))
    width = max((len(r[0]) for r in rows), default=4)
    print("\nper-env wall time (tox run-parallel; envs overlap):")
    for name, status, seconds, note in rows:
        print(f"  {name:<{width}}  {status:<4}  {seconds:7.1f} s  {note}")
    if skips:
        print(f"skipped ({len(skips)}), each with its reason:")
        for env, test, reason in skips[:SHOWN_SKIPS]:
            print(f"  {env}: {test}: {reason}")
        if len(skips) > SHOWN_SKIPS:
            print(f"  ... and {len(skips) - SHOWN_SKIPS} more ({junit_dir}/<env>.xml)")
    line = f"{totals['passed']} passed, {totals['failed']} failed"
    if totals["skipped"]:
        line += f", {totals['skipped']} skipped"
    print(line)
    return 1 if totals["failed"] or not rows else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} RESULT_JSON JUNIT_DIR")
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
