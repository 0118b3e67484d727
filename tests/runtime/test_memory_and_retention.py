"""Long-term memory and retention: tenant-scoped, forgettable, expiring, pruned.

The research workflow writes one evidence record per source (about the
requester), a summary derived from them, and a report artifact.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.adapters.reference._deployment import Deployment
from reference_runtime import MemoryRecord, Provenance, RunStatus
from reference_runtime._artifacts import ArtifactStore
from reference_runtime.store import RetentionPolicy

Factory = Callable[..., Deployment]

NS = "research/tides"


def research(d: Deployment, run_id: str, requester: str, tenant: str = "acme") -> None:
    d.submit(
        "research",
        {"topic": "tides", "sources": 3, "requester": requester},
        tenant=tenant,
        run_id=run_id,
    )
    assert d.drive(run_id) == "Completed"


def live(d: Deployment, tenant: str = "acme", ns: str = NS) -> dict[str, MemoryRecord]:
    return {m.key: m for m in d.runtime.store.read_memory(tenant, ns, d.clock.now())}


def record(d: Deployment, **fields: Any) -> MemoryRecord:
    now = d.clock.now()
    base: dict[str, Any] = {
        "tenant": "acme",
        "created_at": now,
        "updated_at": now,
        "provenance": Provenance.TOOL_OUTPUT,
        "trust": 0.5,
    }
    return MemoryRecord(**{**base, **fields})


def test_research_writes_evidence_about_the_requester_and_a_summary_derived_from_it(
    deployment: Deployment,
) -> None:
    d = deployment
    research(d, "q1", "u7")
    memory = live(d)
    assert sorted(memory) == ["evidence-0", "evidence-1", "evidence-2", "summary"]
    assert {m.subject for m in memory.values()} == {"u7"}
    summary = memory["summary"]
    assert sorted(summary.derived_from) == sorted(
        memory[f"evidence-{i}"].memory_id for i in range(3)
    )
    assert summary.value["text"].startswith("3 findings")
    (artifact,) = d.runtime.store.artifacts("q1")
    assert artifact.subject == "u7" and artifact.tenant == "acme"


def test_forgetting_a_user_removes_their_memory_everything_derived_and_their_report(
    deployment: Deployment,
) -> None:
    d = deployment
    research(d, "q1", "u7")
    summary_id = live(d)["summary"].memory_id
    # A record someone else derived from the summary, about nobody in
    # particular, still carries u7's data.
    d.runtime.store.put_memory(
        record(
            d,
            memory_id="digest",
            namespace="digests",
            key="weekly",
            value="...",
            derived_from=(summary_id,),
        )
    )
    # Another user's memory must survive.
    d.runtime.store.put_memory(
        record(d, memory_id="u8-note", namespace="notes", key="u8", value="x", subject="u8")
    )
    report_uri = d.snapshot("q1").state.payload["report_uri"]
    store = ArtifactStore(d.config.artifact_dir or "")
    assert store.get(report_uri).startswith(b"Report on tides")

    assert d.runtime.forget("acme", "u7") == 3 + 1 + 1 + 1  # evidence, summary, digest, report
    assert live(d) == {}
    assert live(d, ns="digests") == {}
    assert set(live(d, ns="notes")) == {"u8"}
    assert all(m.deleted for m in d.runtime.store.read_memory_unfiltered(NS))
    with pytest.raises(FileNotFoundError):
        store.get(report_uri)
    assert d.runtime.forget("acme", "u7") == 0  # nothing left to erase


def test_after_erasing_the_newest_writer_a_new_run_still_sees_its_own_evidence(
    make_deployment: Factory,
) -> None:
    d = make_deployment("sqlite")
    research(d, "q1", "u7")
    research(d, "q2", "u8")  # second versions of every key, about u8
    assert d.runtime.forget("acme", "u8") > 0
    assert live(d) == {}  # the erased newest versions hide u7's older ones
    research(d, "q3", "u9")
    memory = live(d)
    assert sorted(memory) == ["evidence-0", "evidence-1", "evidence-2", "summary"]
    assert {m.subject for m in memory.values()} == {"u9"}
    assert memory["summary"].value["text"].startswith("3 findings")
    # u7's records were not overwritten by u9's.
    u7 = [m for m in d.runtime.store.read_memory_unfiltered(NS) if m.subject == "u7"]
    assert len(u7) == 4 and not any(m.deleted for m in u7)


@pytest.mark.parametrize(
    "variant", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_tenant_never_reads_or_erases_another_tenants_memory(
    make_deployment: Factory, variant: str
) -> None:
    d = make_deployment(variant)
    research(d, "a1", "u7", tenant="acme")
    research(d, "g1", "u7", tenant="globex")
    acme, globex = live(d, "acme"), live(d, "globex")
    assert {m.tenant for m in acme.values()} == {"acme"}
    assert {m.tenant for m in globex.values()} == {"globex"}
    # globex's summary was built from globex's evidence only.
    assert set(globex["summary"].derived_from) == {
        globex[f"evidence-{i}"].memory_id for i in range(3)
    }
    assert d.runtime.store.read_memory("initech", NS, d.clock.now()) == []
    assert d.runtime.forget("acme", "u7") > 0
    assert live(d, "acme") == {}
    assert live(d, "globex") == globex
    (a_report,) = d.runtime.store.artifacts("a1")
    (g_report,) = d.runtime.store.artifacts("g1")
    assert (a_report.tenant, g_report.tenant) == ("acme", "globex")
    assert a_report.uri == g_report.uri
    # The reports have the same content (same topic, same findings), hence
    # the same content address: erasing acme's user must not take globex's.
    assert ArtifactStore(d.config.artifact_dir or "").get(g_report.uri)


def contexts_of(d: Deployment, worker_id: str) -> list[dict[str, Any]]:
    """Run a real worker that logs each model context it builds; return them."""
    log = Path(d.root) / f"contexts-{worker_id}.jsonl"
    exit_ = d.spawner.run(
        {"worker_id": worker_id, "env": {"RR_CONTEXT_LOG": str(log)}}, d.worker_env(), 120.0
    )
    assert exit_.code == 0, exit_
    if not log.exists():
        return []
    return [json.loads(line)["context"] for line in log.read_text().splitlines()]


@pytest.mark.parametrize("expired", [False, True], ids=["live", "expired"])
def test_expired_memory_is_not_in_the_model_context(
    make_deployment: Factory, expired: bool
) -> None:
    d = make_deployment("sqlite")
    d.runtime.store.put_memory(
        record(
            d,
            memory_id="limit",
            namespace="policy",
            key="auto_approve_below_cents",
            value=100_000,
            provenance=Provenance.SYSTEM_VERIFIED,
            trust=1.0,
            expires_at=d.clock.now() + 10,
        )
    )
    if expired:
        d.clock.advance(10)  # expires_at is the first instant it is gone
    d.submit(
        "refund",
        {"customer_id": "c1", "amount_cents": 500, "currency": "EUR"},
        tenant="acme",
        run_id="r1",
    )
    contexts = contexts_of(d, "w1")
    assert contexts, "the worker built no context"
    keys = {m["key"] for ctx in contexts for m in ctx["memory"]}
    status = d.snapshot("r1").run.status
    if expired:
        assert keys == set()
        assert status is RunStatus.WAITING_FOR_APPROVAL
    else:
        assert keys == {"auto_approve_below_cents"}
        assert status is RunStatus.COMPLETED


def test_prune_compacts_finished_runs_past_the_policy_and_nothing_else(
    deployment: Deployment,
) -> None:
    d = deployment
    day = 24 * 3600.0
    refund = {"customer_id": "c1", "amount_cents": 500, "currency": "EUR", "approval_ttl": 9 * day}
    d.submit("refund", refund, tenant="acme", run_id="old")
    assert d.drive("old") == "Completed"
    d.submit("refund", refund, tenant="acme", run_id="waiting")
    assert d.drive("waiting", approve=False) == "WaitingForApproval"
    d.clock.advance(2 * day)
    d.submit("refund", {**refund, "customer_id": "c2"}, tenant="acme", run_id="recent")
    assert d.drive("recent") == "Completed"
    waiting_before = d.snapshot("waiting")
    recent_before = d.snapshot("recent")

    assert d.runtime.prune(RetentionPolicy(keep_finished_seconds=day)) == 1
    old = d.snapshot("old")
    assert old.state.payload == {}
    assert old.run.status is RunStatus.COMPLETED  # the run row stays
    assert [e.action for e in d.runtime.store.audit("old")][-1] == "compacted"
    assert d.snapshot("waiting") == waiting_before
    assert d.snapshot("recent") == recent_before
    assert d.runtime.prune(RetentionPolicy(keep_finished_seconds=day)) == 0

    # A run in progress is never pruned, however old, and still finishes.
    d.clock.advance(5 * day)
    assert d.runtime.prune(RetentionPolicy(keep_finished_seconds=day)) == 1  # "recent"
    assert d.snapshot("waiting") == waiting_before
    d.deliver(d.approve("waiting"))
    assert d.drive("waiting") == "Completed"
    assert len(d.world.effects("payments")) == 3
