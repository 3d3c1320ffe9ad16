"""scripts/summarize.py, the end of scripts/test.sh: per-env results, every skipped test with its reason,
and as the last line the count CI reads, `N passed, N failed[, N skipped]`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CORE = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="0" skipped="0" tests="2">
<testcase classname="tests.core.test_a" name="test_one" time="0.1"/>
<testcase classname="tests.core.test_a" name="test_two" time="0.1"/>
</testsuite></testsuites>
"""

RAY = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="2" tests="4">
<testcase classname="plugins.ray.tests.test_netns_cluster" name="test_head" time="0.0">
<skipped type="pytest.skip" message="no `nft` (apt-get install nftables) to give the namespaces their firewalls">
plugins/ray/tests/test_netns_cluster.py:205: no `nft`</skipped></testcase>
<testcase classname="plugins.ray.tests.test_netns_cluster" name="test_worker[w1]" time="0.0">
<skipped type="pytest.skip" message="making network namespaces needs root">x</skipped></testcase>
<testcase classname="plugins.ray.tests.test_plugin" name="test_ok" time="0.1"/>
<testcase classname="plugins.ray.tests.test_plugin" name="test_bad" time="0.1"><failure message="boom">x</failure>
</testcase>
</testsuite></testsuites>
"""


def _summarize(tmp_path: Path, junits: dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / "junit").mkdir()
    for env, text in junits.items():
        (tmp_path / "junit" / f"{env}.xml").write_text(text)
    envs = {env: {"result": {"success": "<failure" not in text, "duration": 1.5, "exit_code": 0}}
            for env, text in junits.items()}
    (tmp_path / "result.json").write_text(json.dumps({"testenvs": envs}))
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "summarize.py"), str(tmp_path / "result.json"),
                           str(tmp_path / "junit")], capture_output=True, text=True, timeout=60)


def test_skips_are_listed_with_their_reasons_above_the_closing_count(tmp_path):
    done = _summarize(tmp_path, {"core": CORE, "ray": RAY})
    assert done.returncode == 1  # a failure
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "3 passed, 1 failed, 2 skipped"
    assert lines[-4] == "skipped (2), each with its reason:"
    assert lines[-3] == ("  ray: plugins.ray.tests.test_netns_cluster::test_head: no `nft` (apt-get install "
                         "nftables) to give the namespaces their firewalls")
    assert lines[-2] == "  ray: plugins.ray.tests.test_netns_cluster::test_worker[w1]: making network namespaces needs root"


def test_without_skips_the_count_alone_closes(tmp_path):
    done = _summarize(tmp_path, {"core": CORE})
    assert done.returncode == 0
    assert done.stdout.strip().splitlines()[-1] == "2 passed, 0 failed"
    assert "skipped (" not in done.stdout
