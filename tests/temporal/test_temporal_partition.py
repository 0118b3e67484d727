"""A partition right after the world applied the refund (``partition_after_apply``,
issue 32): the Temporal worker's gRPC connection to the server goes through a
proxy of its own (Toxiproxy), the world holds the worker once the payment
service applied the refund, the proxy is switched off, and the worker cannot
report the activity's completion. The server times the attempt out and
another worker runs it again: the naive app (no idempotency key) refunds
twice, the careful one (its key from the workflow and activity ids) once.
Real time: each scenario waits out one two-second activity timeout."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import Engine, Example, _toxiproxy, load_settings
from harness.adapters.temporal import TemporalAdapter
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


@pytest.fixture
def adapter(request: pytest.FixtureRequest) -> Iterator[TemporalAdapter]:
    made = TemporalAdapter(app=f"examples.temporal_refund.{request.param}:APP")
    yield made
    made.close()


def execute(adapter: TemporalAdapter, workdir: Path) -> Example:
    settings = load_settings("dev", start=workdir)
    return Engine(adapter, settings, workdir=workdir).execute(PARTITION_AFTER_REFUND)


def history(example: Example) -> History:
    (path,) = example.folder.rglob("history.jsonl")
    return History.load(path)


def fired(example: Example) -> list[dict[str, Any]]:
    return [dict(e.value) for e in history(example).faults("partition_after_apply")]


def refunds(example: Example) -> list[dict[str, Any]]:
    effects = history(example).effects(applied=True)
    return [dict(e.value) for e in effects if e.value["kind"] == "payments.refund"]


@pytest.mark.parametrize("adapter", ["naive"], indirect=True)
def test_the_naive_app_refunds_twice_when_its_completion_is_lost(
    toxiproxy: None, adapter: TemporalAdapter, tmp_path: Path
) -> None:
    example = execute(adapter, tmp_path)
    [event] = fired(example)
    assert event["fired"] is True and event["backend"] == "toxiproxy", event
    assert len(refunds(example)) == 2, refunds(example)
    verdict = {r.name: r.verdict for r in example.results}
    assert verdict["exactly_once_effects"] is Verdict.FAIL
    # the counterexample holds the step, described
    assert any("partition_after_apply" in line for line in PARTITION_AFTER_REFUND.describe())
    # the proxy the fault switched off is deleted when the environment
    # closed (the untouched ones are kept for the next workers, and go at
    # exit: tests/network/test_toxiproxy_ownership.py)
    server = _toxiproxy.current()
    assert server is not None
    assert not [n for n in server.proxy_names() if n.endswith("-n1-temporal")]


@pytest.mark.parametrize("adapter", ["careful"], indirect=True)
def test_the_careful_app_refunds_once_when_its_completion_is_lost(
    toxiproxy: None, adapter: TemporalAdapter, tmp_path: Path
) -> None:
    example = execute(adapter, tmp_path)
    [event] = fired(example)
    assert event["fired"] is True, event
    assert len(refunds(example)) == 1, refunds(example)
    failed = [r.name for r in example.results if r.verdict is Verdict.FAIL]
    assert failed == []


def test_on_the_kernel_backend_the_report_says_why_nothing_was_aimed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from harness.report._build import not_tested

    monkeypatch.setenv(_toxiproxy.ENV_BACKEND, "kernel")
    adapter = TemporalAdapter(app="examples.temporal_refund.careful:APP")  # no server started
    gaps = [g["what"] for g in not_tested(adapter, ran=("world", "race"))]
    network = [g for g in gaps if g.startswith("lost commit acknowledgements")]
    # the kernel backend runs here (root, iptables): the aim's gap; else the
    # capability's own (no backend at all) -- said either way, never silent
    assert len(network) == 1, gaps
    assert "partition_after_apply" in network[0] or "kernel" in network[0], network
