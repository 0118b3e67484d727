"""Planning a search on real time (issue 18): the targeted list's order, the
upgrade mid-run of an adapter without crash points, what fits the budget,
and shrinking on a budget of its own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_support import harness_cli
from upgrade_toy import UpgradeToy

import harness
from harness._settings import load_settings
from harness.adapters.reference import ReferenceAdapter
from harness.model import PropertyResult, Verdict
from harness.outcome import Draft, Tally
from harness.scenarios import Universe, probe_universe, targeted
from harness.session import Engine
from harness.session._plan import (
    MEASURED_RUNS,
    SHRINK_SHARE,
    budget_fit,
    left_for_sampling,
    shrink_deadline,
)

#: the category of a targeted schedule, by the kind its name carries
#: (``targeted/WORKFLOW/KIND/...``)
CATEGORY = {
    "kill_after_apply": "world kills",
    "duplicate_decision": "messages",
    "forged_decision": "messages",
    "wrong_role_decision": "messages",
    "wrong_params_decision": "messages",
    "forged_rejection": "messages",
    "cross_tenant_decision": "messages",
    "cross_tenant_event": "messages",
    "misdirected_decision": "messages",
    "changed_mind": "messages",
    "memory": "memory",
    "tenant_twin": "tenant twins",
    "run_twin": "run twins",
    "deliver_while_held": "held deliveries",
    "last_window": "last window",
    "memory_while_down": "memory while down",
    "upgrade_mid_run": "upgrades",
    "rollback": "rollbacks",
    "outage_before": "outages",
    "outage_after": "outages",
    "kill_in_first_commit": "first commit",
    "cancel_while_held": "operator",
    "kill_before": "kills before",
    "zombie_before": "zombies",
    "storage_cut_in_commit": "storage",
    "storage_cut_idle": "storage",
    "apply_then_timeout": "world modes",
    "timeout_before_apply": "world modes",
    "reject": "world modes",
    "kill_before_apply": "world modes",
    "slow": "world modes",
    "service_down": "service outages",
    "lookup_reject": "lookup refusals",
    "lookup_timeout_before_apply": "lookup refusals",
    "memory_before_clock": "memory and clock",
    "memory_after_clock": "memory and clock",
    "kill_after_handoff": "commit kills",
    "kill_after_commit": "commit kills",
    "barrier_race": "barriers",
    "deadline_passes": "deadlines",
    "deadline_boundary": "deadlines",
    "commit_ack_lost": "network",
    "reset_mid_transaction": "network",
    "partition": "network",
    "commit_fault": "commit faults",
}


@pytest.fixture(scope="module")
def reference_universe() -> Universe:
    return probe_universe(ReferenceAdapter())


def test_every_category_gets_its_first_round_before_any_gets_a_second(
    reference_universe: Universe,
) -> None:
    names = [s.name for s in targeted(reference_universe)]
    cats = [CATEGORY[n.split("/")[2]] for n in names]
    first = {c: cats.index(c) for c in set(cats)}
    # the first commit's kills are two categories (its ends, its middle)
    seconds = [
        i for i, c in enumerate(cats) if i != first[c] and not (c == "first commit" and i < 20)
    ]
    assert len(first) >= 14, sorted(first)  # every category the reference offers
    assert max(first.values()) < min(seconds), (names[: len(first) + 2], sorted(first.items()))


def test_the_order_is_the_same_each_time(reference_universe: Universe) -> None:
    again = probe_universe(ReferenceAdapter())
    first, second = targeted(reference_universe), targeted(again)
    assert [s.model_dump_json() for s in first] == [s.model_dump_json() for s in second]


@pytest.fixture
def engine_for() -> Iterator[type[Engine]]:
    engines: list[Engine] = []

    def make(adapter: UpgradeToy) -> Engine:
        engine = Engine(adapter, load_settings("dev", seed=0))
        engines.append(engine)
        return engine

    yield make  # type: ignore[misc]
    for engine in engines:
        engine.close()


def _upgrades(u: Universe) -> list[str]:
    return [s.name for s in targeted(u) if s.name.split("/")[2] == "upgrade_mid_run"]


def test_without_crash_points_the_old_code_is_stopped_at_each_effect(
    reference_universe: Universe,
) -> None:
    u = probe_universe(UpgradeToy())
    assert not u.crash_points
    assert _upgrades(u) == [
        "targeted/order/upgrade_mid_run/kill_after_apply/payments.charge",
        "targeted/order/upgrade_mid_run/kill_after_apply/email.send",
        "targeted/order/upgrade_mid_run",
    ]
    # with crash points, the old code stops where its run waits; a gated
    # run is also decided and finished by the old code alone
    assert _upgrades(reference_universe) == [
        *(
            f"targeted/{wf}/upgrade_mid_run"
            for wf in ("refund", "onboarding", "research", "procurement")
        ),
        *(
            f"targeted/{wf}/upgrade_mid_run/decided_by_older_release"
            for wf in ("refund", "onboarding")
        ),
    ]


def _failed(engine: Engine, name: str, u: Universe) -> list[str]:
    scenario = next(s for s in targeted(u) if s.name == name)
    example = engine.execute(scenario)
    return [r.name for r in example.results if r.verdict is Verdict.FAIL]


def test_a_reordering_release_is_found_only_when_old_code_stops_mid_run(engine_for) -> None:  # type: ignore[no-untyped-def]
    buggy = UpgradeToy("step")
    u = probe_universe(buggy)
    engine = engine_for(buggy)
    # old code run to its end, then the new release: nothing to see
    assert _failed(engine, "targeted/order/upgrade_mid_run", u) == []
    # old code killed right after its charge, resumed by the new release:
    # the charge again, under another key
    name = "targeted/order/upgrade_mid_run/kill_after_apply/payments.charge"
    failed = _failed(engine, name, u)
    assert "exactly_once_effects" in failed, failed
    # the same schedule against a release that keys calls by what they do
    careful = UpgradeToy("action")
    assert _failed(engine_for(careful), name, probe_universe(careful)) == []


def test_what_fits_a_budget() -> None:
    assert budget_fit(150, 180.0, 3.6) == 50
    assert budget_fit(150, 180.0, 0.2) == 150
    assert budget_fit(150, 180.0, 0.0) == 150  # free: all of it
    assert budget_fit(150, 180.0, None) is None  # not known
    assert budget_fit(10, 5.0, 2.0) == 3  # one started just in time counts


def test_a_declared_cost_plans_the_budget_before_the_search(tmp_path: Path) -> None:
    lines: list[str] = []
    report = harness.run(
        UpgradeToy("action", scenario_seconds="30"),
        profile="dev",
        seed=0,
        budget=60,
        report_dir=tmp_path / "r",
        log=lines.append,
    )
    plan = next(line for line in lines if line.startswith("harness: plan:"))
    assert "12 scenarios" in plan, plan
    assert "at about 30 s a scenario (declared by the adapter)" in plan, plan
    assert "about 2 fit in the 60 s budget: the other 10 will not run" in plan, plan
    assert "--budget 360" in plan, plan
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert data["fit_scenarios"] == 2
    assert data["scenario_seconds"] == 30.0
    assert data["scenario_cost"] == "declared"
    assert report.plan_line() is not None
    assert "about 2 expected to fit the budget" in (report.plan_line() or "")


def test_a_cost_not_declared_is_measured_from_the_fault_free_runs(tmp_path: Path) -> None:
    lines: list[str] = []
    harness.run(UpgradeToy("action"), profile="dev", seed=0, report_dir=tmp_path, log=lines.append)
    plan = next(line for line in lines if line.startswith("harness: plan:"))
    assert f"(measured: {MEASURED_RUNS:g} x the median fault-free run)" in plan, plan
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["scenario_cost"] == "measured" and data["scenario_seconds"] > 0
    assert 0 < data["fit_scenarios"] <= data["planned_scenarios"]


@pytest.mark.parametrize("bad", ["-1", "nan"])
def test_a_bad_declared_cost_is_refused_with_the_fix(bad: str, tmp_path: Path) -> None:
    with pytest.raises(harness.UsageError, match=r"scenario_seconds=.*a number >= 0"):
        harness.run(UpgradeToy("action", scenario_seconds=bad), profile="dev", report_dir=tmp_path)


def test_a_plan_the_budget_cut_says_plainly_what_it_did_not_exercise(tmp_path: Path) -> None:
    """The reference on the ci plan with a 1 s budget: most of the plan is not
    run, and the run is inconclusive, naming what it left out."""
    proc = harness_cli(
        "run", "--adapter", "reference", "--profile", "ci", "--budget", "1",
        "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout + proc.stderr
    # the ci plan: 150, and the schedules past its targeted share that run
    # the commit x fault pairs the share does not reach (12 on SQLite)
    said_plan = re.search(
        r"harness: plan: (\d+) scenarios \((\d+) targeted: 120 plus (\d+) for the commit x "
        r"fault pairs those miss; 30 sampled\)",
        proc.stdout,
    )
    assert said_plan is not None, proc.stdout
    planned, added = int(said_plan[1]), int(said_plan[3])
    assert planned == 150 + added and int(said_plan[2]) == 120 + added and 0 < added <= 30
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert data["planned_scenarios"] == planned
    ran = data["searched_scenarios"]
    assert data["verdict"] == "unknown" and ran < planned
    said = [r for r in data["inconclusive"] if r.startswith("not exercised: ")]
    assert len(said) == 1, data["inconclusive"]
    assert "sampled scenarios" in said[0] and "--budget" in said[0], said
    assert "among them every schedule of " in said[0], said  # the kinds none of which ran
    # what did not run adds up with what ran to the plan
    unrun = re.match(r"not exercised: (\d+) targeted schedules and (\d+) sampled", said[0])
    assert unrun is not None, said
    assert int(unrun[1]) + int(unrun[2]) + ran == planned, said
    assert f"ran {ran} of {planned} planned scenarios (" in proc.stdout


def test_shrinking_has_a_budget_of_its_own() -> None:
    s = load_settings("dev", budget_seconds=100.0)
    # the search ended early: shrinking may use the rest of --budget
    assert shrink_deadline(now=30.0, search_started=0.0, s=s) == 100.0
    # the search spent its budget: shrinking still gets its own share
    assert shrink_deadline(now=100.0, search_started=0.0, s=s) == 100.0 + SHRINK_SHARE * 100.0
    given = s.with_(shrink_budget_seconds=7.0)
    assert shrink_deadline(now=100.0, search_started=0.0, s=given) == 107.0


def test_a_counterexample_shrinking_stopped_is_reported_not_fully_shrunk(tmp_path: Path) -> None:
    """Every scenario of this toy fails; a search the budget ends at its
    first scenario, with no time of its own for shrinking, keeps that
    scenario unshrunk and says so."""
    cut = harness.run(
        UpgradeToy("twice"),
        profile="dev",
        seed=0,
        targeted=False,
        budget=0.001,
        shrink_budget=0,
        report_dir=tmp_path / "cut",
    )
    assert cut.verdict == "fail" and cut.counterexample is not None
    assert cut.counterexample.fully_shrunk is False
    data = json.loads((tmp_path / "cut" / "report.json").read_text())
    assert data["counterexample"]["fully_shrunk"] is False
    # with time for it, the same failure is shrunk to the end
    shrunk = harness.run(
        UpgradeToy("twice"),
        profile="dev",
        seed=0,
        targeted=False,
        max_examples=3,
        budget=600,
        report_dir=tmp_path / "full",
    )
    assert shrunk.counterexample is not None and shrunk.counterexample.fully_shrunk


def test_the_cli_says_a_counterexample_is_not_fully_shrunk(tmp_path: Path) -> None:
    proc = harness_cli(
        "run", "--adapter", "upgrade_toy:UpgradeToy", "--adapter-opt", "keyed=twice",
        "--profile", "dev", "--no-targeted", "--budget", "0.001", "--shrink-budget", "0",
        "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "counterexample (not fully shrunk: shrinking stopped at --shrink-budget)" in proc.stdout


def test_a_negative_shrink_budget_is_refused(tmp_path: Path) -> None:
    proc = harness_cli(
        "run", "--adapter", "reference", "--shrink-budget", "-1",
        "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "shrink-budget=-1.0 is out of range" in proc.stderr


def _cut(**fields: object) -> Draft:
    """A search of 10 planned scenarios (8 targeted, 2 sampled) that the
    budget cut after 6, every property exercised and held (the session's
    draft: frozen into an Outcome to be judged)."""
    outcome = Draft(
        adapter="toy", adapter_options={}, capabilities=[], settings=load_settings("dev"),
        seed=0, planned=10, searched=6, budget_cut=True, breadth_first=True, sampled_planned=2,
        not_run_targeted=["targeted/wf/kill_before/a.b"] * 4,
    )  # fmt: skip
    outcome.tallies["progress"] = Tally()
    outcome.tallies["progress"].add(
        PropertyResult(name="progress", verdict=Verdict.PASS, message="held", evidence=3)
    )
    for k, v in fields.items():
        setattr(outcome, k, v)
    return outcome


def test_a_cut_that_tried_every_kind_and_sampled_earns_its_verdict_and_says_what_did_not_run() -> (
    None
):
    outcome = _cut(sampled_searched=1).freeze()
    judgement = outcome.judgement()
    assert judgement.verdict is Verdict.PASS, judgement.inconclusive
    assert outcome.not_exercised().startswith("not exercised: 4 targeted schedules of the plan")


@pytest.mark.parametrize(
    "gap",
    [
        {"sampled_searched": 0},  # a sampled part was planned and none ran
        {"sampled_searched": 1, "unreached_kinds": ["kill_before"]},  # a kind never ran
        {"sampled_searched": 0, "searched": 0},  # nothing ran
        {"sampled_searched": 1, "breadth_first": False},  # random kills: any cut
    ],
)
def test_a_cut_that_left_a_blind_spot_is_inconclusive(gap: dict[str, object]) -> None:
    outcome = _cut(**gap).freeze()
    judgement = outcome.judgement()
    assert judgement.verdict is Verdict.UNKNOWN
    said = [r for r in judgement.inconclusive if r.startswith("not exercised: ")]
    assert said, judgement.inconclusive
    if gap.get("unreached_kinds"):
        assert "every schedule of kill_before" in said[0]


def test_sampling_gets_its_share_of_a_budget_too_short_for_the_plan() -> None:
    """At 1 s a scenario with 100 s left, after 10 scenarios: 110 fit in all,
    a fifth of them (22) is sampling's, so the targeted schedules go on while
    more than 22 fit, and stop once the rest of the budget is sampling's."""
    outcome = _cut(budget_cut=False, searched=10, sampled_planned=30)
    assert not left_for_sampling(outcome, 10.0, 110.0)  # 10 scenarios in 10 s
    assert left_for_sampling(outcome, 95.0, 110.0)  # 15 s left: about 15 fit, 21 is sampling's
    # no sampled part planned: the targeted schedules use the whole budget
    assert not left_for_sampling(
        _cut(budget_cut=False, searched=10, sampled_planned=0), 10.0, 110.0
    )


