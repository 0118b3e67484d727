"""The reference runtime passes every property on each backend variant, and
every fault kind it can take actually fires in the ci run on SQLite.

A family that is armed but never fires tests nothing while the report looks
busy; ``report.json``'s ``faults`` says armed and fired apart, and this holds
the generator to it.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from engine_support import harness_cli

from harness._settings import PROFILES
from harness.outcome import KIND_FAMILY

#: The SQLite variant's ci run is read by the fault-kind tests below too (one
#: run, not two): under pytest-xdist they stay on the worker that made it.
ON_SQLITE = pytest.mark.xdist_group("reference-ci-sqlite")

VARIANTS = [
    pytest.param(["backend=sqlite"], id="sqlite", marks=ON_SQLITE),
    pytest.param(["backend=sqlite", "queue=redis"], id="sqlite+redis", marks=pytest.mark.redis),
    pytest.param(["backend=postgres"], id="postgres", marks=pytest.mark.postgres),
    pytest.param(
        ["backend=postgres", "queue=redis"],
        id="postgres+redis",
        marks=[pytest.mark.postgres, pytest.mark.redis],
    ),
]


#: the fault kinds (report.json's ``faults``) by which each family shows it
#: fired: the harness's own map, so a new kind or family cannot drift from it
FAMILY_KINDS: dict[str, set[str]] = {}
for _kind, _family in KIND_FAMILY.items():
    FAMILY_KINDS.setdefault(_family, set()).add(_kind)


#: The variants with a server run the ci plan's first 60 scenarios, not its
#: 150: a scenario costs two to three times as much there (a schema or key
#: prefix each, network round trips, lost acknowledgements waited out), and
#: the plan puts every category's first schedule and every kind's first
#: ahead of the rest, so 60 already exercise every property and fire every
#: family (a kind armed and never fired would exit 3). Plain SQLite runs the
#: whole plan.
SERVER_PLAN = 60


def _planned(opts: tuple[str, ...] | list[str]) -> int:
    planned: int = PROFILES["ci"]["max_examples"]
    return planned if list(opts) == ["backend=sqlite"] else SERVER_PLAN


#: the ci run of each variant, made once per session (xdist worker)
_RUNS: dict[tuple[str, ...], tuple[subprocess.CompletedProcess[str], dict[str, Any]]] = {}


def _ci_run(
    opts: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``harness run`` of the whole ci profile on one variant, and its report."""
    if opts not in _RUNS:
        folder = tmp_path_factory.mktemp("ci-" + "-".join(opts).replace("=", "_"))
        # The point here is coverage, not the budget: on Postgres under a loaded
        # CI machine the ci profile's scenarios (each with a schema of its own) can
        # take longer than ci's 180 s, which would read "inconclusive".
        args = ["run", "--adapter", "reference", "--profile", "ci", "--budget", "800"]
        args += ["--max-examples", str(_planned(opts))]
        for o in opts:
            args += ["--adapter-opt", o]
        proc = harness_cli(*args, "--report-dir", str(folder), cwd=folder, timeout=900)
        written = folder / "report.json"
        # Kept even when the run failed: each test that reads it says so, and
        # none runs it again.
        _RUNS[opts] = proc, json.loads(written.read_text()) if written.exists() else {}
    return _RUNS[opts]


@pytest.mark.slow
# On Postgres the ci profile holds network faults (a lost acknowledgement
# costs the worker its 5 s network timeout): a loaded machine can take
# minutes, past the suite's 300 s default.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("opts", VARIANTS)
def test_the_ci_profile_exercises_every_property_and_fires_every_family(
    opts: list[str], tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    """The whole ci profile: exit 0 means every property was exercised and
    held and no fault kind was armed without firing; and every family the
    variant offers (storage only with a server to cut) fired at least once."""
    if any("postgres" in o for o in opts):
        request.getfixturevalue("postgres_url")
    if any("redis" in o for o in opts):
        request.getfixturevalue("redis_url")
    proc, report = _ci_run(tuple(opts), tmp_path_factory)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert report["verdict"] == "pass" and report["inconclusive"] == []
    assert {p["verdict"] for p in report["properties"]} == {"pass"}
    assert all(p["exercised"] > 0 for p in report["properties"])
    fired = {kind for kind, v in report["faults"].items() if v["fired"]}
    offered = set(report["families"])
    assert ("storage" in offered) == (opts != ["backend=sqlite"]), offered
    silent = {f for f in offered if not FAMILY_KINDS[f] & fired}
    assert not silent, (silent, report["faults"])
    # the plan, and past its targeted share the schedules of the commit x
    # fault pairs it misses: every pair the variant offers ran
    assert report["searched_scenarios"] == report["planned_scenarios"] >= _planned(opts)
    if opts == ["backend=sqlite"]:
        statuses = {p["status"] for p in report["commit_faults"]}
        assert statuses == {"covered", "not_offered"}, report["commit_faults"]
    assert "faults fired:" in proc.stdout


@pytest.fixture
def faults(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, int]]:
    """``report.json``'s ``faults`` of the SQLite variant's ci run."""
    proc, report = _ci_run(("backend=sqlite",), tmp_path_factory)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert report["verdict"] == "pass"
    result: dict[str, dict[str, int]] = report["faults"]
    return result


@pytest.mark.slow
@pytest.mark.timeout(900)
@ON_SQLITE
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
def test_each_fault_kind_fires_in_a_ci_run_of_the_reference_runtime(
    faults: dict[str, dict[str, int]], kinds: tuple[str, ...]
) -> None:
    fired = {k: faults.get(k, {}).get("fired", 0) for k in kinds}
    assert sum(fired.values()) > 0, f"never fired: {fired}; all faults: {faults}"


@pytest.mark.slow
@pytest.mark.timeout(900)
@ON_SQLITE
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
