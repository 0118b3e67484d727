"""A partition right after the world applied the refund (``partition_after_apply``,
issue 32) on DBOS with its system database on Postgres: each worker reaches
it through a proxy of its own (Toxiproxy); the world holds the worker once
the payment service applied the refund, the proxy is switched off, and the
worker cannot checkpoint the step's output. The next worker's launch
recovers the pending workflow and runs the step again: the naive app (no
idempotency key) refunds twice, the careful one (its key from the workflow
id and the step's name) once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import Engine, Example, _toxiproxy, load_settings
from harness.adapters.dbos import DBOSAdapter
from harness.history import History
from harness.model import NetworkFault, Quiesce, RunSpec, Scenario, Submit, Verdict

R1 = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="refund",
    input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
)
CUT = NetworkFault(kind="partition_after_apply", worker_id="n1", effect="payments.refund")
PARTITION_AFTER_REFUND = Scenario(
    name="partition-after-refund", steps=(Submit(run=R1), CUT, Quiesce())
)


def execute(app: str, postgres_url: str, workdir: Path) -> Example:
    adapter = DBOSAdapter(
        app=f"examples.dbos_refund.{app}:APP", database="postgres", postgres_url=postgres_url
    )
    # one fault-free run is enough to compare with: a DBOS deployment on
    # Postgres migrates a schema of its own, seconds on a loaded machine
    settings = load_settings("dev", start=workdir, determinism_runs=1)
    return Engine(adapter, settings, workdir=workdir).execute(PARTITION_AFTER_REFUND)


def history(example: Example) -> History:
    (path,) = example.folder.rglob("history.jsonl")
    return History.load(path)


def refunds(example: Example) -> list[dict[str, Any]]:
    effects = history(example).effects(applied=True)
    return [dict(e.value) for e in effects if e.value["kind"] == "payments.refund"]


@pytest.mark.parametrize(("app", "refunded", "failed"), [
    ("naive", 2, ["exactly_once_effects", "resume_equivalence"]),
    ("careful", 1, []),
])  # fmt: skip
def test_a_lost_step_checkpoint_is_run_again_by_the_next_worker(
    toxiproxy: None, postgres_url: str, tmp_path: Path, app: str, refunded: int, failed: list[str]
) -> None:
    example = execute(app, postgres_url, tmp_path)
    (event,) = history(example).faults("partition_after_apply")
    assert event.value["fired"] is True and event.value["backend"] == "toxiproxy", event.value
    assert len(refunds(example)) == refunded, refunds(example)
    assert [r.name for r in example.results if r.verdict is Verdict.FAIL] == failed
    server = _toxiproxy.current()
    assert server is not None
    assert not [n for n in server.proxy_names() if n.endswith("-n1-postgres")]


def test_on_sqlite_there_is_no_connection_to_cut() -> None:
    adapter = DBOSAdapter(app="examples.dbos_refund.naive:APP")
    assert "network_faults" not in {c.value for c in adapter.capabilities}
