"""The reference runtime passes every property on each backend variant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_support import harness_cli

VARIANTS = [
    pytest.param(["backend=sqlite"], id="sqlite"),
    pytest.param(["backend=sqlite", "queue=redis"], id="sqlite+redis", marks=pytest.mark.redis),
    pytest.param(["backend=postgres"], id="postgres", marks=pytest.mark.postgres),
    pytest.param(
        ["backend=postgres", "queue=redis"],
        id="postgres+redis",
        marks=[pytest.mark.postgres, pytest.mark.redis],
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("opts", VARIANTS)
def test_the_ci_profile_passes_every_property_and_fires_faults(
    opts: list[str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if any("postgres" in o for o in opts):
        request.getfixturevalue("postgres_url")
    if any("redis" in o for o in opts):
        request.getfixturevalue("redis_url")
    args = ["run", "--adapter", "reference", "--profile", "ci", "--max-examples", "30"]
    for o in opts:
        args += ["--adapter-opt", o]
    proc = harness_cli(*args, "--report-dir", str(tmp_path), cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "pass"
    assert {p["verdict"] for p in report["properties"]} == {"pass"}
    fired = {kind: v["fired"] for kind, v in report["faults"].items() if v["fired"]}
    assert {"crash_point", "lease_wait"} <= set(fired), report["faults"]
    assert report["scenarios"] == 30
    assert "faults fired:" in proc.stdout
