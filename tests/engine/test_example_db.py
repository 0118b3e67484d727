"""``--example-db PATH|redis://...``: a failure one run found is replayed
first by the next, whatever its seed.

Real runs of the reference runtime with a seeded bug, by the command line;
the database is a folder, or the Redis of the test services.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_support import harness_cli, subprocess_env

from harness._exampledb import example_key, open_example_db
from harness.model import Scenario

BUG = ("--adapter-opt", "bug=no-idempotency-key")
SMALL = ("--profile", "dev", "--budget", "600")


def _json(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "report.json").read_text())
    return data


def _ledger(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "scenarios.jsonl").read_text().splitlines()]


def _id(folder: Path) -> str:
    """The ledger id of the scenario kept in ``folder``."""
    import hashlib

    scenario = Scenario.model_validate_json((folder / "scenario.json").read_bytes())
    return hashlib.sha256(scenario.model_dump_json().encode()).hexdigest()[:16]


def _found_then_replayed(db: str, tmp_path: Path, *more: str) -> None:
    first = tmp_path / "first"
    proc = harness_cli(
        "run", "--adapter", "reference", *BUG, *SMALL, "--max-examples", "20", "--seed", "2",
        "--example-db", db, "--report-dir", str(first), *more, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = re.search(r"kept (\d+) counterexample\(s\)", proc.stdout)
    assert said is not None, proc.stdout
    # one per property, or (with --jobs) one per shard that found it
    kept = int(said[1])
    found = _id(first)
    # Another seed, a plan too small to find the bug on its own.
    second = tmp_path / "second"
    proc = harness_cli(
        "run", "--adapter", "reference", *BUG, *SMALL, "--max-examples", "1", "--seed", "99",
        "--no-targeted", "--example-db", db, "--report-dir", str(second), *more, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"replaying its {kept} kept scenario(s) first" in proc.stdout, proc.stdout
    ledger = _ledger(second)
    failed_first = {e["id"] for e in _ledger(first) if e["failed"]}
    assert ledger[0]["id"] in failed_first, "a kept failure is the first scenario run"
    again = [e for e in ledger if e["id"] == found]
    assert again, "the reported counterexample is replayed"
    assert again[0]["failed"] == _ledger_failed(first, found)
    assert _json(second)["verdict"] == "fail"


def _ledger_failed(folder: Path, scenario_id: str) -> list[str]:
    return next(e["failed"] for e in _ledger(folder) if e["id"] == scenario_id)


def test_a_failure_kept_in_a_folder_is_the_first_scenario_of_the_next_run(tmp_path: Path) -> None:
    _found_then_replayed(str(tmp_path / "db"), tmp_path)
    assert any((tmp_path / "db").rglob("*")), "Hypothesis's folder database holds it"


def test_a_failure_kept_in_redis_is_replayed_by_the_next_run_with_two_jobs(
    redis_url: str, tmp_path: Path
) -> None:
    db = open_example_db(redis_url)
    key = example_key("reference", {"bug": "no-idempotency-key"})
    for value in list(db.fetch(key)):  # what an earlier run of this test kept
        db.delete(key, value)
    try:
        _found_then_replayed(redis_url, tmp_path, "--jobs", "2")
        assert len(list(db.fetch(key))) >= 1
    finally:
        for value in list(db.fetch(key)):
            db.delete(key, value)


def test_a_kept_scenario_that_no_longer_fails_is_dropped(tmp_path: Path) -> None:
    """Kept under the unbugged adapter's key, a scenario that passes there
    is replayed first, then dropped."""
    first = tmp_path / "first"
    harness_cli(
        "run", "--adapter", "reference", *BUG, *SMALL, "--max-examples", "20", "--seed", "2",
        "--report-dir", str(first), cwd=tmp_path,
    )  # fmt: skip
    scenario = Scenario.model_validate_json((first / "scenario.json").read_bytes())
    db = open_example_db(str(tmp_path / "db"))
    key = example_key("reference", {})
    db.save(key, scenario.model_dump_json().encode())
    second = tmp_path / "second"
    proc = harness_cli(
        "run", "--adapter", "reference", *SMALL, "--max-examples", "1", "--seed", "5",
        "--no-targeted", "--example-db", str(tmp_path / "db"), "--report-dir", str(second),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    assert _ledger(second)[0]["id"] == _id(first) and _ledger(second)[0]["failed"] == []
    assert "dropped 1 that no longer fail" in proc.stdout, proc.stdout
    assert list(db.fetch(key)) == []


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("FILE", "is a file, not a folder"),
        ("redis://127.0.0.1:1/0", "cannot reach Redis"),
        ("", "--example-db is empty"),
    ],
)
def test_an_example_db_that_cannot_be_used_exits_2(value: str, said: str, tmp_path: Path) -> None:
    if value == "FILE":
        value = str(tmp_path / "file")
        Path(value).write_text("x")
    proc = harness_cli(
        "run", "--adapter", "reference", *SMALL, "--max-examples", "1", "--example-db", value,
        "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr and "give --example-db a folder" in proc.stderr, proc.stderr


def test_an_example_db_outside_a_search_is_refused(tmp_path: Path) -> None:
    proc = harness_cli(
        "run", "--adapter", "reference", *SMALL, "--mode", "random-kill",
        "--example-db", str(tmp_path / "db"), "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--example-db keeps and replays a search's counterexamples" in proc.stderr


def test_jobs_replay_a_database_named_in_the_environment_once(tmp_path: Path) -> None:
    """The parent reads HARNESS_EXAMPLE_DB and hands the jobs its scenarios;
    a job reading it again would run each of them twice."""
    first = tmp_path / "first"
    harness_cli(
        "run", "--adapter", "reference", *BUG, *SMALL, "--max-examples", "20", "--seed", "2",
        "--example-db", str(tmp_path / "db"), "--report-dir", str(first), cwd=tmp_path,
    )  # fmt: skip
    second = tmp_path / "second"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--adapter", "reference", *BUG, *SMALL,
         "--max-examples", "2", "--seed", "7", "--no-targeted", "--jobs", "2",
         "--report-dir", str(second)],
        cwd=tmp_path, env=subprocess_env({"HARNESS_EXAMPLE_DB": str(tmp_path / "db")}),
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    ran = [e["id"] for e in _ledger(second) if e["phase"] == "search"]
    assert ran.count(_id(first)) == 1 and len(ran) == 3, ran
