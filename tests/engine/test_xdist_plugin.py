"""``pytest -n 2 --harness-adapter reference``: one search, sharded over the
xdist workers, one merged report (not two searches writing one folder).

End to end with ``pytester`` in a subprocess, on a bounded plan (the dev
profile, 12 scenarios, seed 2), compared with the same search run here in
one process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import harness
from harness.testing import PROPERTIES

pytestmark = pytest.mark.usefixtures("plugin_env")


def _ids(folder: Path) -> list[str]:
    lines = (folder / "scenarios.jsonl").read_text().splitlines()
    return sorted(e["id"] for e in map(json.loads, lines) if e["phase"] == "search")


def test_xdist_workers_run_the_shards_of_one_search_and_the_controller_merges_them(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    result = pytester.runpytest_subprocess(
        "-n", "2", "-p", "xdist", "--harness-adapter", "reference", "--harness-profile", "dev",
        "--harness-seed", "2", "--harness-report-dir", str(reports), "-p", "no:cacheprovider",
    )  # fmt: skip
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and "error" not in outcomes, result.stdout.str()
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == len(PROPERTIES)
    result.stdout.fnmatch_lines(
        ["harness: one search in 2 shards (xdist workers), merged into *reference: verdict *"]
    )
    merged: dict[str, Any] = json.loads((reports / "reference" / "report.json").read_text())
    assert merged["merged"]["shards"] == [1, 2] and merged["merged"]["missing"] == []
    assert merged["planned_scenarios"] == 12, "one plan, not one per worker"
    # The same scenarios as the search in one process, each once.
    one = harness.run("reference", profile="dev", seed=2, report_dir=tmp_path / "one", jobs=1)
    assert merged["verdict"] == one.verdict
    assert _ids(reports / "reference") == _ids(tmp_path / "one")
    assert not list(reports.glob("**/shard-*")), "no worker wrote its own report folder there"
