"""``state_equivalence``: a duplicated message in durable state is a finding
that no other property can make."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_support import harness_cli

from harness.checkers._state import first_difference


def test_first_difference_names_the_path_and_both_full_values() -> None:
    long = "x" * 200
    a = {"session": [{"role": "user", "content": long}, {"role": "user", "content": long}]}
    b = {"session": [{"role": "user", "content": long}, {"role": "tool", "content": "ok"}]}
    assert first_difference(a, b) == ("$.session[1].content", long, "ok")
    path, mine, _ = first_difference({"k": [1, 2]}, {"k": [1]}) or ("", 0, 0)
    assert path == "$.k[1]" and mine == 2
    assert first_difference({"a": 1}, {"a": 1}) is None


@pytest.mark.parametrize("reappend", ["true", "false"])
def test_a_message_appended_again_on_resume_fails_state_equivalence_only(
    reappend: str, tmp_path: Path
) -> None:
    folder = tmp_path / "r"
    proc = harness_cli(
        "run",
        "--adapter",
        "chat_runtime:ChatAdapter",
        "--adapter-opt",
        f"reappend={reappend}",
        "--profile",
        "dev",
        "--seed",
        "1",
        "--report-dir",
        str(folder),
        cwd=tmp_path,
    )
    report = json.loads((folder / "report.json").read_text())
    verdicts = {p["name"]: p["verdict"] for p in report["properties"]}
    judged = {n: v for n, v in verdicts.items() if v != "not_tested"}
    if reappend == "false":
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert set(judged.values()) == {"pass"}, verdicts
        assert verdicts["state_equivalence"] == "pass"
        return
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert [n for n, v in judged.items() if v == "fail"] == ["state_equivalence"], verdicts
    message = next(p["message"] for p in report["properties"] if p["name"] == "state_equivalence")
    # the first differing path, both values in full
    assert "$.session[1]" in message and "please charge" in message
