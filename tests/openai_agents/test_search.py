"""Bounded searches from the CLI, as a user runs them: the naive agent fails, the careful passes.

Each search is the ``dev`` profile (targeted schedules, then a few sampled
scenarios) with a fixed seed, under a budget well above what it needs.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from oa_support import ADAPTER, CAREFUL, NAIVE

from harness.cli import main

pytestmark = pytest.mark.slow


def _search(app: str, folder: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    out = io.StringIO()
    argv = ["run", "--adapter", ADAPTER, "--adapter-opt", f"app={app}", "--profile", "dev"]
    code = main([*argv, "--seed", "0", *extra, "--report-dir", str(folder)], out=out)
    report = json.loads((folder / "report.json").read_text())
    return code, report, out.getvalue()


def test_a_short_search_finds_the_naive_agents_double_refund_and_doubled_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject settings apply
    code, report, out = _search(NAIVE, tmp_path / "naive", "--max-examples", "2", "--budget", "150")
    assert code == 1, out
    props = {p["name"]: p["verdict"] for p in report["properties"]}
    for name in ("exactly_once_effects", "state_equivalence", "context_rebuild"):
        assert props[name] == "fail", (name, out)
    assert "arm world fault kill_after_apply" in out, out


def test_a_search_of_the_careful_agent_passes_every_property_it_can_judge(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    code, report, out = _search(CAREFUL, tmp_path / "careful", "--budget", "150")
    assert code == 0, out
    props = {p["name"]: p["verdict"] for p in report["properties"]}
    judged = ("exactly_once_effects", "resume_equivalence", "progress", "legal_transitions")
    for name in (*judged, "state_equivalence", "context_rebuild"):
        assert props[name] == "pass", (name, out)
    # What the SDK adapter cannot offer is not tested, never passed.
    for name in ("memory_safety", "migration_safety", "effects_accounted"):
        assert props[name] == "not_tested", (name, out)
