"""Every fault family the reference runtime can take actually fires in a ci run.

A family that is armed but never fires tests nothing while the report looks
busy; ``report.json``'s ``faults`` says armed and fired apart, and this holds
the generator to it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from engine_support import harness_cli

# One ci run of 130 examples, shared by the module: minutes, not seconds.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, int]]:
    folder = tmp_path_factory.mktemp("reference-ci")
    proc = harness_cli(
        "run",
        "--adapter",
        "reference",
        "--profile",
        "ci",
        "--max-examples",
        "130",
        "--report-dir",
        str(folder),
        cwd=folder,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report: dict[str, Any] = json.loads((folder / "report.json").read_text())
    assert report["verdict"] == "pass"
    result: dict[str, dict[str, int]] = report["faults"]
    return result


@pytest.mark.parametrize(
    "kinds",
    [
        ("crash_point",),
        ("clock",),
        ("continue",),  # a zombie worker woken after its lease expired
        ("duplicate_message",),
        ("forged_message",),
        ("wrong_role_message",),
        ("wrong_params_message",),
        ("world_fault", "effect_boundary"),
        ("lookup_fault",),  # a reconciling worker's lookup refused
        ("memory",),
        ("migration",),
    ],
    ids=lambda kinds: "|".join(kinds),
)
def test_each_fault_family_fires_in_a_ci_run_of_the_reference_runtime(
    faults: dict[str, dict[str, int]], kinds: tuple[str, ...]
) -> None:
    fired = {k: faults.get(k, {}).get("fired", 0) for k in kinds}
    assert sum(fired.values()) > 0, f"never fired: {fired}; all faults: {faults}"


def test_armed_world_rules_that_never_fire_show_as_armed_not_fired(
    faults: dict[str, dict[str, int]],
) -> None:
    for kind, counts in faults.items():
        assert 0 <= counts["fired"] <= counts["armed"], kind
    # A rule armed for a call no worker makes (the run already finished, or
    # gave up during an outage) stays unfired: world rules are world faults,
    # effect-boundary kills and outages alike.
    rules = [faults[k] for k in ("world_fault", "effect_boundary", "outage") if k in faults]
    assert sum(r["armed"] for r in rules) > sum(r["fired"] for r in rules)
