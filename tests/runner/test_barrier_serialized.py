"""A barrier race the runtime serializes before the site is not tested, with why (issue 34).

Two workers are held at one crash point and released together. A correct
runtime may take its lock, lease or claim *before* that site: the second
worker then ends without reaching it, and nothing raced. That used to be
"armed, never fired" -- an inconclusive run whose hint blamed the
workflows' declarations. It is "not tested for that workflow", with the
reason, and never makes the run inconclusive.
"""

from __future__ import annotations

import io
from pathlib import Path

from harness._commands import _summary
from harness._settings import load_settings
from harness.adapters._loading import load_adapter
from harness.model import CrashSpec, Quiesce, ReleaseWorkers, RunSpec, RunWorker, Scenario, Submit
from harness.outcome import Draft, Example
from harness.outcome._verdicts import judge
from harness.report import Report, build_report, render_html, render_markdown
from harness.runner import run_scenario

ADAPTER = load_adapter("reference", {})
REFUND = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="refund",
    input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
)


def _barrier(tmp: Path, site: str) -> Scenario:
    return Scenario(
        name="barrier",
        steps=(
            Submit(run=REFUND),
            RunWorker(worker_id="b1", crash=CrashSpec(site=site, nth=1, action="pause")),
            RunWorker(worker_id="b2", crash=CrashSpec(site=site, nth=1, action="pause")),
            ReleaseWorkers(worker_ids=("b1", "b2")),
            Quiesce(),
        ),
    )


def test_a_race_serialized_before_the_site_is_not_tested_for_the_workflow(tmp_path: Path) -> None:
    # after_lease_acquire: b1 holds the run's lease there, so b2 finds
    # nothing to claim and ends without reaching the site
    done = run_scenario(ADAPTER, _barrier(tmp_path, "after_lease_acquire"), tmp_path / "r")
    cov = done.coverage
    assert cov.fired.get("race", 0) == 0
    assert cov.armed.get("race", 0) == 0, "a serialized race is not an armed fault"
    assert "race" not in cov.unfired, "an armed race's causes are not where it was not tested"
    [reason] = cov.untested["race"]
    assert "not tested for workflow refund" in reason
    assert "serialized the racers before the site" in reason
    assert "b2 ended without reaching it while b1 was held there" in reason
    j = judge(
        {},
        capabilities=[c.value for c in ADAPTER.capabilities],
        families=["race", "crash"],
        faults_armed=cov.armed,
        faults_fired=cov.fired,
        unfired=cov.unfired,
    )
    assert j.inconclusive == [], j.inconclusive
    assert not any("declared" in why for why in j.inconclusive)
    # b2's own crash point names why it did not fire, too
    assert any("serialized" in why for why in cov.unfired.get("crash_point", {}))


def _report(tmp_path: Path, *scenarios: Scenario) -> Report:
    outcome = Draft(
        adapter="reference",
        adapter_options={},
        capabilities=sorted(c.value for c in ADAPTER.capabilities),
        settings=load_settings("dev"),
        seed=0,
        families=["crash", "race"],
    )
    for i, scenario in enumerate(scenarios):
        done = run_scenario(ADAPTER, scenario, tmp_path / f"r{i}")
        outcome.account(Example(scenario, [], tmp_path / f"r{i}", done.coverage, 0.1))
    return build_report(outcome.freeze(), ADAPTER, "reference", {}, tmp_path / "report")


def test_a_serialized_race_is_no_cause_of_a_race_armed_and_never_fired(tmp_path: Path) -> None:
    # one barrier the runtime serialized, one that no racer reached (its
    # workers never started): the second is armed and never fired, and its
    # cause is not the first one's serialization
    serialized = _barrier(tmp_path, "after_lease_acquire")
    unreached = Scenario(name="unreached", steps=(Submit(run=REFUND), ReleaseWorkers(
        worker_ids=("b1", "b2")), Quiesce()))  # fmt: skip
    report = _report(tmp_path, serialized, unreached)
    assert (report.faults["race"].armed, report.faults["race"].fired) == (1, 0)
    [why] = [w for w in report.inconclusive if "race fault family" in w]
    assert "serialized" not in why, why
    assert "never reached where it was aimed (check the workflows'" in why, why
    md = render_markdown(report)
    armed = next(x for x in md.splitlines() if x.startswith("Armed but never fired"))
    assert "serialized" not in armed, armed
    line = next(x for x in md.splitlines() if x.startswith("Not tested:"))
    assert "race (not tested for workflow refund" in line, line


def test_a_serialized_race_is_said_even_where_another_race_fired(tmp_path: Path) -> None:
    report = _report(
        tmp_path,
        _barrier(tmp_path, "before_lease_acquire"),
        _barrier(tmp_path, "after_lease_acquire"),
    )
    assert report.faults["race"].fired == 1 and report.inconclusive == []
    out = io.StringIO()
    _summary(out, report, tmp_path / "report")
    line = next(x for x in out.getvalue().splitlines() if "not tested:" in x)
    assert "race (not tested for workflow refund" in line, line
    assert "serialized the racers" in render_html(report, tmp_path / "report")


def test_a_racer_that_never_ran_is_not_called_serialized(tmp_path: Path) -> None:
    # b2 never started (a shrunk scenario lost its step): only b1 was held,
    # but nothing serialized b2 -- the barrier was armed and not reached
    full = _barrier(tmp_path, "after_lease_acquire")
    scenario = Scenario(name="barrier", steps=tuple(s for s in full.steps if s != full.steps[2]))
    assert sum(isinstance(s, RunWorker) for s in scenario.steps) == 1
    cov = run_scenario(ADAPTER, scenario, tmp_path / "r").coverage
    assert cov.armed.get("race", 0) == 1 and cov.fired.get("race", 0) == 0
    assert not any("serialized" in why for why in cov.unfired.get("race", {}))


def test_a_race_both_workers_reach_still_fires(tmp_path: Path) -> None:
    done = run_scenario(ADAPTER, _barrier(tmp_path, "before_lease_acquire"), tmp_path / "r")
    assert done.coverage.fired.get("race", 0) == 1
    assert "race" not in done.coverage.unfired


def test_the_report_says_not_tested_with_the_reason(tmp_path: Path) -> None:
    scenario = _barrier(tmp_path, "after_lease_acquire")
    done = run_scenario(ADAPTER, scenario, tmp_path / "r")
    outcome = Draft(
        adapter="reference",
        adapter_options={},
        capabilities=sorted(c.value for c in ADAPTER.capabilities),
        settings=load_settings("dev"),
        seed=0,
        families=["crash", "race"],
    )
    outcome.account(Example(scenario, [], tmp_path / "r", done.coverage, 0.1))
    report = build_report(outcome.freeze(), ADAPTER, "reference", {}, tmp_path / "report")
    assert report.faults["race"].armed == 0
    assert report.inconclusive == []
    md = render_markdown(report)
    line = next(x for x in md.splitlines() if x.startswith("Not tested:"))
    assert "race" in line and "serialized the racers before the site" in line
    html = render_html(report, tmp_path / "report")
    assert "not tested</span>" in html or "not tested:" in html
    assert "check the workflows" not in md + html
    out = io.StringIO()
    _summary(out, report, tmp_path / "report")
    line = next(x for x in out.getvalue().splitlines() if "not tested:" in x)
    assert "race (not tested for workflow refund" in line