def test_a_search_whose_budget_is_spent_before_it_samples_still_runs_one_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No targeted schedules, and the budget spent before the sampled phase
    begins (CI's load did it with --budget 0.001): the search still runs one
    scenario, as the aimed phase does. It ran none and said PASS, with no
    property judged."""
    monkeypatch.setattr(Engine, "over_budget", lambda self: True)  # spent from the start
    out = harness.run(
        UpgradeToy("twice"),
        profile="dev",
        seed=0,
        targeted=False,
        budget=1,
        shrink_budget=0,
        report_dir=tmp_path / "r",
    )
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert data["searched_scenarios"] == 1, data["searched_scenarios"]
    assert out.verdict == "fail"  # every scenario of this toy fails


def test_a_run_that_judged_no_property_is_never_a_pass() -> None:
    from harness.outcome._verdicts import judge

    nothing = judge(
        {}, capabilities=(), families=(), faults_armed={}, faults_fired={}, planned=12, ran=0
    )
    assert any("no scenario ran" in why for why in nothing.inconclusive), nothing.inconclusive


def test_the_report_names_the_targeted_schedules_the_budget_cut(tmp_path: Path) -> None:
    """A plan cut by its budget names each targeted schedule it did not run
    (issue 28: a mistake caught on one backend was missed on another whose
    plan the budget cut, and the report said only how many)."""
    report = harness.run(
        UpgradeToy("action", scenario_seconds="30"),
        profile="dev",
        seed=0,
        budget=60,
        report_dir=tmp_path / "r",
    )
    assert "not_run_schedules" in (report.plan_line() or ""), report.plan_line()
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    skipped = data["not_run_schedules"]
    assert skipped, data["not_run"]
    assert f"{len(skipped)} targeted schedule" in data["not_run"], data["not_run"]
    ran = {
        json.loads(line)["name"]
        for line in (tmp_path / "r" / "scenarios.jsonl").read_text().splitlines()
    }
    assert all(name.startswith("targeted/") and name not in ran for name in skipped), skipped
