"""Records and helpers the store conformance suite builds its cases from.

Time is a parameter (``T0`` plus offsets), never the wall clock. The helpers
for child processes open the same store from a fresh interpreter
(:func:`spec_of` says how, :func:`run_child` runs a body after
:data:`CHILD_PRELUDE`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

from reference_runtime._records import (
    Approval,
    AuditEvent,
    Delivery,
    InboxMessage,
    MemoryRecord,
    Operation,
    OperationStatus,
    Provenance,
    Run,
    WorkingState,
)
from reference_runtime._states import RunStatus
from reference_runtime.store import Claim, Commit, Store

T0 = 1_700_000_000.0


S = RunStatus


def make_run(run_id: str, status: S = S.RUNNING, at: float = T0, **kw: Any) -> Run:
    fields: dict[str, Any] = {
        "tenant": "t1",
        "created_at": at,
        "updated_at": at,
        "run_id": run_id,
        "workflow": "refund",
        "definition_version": 1,
        "status": status,
        "current_step": "start",
    }
    return Run(**(fields | kw))


def make_state(run_id: str, payload: dict[str, Any] | None = None) -> WorkingState:
    return WorkingState(
        tenant="t1",
        created_at=T0,
        updated_at=T0,
        run_id=run_id,
        workflow="refund",
        payload_version=1,
        payload=payload if payload is not None else {"plan": ["a", "b"], "vars": {"n": 1}},
    )


def make_audit(run_id: str, action: str = "created", at: float = T0) -> AuditEvent:
    return AuditEvent(
        tenant="t1", created_at=at, updated_at=at, run_id=run_id, at=at, actor="test", action=action
    )


def make_op(
    run_id: str, op_id: str, status: OperationStatus = OperationStatus.PREPARED
) -> Operation:
    return Operation(
        tenant="t1",
        created_at=T0,
        updated_at=T0,
        op_id=op_id,
        run_id=run_id,
        step="refund",
        kind="payments.refund",
        idempotency_key=f"idem-{op_id}",
        request_hash="h",
        request={"amount": 10},
        status=status,
        delivery=Delivery.EXACTLY_ONCE,
    )


def make_approval(run_id: str, approval_id: str) -> Approval:
    return Approval(
        tenant="t1",
        created_at=T0,
        updated_at=T0,
        approval_id=approval_id,
        run_id=run_id,
        action="refund",
        params={"amount": 10},
        params_hash="h",
        resource="order:1",
        scope="refund",
        requester="agent",
        approver_role="manager",
        expires_at=T0 + 3600,
        policy_version=1,
    )


def make_message(run_id: str, message_id: str, **kw: Any) -> InboxMessage:
    fields: dict[str, Any] = {
        "tenant": "t1",
        "created_at": T0,
        "updated_at": T0,
        "message_id": message_id,
        "run_id": run_id,
        "kind": "event",
        "payload": {"n": 1},
        "received_at": T0,
    }
    return InboxMessage(**(fields | kw))


def make_memory(memory_id: str, key: str = "k", **kw: Any) -> MemoryRecord:
    fields: dict[str, Any] = {
        "tenant": "t1",
        "created_at": T0,
        "updated_at": T0,
        "memory_id": memory_id,
        "namespace": "prefs",
        "key": key,
        "value": {"v": memory_id},
        "provenance": Provenance.SYSTEM_VERIFIED,
        "trust": 1.0,
    }
    return MemoryRecord(**(fields | kw))


def create(store: Store, run: Run) -> Run:
    store.create_run(run, make_state(run.run_id), make_audit(run.run_id))
    return run


def next_commit(claim: Claim, now: float, **parts: Any) -> Commit:
    """A commit that advances the claimed run by one version."""
    run = parts.pop("run", claim.run)
    new = run.model_copy(update={"state_version": claim.run.state_version + 1, "updated_at": now})
    return Commit(
        run=new,
        expected_version=claim.run.state_version,
        worker_id=claim.worker_id,
        fencing_token=claim.fencing_token,
        now=now,
        **parts,
    )


def everything(store: Store, run_id: str) -> tuple[Any, ...]:
    """All durable data a commit to ``run_id`` could touch, for before/after checks."""
    return (
        store.load(run_id),
        store.audit(),
        store.operations(),
        store.artifacts(),
        store.read_memory_unfiltered("prefs"),
        store.list_runs(),
    )


def claimed(store: Store, run_id: str, worker: str = "w1", now: float = T0) -> Claim:
    claim = store.claim(worker, now, 10.0, run_id)
    assert claim is not None, f"{run_id} should be claimable at {now}"
    return claim


def spec_of(store: Store, **extra: Any) -> dict[str, Any]:
    """How a child process opens the same store."""
    url = getattr(store, "url", None) or f"sqlite://{store.path}"  # type: ignore[attr-defined]
    return {"url": url, "schema": getattr(store, "schema", None), **extra}


CHILD_PRELUDE = """
import json, os, sys, time
from reference_runtime.store import Claim, Commit, open_store
spec = json.loads(sys.argv[1])
store = open_store(spec["url"], schema=spec["schema"])
def barrier(name):
    # A real barrier: every child leaves a file and waits for all of them, so
    # none goes on before the last one (imports and connection done) arrives.
    folder = spec["barrier"]
    open(os.path.join(folder, f"{name}-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 60
    while sum(f.startswith(name + "-") for f in os.listdir(folder)) < spec["parties"]:
        if time.monotonic() > deadline:
            sys.exit(f"barrier {name!r}: {spec['parties']} children did not all arrive in 60 s")
        time.sleep(0.001)
"""


def run_child(body: str, spec: dict[str, Any]) -> subprocess.Popen[str]:
    code = textwrap.dedent(CHILD_PRELUDE) + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", code, json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RR_CRASHPOINTS": ""},
    )


def keys(records: list[MemoryRecord]) -> list[tuple[str, str]]:
    return [(r.key, r.memory_id) for r in records]
