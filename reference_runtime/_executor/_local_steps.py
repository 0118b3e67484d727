"""Steps without an external effect: each is one checkpoint commit.

Advancing to the next step, writing memory, storing an artifact, spawning a
child run and finishing a run all change only what the store holds, so each
is written whole by one commit (between the ``step_commit`` crash points)
or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from .._errors import UnknownWorkflowError
from .._model import AwaitEvent, SpawnChild, StoreArtifact, WriteMemory
from .._records import DEFAULT_TRUST, ArtifactRef, InboxMessage, MemoryRecord, Run, WorkingState
from .._states import RunStatus
from ..store import Snapshot
from ._sites import STEP_COMMIT
from ._step import StepContext, Yield

S = RunStatus


def checkpoint_step(
    sc: StepContext,
    snap: Snapshot,
    payload: dict[str, Any],
    updates: Mapping[str, Any],
    next_step: str,
    action: str,
    **commit_args: Any,
) -> Run:
    """Move the run to ``next_step`` with ``updates`` merged into its payload."""
    with sc.crossing(STEP_COMMIT):
        return sc.commit(
            snap.run,
            status=S.RUNNING,
            action=action,
            state=sc.state(snap, {**payload, **updates}),
            current_step=next_step,
            attempt=0,
            **commit_args,
        )


def await_event(sc: StepContext, run: Run, a: AwaitEvent, now: float) -> NoReturn:
    """Wait for ``a.event_key`` until ``now + a.timeout_seconds``."""
    with sc.crossing(STEP_COMMIT):
        sc.commit(
            run,
            status=S.WAITING_FOR_EVENT,
            waiting_on=f"event:{a.event_key}",
            wake_at=now + a.timeout_seconds,
            current_step=a.next_step,
        )
    raise Yield


def _unchanged(live: MemoryRecord, a: WriteMemory) -> bool:
    """``a`` would write what ``live`` (the newest version of its key) already
    holds, and neither ``live`` nor ``a`` expires, nor is ``live`` erased."""
    return (
        a.ttl_seconds is None
        and not live.deleted
        and live.expires_at is None
        and live.value == a.value
        and live.provenance == a.provenance
        and live.trust == DEFAULT_TRUST[a.provenance]
        and live.subject == a.subject
        and live.derived_from == tuple(a.derived_from)
    )


def write_memory(sc: StepContext, snap: Snapshot, payload: dict[str, Any], a: WriteMemory) -> None:
    run, now = snap.run, sc.now()
    # Number past every stored version, live or not. Counting only live
    # ones would restart at v1 after the newest was erased or expired: the
    # new record would then overwrite the v1 row (another user's data,
    # same memory_id) and, older than the erased newest, never be read.
    stored = sc.store.read_memory_unfiltered(a.namespace, tenant=run.tenant, key=a.key)
    newest = max(stored, key=lambda r: r.version, default=None)
    memory: tuple[MemoryRecord, ...] = ()
    if newest is not None and _unchanged(newest, a):
        # The live record already says this (another run of the tenant
        # wrote it): a new version would change nothing but the id, and
        # leave the readers of the old one (a summary's derived_from)
        # pointing at a superseded record.
        detail = {"memory_id": newest.memory_id, "unchanged": True}
    else:
        version = (newest.version if newest is not None else 0) + 1
        rec = MemoryRecord(
            tenant=run.tenant,
            created_at=now,
            updated_at=now,
            memory_id=f"{run.tenant}:{a.namespace}:{a.key}:v{version}",
            namespace=a.namespace,
            key=a.key,
            value=a.value,
            version=version,
            provenance=a.provenance,
            trust=DEFAULT_TRUST[a.provenance],
            subject=a.subject,
            derived_from=a.derived_from,
            expires_at=None if a.ttl_seconds is None else now + a.ttl_seconds,
        )
        memory, detail = (rec,), {"memory_id": rec.memory_id}
    checkpoint_step(
        sc, snap, payload, a.updates, a.next_step, "memory_write", memory=memory, detail=detail
    )


def store_artifact(
    sc: StepContext, snap: Snapshot, payload: dict[str, Any], a: StoreArtifact
) -> None:
    if sc.artifacts is None:
        raise UnknownWorkflowError(
            f"workflow {snap.run.workflow!r} stores artifacts, but this worker has no "
            "artifact directory configured (--artifacts DIR)"
        )
    run, now = snap.run, sc.now()
    uri, digest = sc.artifacts.put(a.content.encode())
    ref = ArtifactRef(
        tenant=run.tenant,
        created_at=now,
        updated_at=now,
        uri=uri,
        sha256=digest,
        owner=run.run_id,
        subject=a.subject,
    )
    checkpoint_step(sc, snap, payload, {a.variable: uri}, a.next_step, "artifact", artifacts=(ref,))


def spawn_child(sc: StepContext, snap: Snapshot, payload: dict[str, Any], a: SpawnChild) -> None:
    run, now = snap.run, sc.now()
    definition = sc.registry.definition(a.workflow)
    child_input = sc.registry.validate_input(a.workflow, a.input)
    envelope = {
        "parent_run_id": run.run_id,
        "child_run_id": a.child_run_id,
        "objective": a.objective,
        "allowed_tools": list(a.allowed_tools),
        "deadline": now + a.deadline_seconds,
        "output_refs": [],
        "error": None,
    }
    child = Run(
        tenant=run.tenant,
        created_at=now,
        updated_at=now,
        run_id=a.child_run_id,
        workflow=a.workflow,
        definition_version=definition.version,
        status=S.CREATED,
        current_step=definition.steps[0],
        parent_run_id=run.run_id,
    )
    child_state = WorkingState(
        tenant=run.tenant,
        created_at=now,
        updated_at=now,
        run_id=a.child_run_id,
        workflow=a.workflow,
        payload_version=sc.registry.payload_version(a.workflow),
        payload={**child_input, "_envelope": envelope},
    )
    checkpoint_step(
        sc,
        snap,
        payload,
        {"children": [*payload.get("children", []), a.child_run_id]},
        a.next_step,
        "delegate",
        children=((child, child_state),),
        detail={"child_run_id": a.child_run_id},
    )


def finish(
    sc: StepContext,
    snap: Snapshot,
    status: RunStatus,
    detail: dict[str, Any],
    payload: dict[str, Any],
    error: str | None = None,
) -> NoReturn:
    """End the run with ``status``; a child run tells its parent in the same commit."""
    run, now = snap.run, sc.now()
    outbox: tuple[InboxMessage, ...] = ()
    if run.parent_run_id:
        data = detail.get("output") or {"error": error or status.value}
        outbox = (
            InboxMessage(
                tenant=run.tenant,
                created_at=now,
                updated_at=now,
                message_id=f"child-done:{run.run_id}",
                run_id=run.parent_run_id,
                kind="event",
                payload={"event_key": f"child:{run.run_id}", "data": data},
                received_at=now,
            ),
        )
    with sc.crossing(STEP_COMMIT):
        sc.commit(
            run,
            status=status,
            detail=detail,
            state=sc.state(snap, {**payload, "_output": detail}),
            current_step="done",
            error=error,
            outbox=outbox,
            wake_at=None,
            waiting_on=None,
        )
    raise Yield
