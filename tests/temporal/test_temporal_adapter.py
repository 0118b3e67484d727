"""The Temporal adapter on explicit scenarios: what a kill after the refund
does to the naive and the careful app, and what an upgrade mid-run does to
the reordered and the patched release -- and that closing the adapter leaves
no server and no folder behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from code_size import lines_of_code

from harness import Engine, Example, load_settings
from harness.adapters.temporal import TemporalAdapter
from harness.model import ArmWorldFault, Quiesce, RunSpec, RunWorker, Scenario, Submit, Verdict

ROOT = Path(__file__).resolve().parents[2]
R1 = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="refund",
    input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
)
KILL = ArmWorldFault(service="payments", action="refund", mode="kill_after_apply")
#: The worker dies right after the payment service applied the refund; the
#: next worker gets the activity again once its start_to_close_timeout passed.
KILL_AFTER_REFUND = Scenario(
    name="kill-after-refund", steps=(Submit(run=R1), KILL, RunWorker(worker_id="w1"), Quiesce())
)
#: Release 1 starts the run and dies after the refund; today's workers take over.
UPGRADE_MID_RUN = Scenario(
    name="upgrade-mid-run",
    steps=(
        Submit(run=R1.model_copy(update={"code_version": 1})),
        KILL,
        RunWorker(worker_id="v1", code_version=1),
        Quiesce(),
    ),
)
JUDGED = ("exactly_once_effects", "resume_equivalence", "progress", "legal_transitions")


@pytest.fixture
def adapters() -> Iterator[dict[str, TemporalAdapter]]:
    """One adapter per example app, made on demand; each is closed after the
    test, which must stop its dev server and remove its folder."""
    made: dict[str, TemporalAdapter] = {}

    class Apps(dict[str, TemporalAdapter]):
        def __missing__(self, app: str) -> TemporalAdapter:
            made[app] = TemporalAdapter(app=f"examples.temporal_refund.{app}:APP")
            return made[app]

    yield Apps()
    for adapter in made.values():
        folder = adapter.folder
        adapter.close()
        if folder is not None:
            assert all(p.poll() is not None for p in folder.processes), "the server outlived close"
            assert not folder.path.exists(), "its folder outlived close"


def execute(adapter: TemporalAdapter, scenario: Scenario, workdir: Path) -> Example:
    """Run ``scenario`` and its fault-free oracle, and check every property."""
    return Engine(adapter, load_settings("dev", start=workdir), workdir=workdir).execute(scenario)


def verdicts(example: Example) -> dict[str, Verdict]:
    return {r.name: r.verdict for r in example.results}


def test_the_adapter_is_at_most_226_lines_of_code() -> None:
    """150 (issue 18), and 60 more for its pace (issue 33): the server's
    settings, the workflow task timeout, the attempts of dead workers timed
    out, the workers' exit at their runs' end, the ended runs kept; 5 for
    its workers' routes through Toxiproxy and the attempts of a worker a
    partition cut off (issue 32); and 11 for a worker's polls that skip the
    runs whose end it saw and its fault_seconds (issue 33 again)."""
    assert lines_of_code('"""doc"""\n\n# note\nx = 1  # one\n') == 1
    package = ROOT / "harness" / "adapters" / "temporal"
    total = sum(lines_of_code(p.read_text()) for p in package.glob("*.py"))
    assert 100 < total <= 226, total


def test_a_kill_after_the_refund_refunds_twice_without_a_key_once_with_one(
    adapters: dict[str, TemporalAdapter], tmp_path: Path
) -> None:
    """Temporal retries the killed worker's activity after its timeout: the
    naive refund runs again and pays twice, the keyed one is deduplicated."""
    naive = execute(adapters["naive"], KILL_AFTER_REFUND, tmp_path / "naive")
    assert verdicts(naive)["exactly_once_effects"] is Verdict.FAIL, naive.results
    careful = execute(adapters["careful"], KILL_AFTER_REFUND, tmp_path / "careful")
    assert {verdicts(careful)[p] for p in JUDGED} == {Verdict.PASS}, careful.results


def test_an_upgrade_that_reorders_activities_strands_the_old_run_a_patch_does_not(
    adapters: dict[str, TemporalAdapter], tmp_path: Path
) -> None:
    """The reordered release cannot replay release 1's history: its workflow
    task fails with a nondeterminism error, retried forever (``retrying``),
    and the harness says so in Temporal's words; behind workflow.patched()
    the old run finishes."""
    reordered = execute(adapters["reordered"], UPGRADE_MID_RUN, tmp_path / "reordered")
    found = verdicts(reordered)
    assert found["progress"] is Verdict.FAIL, reordered.results
    assert found["migration_safety"] is Verdict.FAIL, reordered.results
    assert found["exactly_once_effects"] is Verdict.PASS, reordered.results
    progress = next(r for r in reordered.results if r.name == "progress")
    assert "is retried forever" in progress.message, progress.message  # RunState.RETRYING
    assert "raw status 'TASK_FAILING'" in progress.message, progress.message
    assert "[TMPRL1100] Nondeterminism error" in progress.message  # Temporal's own words
    patched = execute(adapters["patched"], UPGRADE_MID_RUN, tmp_path / "patched")
    assert {verdicts(patched)[p] for p in (*JUDGED, "migration_safety")} == {Verdict.PASS}
