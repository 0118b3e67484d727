"""Network faults on one worker's Postgres connection, through the harness:
the reference runtime survives a lost COMMIT acknowledgement and a reset
between two statements, and every property holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import Engine, Example, Settings
from harness.adapters import Capability
from harness.adapters.reference import ReferenceAdapter
from harness.history import History
from harness.model import (
    CrashSpec,
    NetworkFault,
    NetworkKind,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
)

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("netfilter")]

PROCUREMENT = {"item": "bolts", "quantity": 3}
REFUND = {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"}


def _scenario(kind: NetworkKind, site: str, nth: int) -> Scenario:
    return Scenario(
        name=f"{kind}-by-hand",
        steps=(
            Submit(
                run=RunSpec(run_id="r1", tenant="acme", workflow="procurement", input=PROCUREMENT)
            ),
            Submit(run=RunSpec(run_id="r2", tenant="globex", workflow="refund", input=REFUND)),
            RunWorker(worker_id="n0", crash=CrashSpec(site=site, nth=nth, action="pause")),
            NetworkFault(kind=kind, worker_id="n0"),
            Quiesce(),
        ),
    )


def _run(postgres_url: str, scenario: Scenario, tmp_path: Path) -> Example:
    adapter = ReferenceAdapter("postgres", postgres_url=postgres_url)
    assert Capability.NETWORK_FAULTS in adapter.capabilities
    engine = Engine(adapter, Settings(), workdir=tmp_path / "engine")
    return engine.execute(scenario)


def _fault(example: Example, kind: str) -> dict[str, Any]:
    (history,) = example.folder.rglob("history.jsonl")
    (event,) = History.load(history).faults(kind)
    return event.value


@pytest.mark.parametrize("nth", [1, 4])
def test_a_commit_whose_acknowledgement_is_lost_is_read_back_and_every_property_holds(
    postgres_url: str, tmp_path: Path, nth: int
) -> None:
    example = _run(
        postgres_url, _scenario("commit_ack_lost", "checkpoint_stmt_commit", nth), tmp_path
    )
    fault = _fault(example, "commit_ack_lost")
    assert fault["fired"] is True, fault
    assert fault["endpoint"]["server"].endswith(":5432"), fault
    verdicts = {r.name: (r.verdict.value, r.message) for r in example.results}
    assert {v for v, _ in verdicts.values()} == {"pass"}, verdicts


def test_a_reset_between_two_statements_commits_none_of_it_and_every_property_holds(
    postgres_url: str, tmp_path: Path
) -> None:
    example = _run(
        postgres_url, _scenario("reset_mid_transaction", "checkpoint_stmt_3", 2), tmp_path
    )
    fault = _fault(example, "reset_mid_transaction")
    assert fault["fired"] is True, fault
    verdicts = {r.name: (r.verdict.value, r.message) for r in example.results}
    assert {v for v, _ in verdicts.values()} == {"pass"}, verdicts
