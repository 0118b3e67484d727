"""A run the older release submitted and ran (a rolling deploy, both
releases serving) is judged by what it did, not by the shape of its requests.

Found on the correct reference runtime: the older release asks for a refund
without the currency today's code adds, so ``migration_safety`` compared its
request hash (and the world's reference, which follows from it) with today's
oracle and failed a run that did nothing wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import Engine, load_settings
from harness.adapters._loading import load_adapter
from harness.model import Scenario, Verdict

REFUND = {"customer_id": "c-1", "amount_cents": 1250, "currency": "USD"}


def _submit_old() -> dict[str, Any]:
    run = {"run_id": "r1", "tenant": "acme", "workflow": "refund", "input": REFUND}
    return {"op": "submit", "run": {**run, "decision": "approved", "code_version": 1}}


def _old_worker(name: str) -> dict[str, Any]:
    return {"op": "run_worker", "worker_id": name, "crash": None, "code_version": 1}


FINISHED_BY_THE_OLDER_RELEASE = [
    _submit_old(),
    _old_worker("v1"),
    {"op": "approve", "run_id": "r1"},
    _old_worker("v2"),
    {"op": "quiesce", "approve_waits": True},
]
REFUNDED_BY_THE_OLDER_RELEASE_THEN_RESUMED = [
    _submit_old(),
    _old_worker("v1"),
    {"op": "approve", "run_id": "r1"},
    {
        "op": "arm_world_fault",
        "service": "payments",
        "action": "refund",
        "nth": 1,
        "mode": "kill_after_apply",
        "delay": 0.0,
    },
    _old_worker("v2"),
    {"op": "quiesce", "approve_waits": True},
]


@pytest.mark.parametrize(
    "steps",
    [FINISHED_BY_THE_OLDER_RELEASE, REFUNDED_BY_THE_OLDER_RELEASE_THEN_RESUMED],
    ids=["finished-by-v1", "refunded-by-v1-resumed-by-today"],
)
def test_a_refund_the_older_release_made_passes_on_the_correct_runtime(
    steps: list[dict[str, Any]], tmp_path: Path
) -> None:
    engine = Engine(load_adapter("reference"), load_settings("ci"), workdir=tmp_path)
    example = engine.execute(Scenario.model_validate({"name": "older-release", "steps": steps}))
    verdicts = {r.name: r for r in example.results}
    assert not example.failed, {
        n: r.message for n, r in verdicts.items() if r.verdict is Verdict.FAIL
    }
    migration = verdicts["migration_safety"]
    assert migration.verdict is Verdict.PASS
    assert migration.counts["older_release_requests"] == 1  # judged by kind and count
    assert migration.counts["equivalent"] == 1


def test_an_older_release_that_refunds_twice_still_fails(tmp_path: Path) -> None:
    engine = Engine(
        load_adapter("reference", {"bug": "no-idempotency-key"}),
        load_settings("ci"),
        workdir=tmp_path,
    )
    steps = [*REFUNDED_BY_THE_OLDER_RELEASE_THEN_RESUMED]
    steps[3] = {**steps[3], "mode": "apply_then_timeout"}
    example = engine.execute(Scenario.model_validate({"name": "older-release", "steps": steps}))
    verdicts = {r.name: r for r in example.results}
    assert verdicts["exactly_once_effects"].verdict is Verdict.FAIL
    assert verdicts["migration_safety"].verdict is Verdict.FAIL
    assert "of any shape applied 2x here, 1x in the oracle" in verdicts["migration_safety"].message
