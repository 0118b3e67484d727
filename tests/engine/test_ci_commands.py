"""The commands docs/ci.md gives a CI matrix, run here: two shards with a
shared example database, then ``harness merge`` into one report (and the
step summary), against the same search in one process.

Real runs of the reference runtime with a seeded bug, on a small plan
(``--profile dev --max-examples 20 --seed 2``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from engine_support import harness_cli, subprocess_env

from harness._exampledb import example_key, open_example_db
from harness.model import Scenario

PLAN = ("--profile", "dev", "--max-examples", "20", "--seed", "2", "--budget", "600")
BUG = ("--adapter-opt", "bug=no-idempotency-key")


def _json(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "report.json").read_text())
    return data


def _plan(folder: Path) -> list[str]:
    lines = (folder / "scenarios.jsonl").read_text().splitlines()
    return sorted(e["id"] for e in map(json.loads, lines) if e["phase"] == "search")


def test_two_shards_and_a_merge_are_the_unsharded_search_and_keep_what_they_found(
    tmp_path: Path,
) -> None:
    db = tmp_path / "harness-db"
    key = example_key("reference", {"bug": "no-idempotency-key"})
    for k in (1, 2):
        proc = harness_cli(
            "run", "--adapter", "reference", *BUG, *PLAN, "--shard", f"{k}/2",
            "--report-dir", str(tmp_path / f"shard-{k}"), "--example-db", str(db), cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode in (0, 1, 3), proc.stdout + proc.stderr
        assert "read only in a shard" in proc.stdout, proc.stdout
    assert list(open_example_db(str(db)).fetch(key)) == [], "a shard only reads the database"

    summary = tmp_path / "step-summary.md"
    merged = tmp_path / "merged"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "merge", str(tmp_path / "shard-1"),
         str(tmp_path / "shard-2"), "--report-dir", str(merged), "--example-db", str(db)],
        cwd=tmp_path, env=subprocess_env({"GITHUB_STEP_SUMMARY": str(summary)}),
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert summary.read_text() == (merged / "summary.md").read_text()
    kept = set(open_example_db(str(db)).fetch(key))
    folders = [merged] + [merged / o["folder"] for o in _json(merged)["other_failures"]]
    found = {
        Scenario.model_validate_json((f / "scenario.json").read_bytes()).model_dump_json().encode()
        for f in folders
    }
    assert kept == found, "every counterexample is kept, and nothing else"

    whole = tmp_path / "whole"
    proc = harness_cli(
        "run", "--adapter", "reference", *BUG, *PLAN, "--report-dir", str(whole), cwd=tmp_path
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # Every scenario of the unsharded plan, exactly once; the same verdicts.
    assert _plan(merged) == _plan(whole)
    assert len(set(_plan(merged))) == len(_plan(merged))
    m, w = _json(merged), _json(whole)
    assert m["verdict"] == w["verdict"] == "fail"
    assert {p["name"]: p["verdict"] for p in m["properties"]} == {
        p["name"]: p["verdict"] for p in w["properties"]
    }
