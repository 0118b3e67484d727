"""The oracle runs each tenant's runs in a deployment of their own, so a run
whose result another tenant's data changed differs from its oracle."""

from __future__ import annotations

import json
from pathlib import Path

from tenant_runtime import TenantAdapter

from harness import Engine, load_settings
from harness.checkers import check_all
from harness.history import History
from harness.model import ArmWorldFault, EventF, Quiesce, RunSpec, RunWorker, Scenario, Submit
from harness.runner import run_scenario
from harness.session._oracle import SPLIT_NOTE, merge_histories, tenant_parts

SAME = {"customer_id": "c-1", "amount_cents": 500}
R1 = RunSpec(run_id="r1", tenant="acme", workflow="pay", input=SAME)
R2 = RunSpec(run_id="r2", tenant="globex", workflow="pay", input=SAME)
R3 = RunSpec(run_id="r3", tenant="acme", workflow="pay", input={**SAME, "amount_cents": 700})
#: Two tenants, same content; one fault (an email refused once, retried) that
#: names no run, so every run is compared with its oracle.
SCENARIO = Scenario(
    name="two-tenants",
    steps=(
        Submit(run=R1),
        Submit(run=R2),
        ArmWorldFault(service="email", action="notify", mode="reject"),
        RunWorker(worker_id="w1"),
        Quiesce(),
    ),
)


def _engine(adapter: TenantAdapter, tmp_path: Path) -> Engine:
    return Engine(adapter, load_settings("dev", seed=0), workdir=tmp_path / "engine")


def _verdicts(results: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {r.name: r.verdict.value for r in results}


def test_a_shared_deployment_oracle_makes_the_cross_tenant_mistake_too(tmp_path: Path) -> None:
    """The blind spot: with every tenant in one fault-free deployment, the
    oracle skips globex's charge as the faulted run does, and all agree."""
    adapter = TenantAdapter(shared=True)
    run = run_scenario(adapter, SCENARIO, tmp_path / "run")
    shared = run_scenario(adapter, SCENARIO.fault_free(), tmp_path / "oracle")
    assert run.coverage.fired.get("world_fault") == 1
    results = check_all(History.load(run.history_path), History.load(shared.history_path))
    assert set(_verdicts(results).values()) == {"pass"}


def test_a_tenant_whose_charge_another_tenant_s_receipt_saved_differs_from_its_oracle(
    tmp_path: Path,
) -> None:
    example = _engine(TenantAdapter(shared=True), tmp_path).execute(SCENARIO)
    result = next(r for r in example.results if r.name == "resume_equivalence")
    assert result.verdict.value == "fail", result.message
    assert "run r2 diverged" in result.message
    assert "payments.charge" in result.message  # charged alone, never in the shared deployment
    assert "run r1" not in result.message  # acme's own run is unaffected


def test_the_runtime_that_scopes_its_receipts_to_the_tenant_passes(tmp_path: Path) -> None:
    example = _engine(TenantAdapter(shared=False), tmp_path).execute(SCENARIO)
    assert set(_verdicts(example.results).values()) == {"pass"}, example.results
    resume = next(r for r in example.results if r.name == "resume_equivalence")
    assert resume.counts["equivalent"] == 2


def test_the_merged_oracle_is_one_well_formed_history_with_each_run_whole(
    tmp_path: Path,
) -> None:
    adapter = TenantAdapter(shared=False)
    free = Scenario(steps=(Submit(run=R1), Submit(run=R2), Submit(run=R3), Quiesce()))
    parts = tenant_parts(free)
    assert [(t, [r.run_id for r in s.runs]) for t, s in parts] == [
        ("acme", ["r1", "r3"]),
        ("globex", ["r2"]),
    ]
    engine = _engine(adapter, tmp_path)
    merged = History.load(engine.oracle(free), strict=True)
    assert merged.problems == ()
    assert [e.index for e in merged] == list(range(len(merged)))
    assert merged.events[0].value["text"] == SPLIT_NOTE
    assert len(merged.by_f(EventF.DECLARATION)) == 1 and merged.declaration() is not None
    assert set(merged.finals()) == {"r1", "r2", "r3"}
    # Every run's events are its own tenant's deployment's, in their order.
    for tenant, part in parts:
        alone = History.load(engine.executor.tenant_oracle(part))
        for run in part.runs:
            strip = [e.model_dump(exclude={"index"}) for e in alone.by_run(run.run_id)]
            assert [e.model_dump(exclude={"index"}) for e in merged.by_run(run.run_id)] == strip
            assert merged.tenant_of(run.run_id) == tenant


def test_one_tenant_s_workload_runs_as_before_in_one_deployment(tmp_path: Path) -> None:
    free = Scenario(steps=(Submit(run=R1), Submit(run=R3), Quiesce()))
    assert tenant_parts(free) == [("acme", free)]
    engine = _engine(TenantAdapter(), tmp_path)
    history = History.load(engine.oracle(free))
    assert not any(e.value.get("text") == SPLIT_NOTE for e in history.by_f(EventF.NOTE))
    assert not list((tmp_path / "engine").glob("tenant-oracle-*"))


def test_a_hole_in_one_tenant_s_oracle_stays_a_problem_of_the_merged_one(tmp_path: Path) -> None:
    adapter = TenantAdapter()
    paths = []
    for tenant, part in tenant_parts(SCENARIO.fault_free()):
        run = run_scenario(adapter, part, tmp_path / tenant)
        paths.append((tenant, run.history_path))
    # globex's history lost a line (a torn write): the merge must not hide it.
    lines = paths[1][1].read_text().splitlines(keepends=True)
    paths[1][1].write_text("".join(lines[:3] + lines[4:]) + '{"index": 99, "torn')
    merged = History.load(merge_histories(paths, tmp_path / "merged.jsonl"))
    assert len(merged.problems) == 2, merged.problems
    assert all("is not an event" in p for p in merged.problems)
    carried = [json.loads(line) for line in (tmp_path / "merged.jsonl").read_text().splitlines()]
    said = [c["problem"] for c in carried if "problem" in c]
    assert any("where 3 was expected" in p for p in said), said


def _search(adapter: TenantAdapter, tmp_path: Path) -> set[str]:
    """The sampled phase alone (12 scenarios of the dev profile, seed 0):
    the properties it found failing."""
    from harness import probe_universe

    settings = load_settings("dev", seed=0, max_examples=12).with_(targeted=False)
    universe = probe_universe(adapter, max_runs=settings.max_runs, aim_effects=False)
    engine = Engine(adapter, settings, workdir=tmp_path / "search", shrink=False)
    try:
        outcome = engine.run(universe)
    finally:
        engine.close()
    assert outcome.searched == 12
    return {name for name, ex in outcome.counterexamples.items()}


def test_the_sampled_search_finds_the_cross_tenant_mistake_and_passes_the_fix(
    tmp_path: Path,
) -> None:
    assert "resume_equivalence" in _search(TenantAdapter(shared=True), tmp_path / "shared")
    assert _search(TenantAdapter(shared=False), tmp_path / "scoped") == set()
