"""Seeded bugs: each is off by default, switched on by name, and the harness
finds it in the ``ci`` profile, names the property it breaks, and shrinks it to
a small counterexample.

The harness runs are real (``harness run`` in a subprocess, real worker
processes), bounded by ``--budget`` so the folder stays within minutes. Each
bug is found by one of the targeted schedules that run before sampling
(``scenarios/_targeted.py``); the test does not care which.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main as harness_main
from reference_runtime import ConfigError, RuntimeConfig
from reference_runtime._bugs import BUGS, parse_bugs

#: the bound on a shrunk counterexample: scenario steps, and steps that are faults
MAX_STEPS = 8
MAX_FAULT_STEPS = 3

#: bugs about concurrency and leases, also run on Postgres
ON_POSTGRES = ("no-version-check", "no-fencing", "ack-before-commit", "non-atomic-checkpoint")
#: bugs only a network fault reveals: they need Postgres and a network backend,
#: so the ci profile's search for them runs in tests/network
#: (test_ci_profile_network.py), and an explicit scenario catches each too
#: (test_retry_unknown_commit.py, test_commit_lost.py: Toxiproxy)
NETWORK_ONLY = ("retry-unknown-commit", "commit-lost-as-applied")


def _env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "GITHUB_STEP_SUMMARY")
        and not (k.startswith("HARNESS_") and not k.endswith("_URL"))
    }


def _harness(
    tmp_path: Path, *args: str, families: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = _env()
    if families is not None:
        env["HARNESS_FAMILIES"] = families
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args, "--report-dir", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def fault_steps(scenario: dict[str, Any]) -> int:
    """Steps of a scenario that inject a fault (not submits, plain workers,
    valid single decisions or the quiesce)."""
    n = 0
    for step in scenario["steps"]:
        op = step["op"]
        if op == "run_worker":
            n += step.get("crash") is not None or step.get("code_version") is not None
        elif op == "approve":
            n += (
                step.get("variant") != "valid"
                or step.get("copies", 1) > 1
                or step.get("fresh_copies", 0) > 0
            )
        elif op in (
            "advance_clock",
            "arm_world_fault",
            "inject_memory",
            "storage_fault",
            "kill_worker",
            "kill_after",
            "race_workers",
            "cancel",
            "network_fault",
        ):
            n += 1
    return n


#: The search's budget: a bound, not what a run takes (it stops at the first
#: failure). A budget a busy machine runs out of (pytest -n 4 on two cores,
#: other jobs) makes the search drop its targeted schedules and miss the bug.
BUDGET = 150
#: a scenario costs about four times as much on Postgres (a schema per
#: scenario, network round trips)
BUDGET_POSTGRES = 700
#: On Postgres, no-fencing's search keeps to the family that aims at it: the
#: whole ci plan reaches its onboarding zombie schedule near its 120th place
#: (two minutes there); the whole plan finding it is held on SQLite above.
FAMILIES_ON_POSTGRES = {"no-fencing": "zombie"}


def _detects(
    bug: str, tmp_path: Path, *opts: str, budget: int = BUDGET, families: str | None = None
) -> None:
    # Detection only: stop at the first failure (the full search is tested elsewhere).
    args = ["run", "--adapter", "reference", "--profile", "ci", "--budget", str(budget)]
    args += ["--stop-on-first"]
    for o in (f"bug={bug}", *opts):
        args += ["--adapter-opt", o]
    proc = _harness(tmp_path, *args, families=families)
    out = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 1, out
    report = json.loads((tmp_path / "report.json").read_text())
    failed = {p["name"] for p in report["properties"] if p["verdict"] == "fail"}
    assert BUGS[bug].breaks in failed, (failed, out)
    scenario = json.loads((tmp_path / "scenario.json").read_text())
    assert len(scenario["steps"]) <= MAX_STEPS, out
    assert fault_steps(scenario) <= MAX_FAULT_STEPS, out
    assert "replay: harness replay" in proc.stdout


def _params(names: list[str], *marks: Any) -> list[Any]:
    return [pytest.param(name, id=name, marks=list(marks)) for name in names]


@pytest.mark.slow
@pytest.mark.timeout(600)  # the budget, shrinking and start-up under load
@pytest.mark.parametrize("bug", _params([b for b in BUGS if b not in NETWORK_ONLY]))
def test_the_ci_profile_finds_each_seeded_bug_on_sqlite(bug: str, tmp_path: Path) -> None:
    _detects(bug, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(1000)  # the budget, shrinking and start-up under load
@pytest.mark.parametrize("bug", _params(list(ON_POSTGRES), pytest.mark.postgres))
def test_the_ci_profile_finds_the_concurrency_bugs_on_postgres(
    bug: str, tmp_path: Path, postgres_url: str
) -> None:
    _detects(
        bug,
        tmp_path,
        "backend=postgres",
        budget=BUDGET_POSTGRES,
        families=FAMILIES_ON_POSTGRES.get(bug),
    )


def test_every_bug_names_a_property_of_the_harness() -> None:
    from harness.checkers import CHECKERS

    assert {b.breaks for b in BUGS.values()} <= set(CHECKERS)
    assert all(b.layer in ("store", "executor", "workflow") for b in BUGS.values())


def test_bugs_round_trip_through_the_environment_and_are_off_by_default() -> None:
    cfg = RuntimeConfig(store_url="sqlite:///tmp/x.db")
    assert cfg.bugs == frozenset()
    assert RuntimeConfig.from_env(cfg.to_env()).bugs == frozenset()
    buggy = cfg.with_(bugs=frozenset({"no-fencing", "ack-before-commit"}))
    assert buggy.to_env()["RR_BUGS"] == "ack-before-commit,no-fencing"
    assert RuntimeConfig.from_env(buggy.to_env()).bugs == buggy.bugs


def test_an_unknown_bug_is_refused_with_the_catalogue() -> None:
    with pytest.raises(ConfigError) as info:
        RuntimeConfig(store_url="sqlite:///tmp/x.db", bugs=frozenset({"no-fencin"}))
    message = str(info.value)
    assert "'no-fencin'" in message
    assert all(name in message for name in BUGS)
    with pytest.raises(ConfigError):
        RuntimeConfig.from_env({"RR_STORE": "sqlite:///tmp/x.db", "RR_BUGS": "nope"})
    assert parse_bugs(" no-fencing , ") == {"no-fencing"}


def test_the_adapter_option_refuses_an_unknown_bug(capsys: pytest.CaptureFixture[str]) -> None:
    code = harness_main(["run", "--adapter", "reference", "--adapter-opt", "bug=nope"])
    assert code == 2
    assert "unknown seeded bug 'nope'" in capsys.readouterr().err


def test_harness_list_bugs_prints_one_line_per_bug() -> None:
    import io

    out = io.StringIO()
    assert harness_main(["list", "bugs"], out=out) == 0
    lines = out.getvalue().splitlines()
    for bug in BUGS.values():
        (line,) = [ln for ln in lines if ln.startswith(bug.name + " ")]
        assert bug.breaks in line


def test_harness_list_bugs_asks_the_adapter_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The catalogue is the adapter's (its optional ``seeded_bugs()``), not
    the command line's: another adapter lists its own, or says it has none."""
    import io

    (tmp_path / "bugged_toy.py").write_text(
        "from dataclasses import dataclass\n"
        "from examples.minimal_adapter.adapter import ToyAdapter\n\n"
        "@dataclass(frozen=True)\n"
        "class Bug:\n"
        "    name: str\n"
        "    breaks: str\n"
        "    description: str\n\n"
        "class BuggedToy(ToyAdapter):\n"
        "    def seeded_bugs(self):\n"
        "        return [Bug('unkeyed', 'exactly_once_effects', 'keyed=false, by its name')]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = io.StringIO()
    assert harness_main(["list", "bugs", "--adapter", "bugged_toy:BuggedToy"], out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("seeded bugs of bugged_toy:BuggedToy (")
    assert lines[1:] == [
        f"{'unkeyed':28} breaks {'exactly_once_effects':21} keyed=false, by its name"
    ]
    assert not any(bug in out.getvalue() for bug in BUGS)

    out = io.StringIO()
    spec = "examples.minimal_adapter.adapter:ToyAdapter"
    assert harness_main(["list", "bugs", "--adapter", spec], out=out) == 0
    assert (
        out.getvalue() == f"adapter {spec} has no seeded bugs (it defines no seeded_bugs() hook)\n"
    )
    assert harness_main(["list", "faults", "--adapter", spec]) == 2
    assert "(--adapter also with 'harness list bugs')" in capsys.readouterr().err


def test_counting_fault_steps() -> None:
    scenario = {
        "steps": [
            {"op": "submit"},
            {"op": "run_worker", "crash": None},
            {"op": "run_worker", "crash": {"site": "x"}},
            {"op": "approve", "variant": "valid", "copies": 1, "fresh_copies": 0},
            {"op": "approve", "variant": "valid", "copies": 2, "fresh_copies": 0},
            {"op": "advance_clock"},
            {"op": "quiesce"},
        ]
    }
    assert fault_steps(scenario) == 3


ZOMBIE_ON_RESEARCH = {
    "name": "zombie commits after another worker finished the run",
    "steps": [
        {
            "op": "submit",
            "run": {
                "run_id": "r1",
                "tenant": "acme",
                "workflow": "research",
                "input": {"topic": "tides", "sources": 2, "requester": "u-1"},
            },
        },
        # Paused before the end of gathering, a commit that writes no memory:
        # a zombie's memory write would also be refused, its version taken by
        # the worker that finished the run (MemoryConflictError).
        {
            "op": "run_worker",
            "worker_id": "z1",
            "crash": {"site": "before_step_commit", "nth": 3, "action": "pause"},
        },
        {"op": "advance_clock", "seconds": 31},
        {"op": "run_worker", "worker_id": "w2"},
        {"op": "continue_worker", "worker_id": "z1"},
        {"op": "quiesce"},
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("bugs", "fails"),
    [
        ("no-version-check", False),
        ("no-fencing", False),
        ("no-version-check,no-fencing", True),
    ],
)
def test_the_version_check_and_fencing_each_stop_a_zombie_commit_alone(
    bugs: str, fails: bool, tmp_path: Path
) -> None:
    from harness import Engine, load_settings
    from harness.adapters._loading import load_adapter
    from harness.model import Scenario, Verdict

    engine = Engine(load_adapter("reference", {"bug": bugs}), load_settings("ci"), workdir=tmp_path)
    example = engine.execute(Scenario.model_validate(ZOMBIE_ON_RESEARCH))
    verdicts = {r.name: r.verdict for r in example.results}
    assert example.failed is fails, verdicts
    if fails:
        # two writers both committed from one state_version: a fork
        assert verdicts["legal_transitions"] is Verdict.FAIL
