"""Executing one leased run: load, rebuild context, decide, act, checkpoint.

The executor is where the runtime keeps its promise that a fresh worker can
continue after any crash without repeating a dangerous action:

* the model context is rebuilt from durable records only (:func:`build_context`);
* every checkpoint is one :meth:`Store.commit` -- run row, working state,
  operation, approval, audit and inbox acknowledgements together -- guarded by
  the ``state_version`` it read and the fencing token of its lease;
* effects follow the protocol *persist intent -> call with the idempotency key
  -> record the confirmed result*; an intent found without a result means "we
  may have called", and the run reconciles (asks the service by key or
  business key) before any retry. A service that can neither deduplicate nor be
  asked gets a ``sent`` mark before the call; an unknown outcome after it is
  handed to an operator (at-most-once) or resent (at-least-once), as the effect
  kind declares.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import crashpoints as cp
from ._approvals import POLICY_VERSION, authorizes, is_expired, verify_decision
from ._artifacts import ArtifactStore
from ._clock import Clock
from ._errors import (
    ConcurrencyConflict,
    ForgedApprovalError,
    FutureSchemaError,
    LeaseLostError,
    MalformedEventError,
    OutcomeUnknown,
    ServiceRejected,
    StorageUnavailable,
    UnknownWorkflowError,
)
from ._model import (
    Action,
    ApprovalView,
    AwaitEvent,
    CallTool,
    Cancel,
    Complete,
    Fail,
    MemoryFact,
    ModelContext,
    Proceed,
    RequestApproval,
    SpawnChild,
    StoreArtifact,
    WriteMemory,
)
from ._records import (
    DEFAULT_TRUST,
    Approval,
    ArtifactRef,
    AuditEvent,
    Decision,
    Delivery,
    InboxMessage,
    MemoryRecord,
    Operation,
    OperationStatus,
    Run,
    WorkingState,
    check_schema_version,
    stable_hash,
)
from ._services import CallContext, ExternalServices, ServiceResponse
from ._states import TERMINAL, RunStatus, check_transition
from ._workflows import Definition, Registry, upgrade_approval
from .store import Claim, Commit, Snapshot, Store

S = RunStatus
OS = OperationStatus

for _name, _doc in [
    ("before_lease_acquire", "a worker is about to claim a run"),
    ("after_lease_acquire", "a worker holds a fresh lease, nothing loaded yet"),
    ("before_lease_renew", "about to extend the lease before an external call"),
    ("after_lease_renew", "lease extended, external call not yet made"),
    ("before_intent_commit", "effect decided, intent not yet persisted"),
    ("after_intent_commit", "intent (operation 'prepared') persisted, service not called"),
    ("before_sent_mark", "about to mark a non-reconcilable operation 'sent'"),
    ("after_sent_mark", "operation marked 'sent', service not called"),
    ("before_external_call", "lease checked, about to call the service"),
    ("after_external_call", "service answered, result not yet persisted"),
    ("before_result_commit", "about to persist the confirmed result"),
    ("after_result_commit", "result persisted, step advanced"),
    ("before_reconcile_lookup", "reconciling: about to ask the service by key"),
    ("after_reconcile_lookup", "reconciling: the service answered the lookup"),
    ("before_approval_write", "about to persist an approval request or decision"),
    ("after_approval_write", "approval request or decision persisted"),
    ("before_inbox_ack", "about to commit a state change that acknowledges inbound messages"),
    ("after_inbox_ack", "inbound messages acknowledged together with their state change"),
    ("before_step_commit", "about to checkpoint a step without external effect"),
    ("after_step_commit", "step without external effect checkpointed"),
]:
    cp.declare(_name, _doc)


def idempotency_key(tenant: str, run_id: str, step: str) -> str:
    """Stable across retries and workers: derived from durable ids only."""
    return hashlib.sha256(f"{tenant}/{run_id}/{step}".encode()).hexdigest()[:32]


def op_id_for(run_id: str, step: str) -> str:
    return f"{run_id}/{step}"


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


def build_context(
    snap: Snapshot,
    definition: Definition,
    payload: dict[str, Any],
    payload_version: int,
    read_memory: Callable[[str, float, float], list[MemoryRecord]],
    now: float,
) -> ModelContext:
    """The model's view of a run, rebuilt from durable records only."""
    run = snap.run
    variables = {k: v for k, v in payload.items() if not k.startswith("_")}
    tool_results: dict[str, Any] = {}
    for op in snap.operations:
        if op.status in (OS.CONFIRMED, OS.RECONCILED):
            tool_results[op.step] = {"external_ref": op.external_ref, **(op.response or {})}
    facts: list[MemoryFact] = []
    for template, min_trust in definition.memory:
        namespace = template.format(**variables)
        for rec in read_memory(namespace, min_trust, now):
            facts.append(
                MemoryFact(
                    memory_id=rec.memory_id,
                    namespace=rec.namespace,
                    key=rec.key,
                    value=rec.value,
                    version=rec.version,
                    provenance=rec.provenance,
                    trust=rec.trust,
                )
            )
    return ModelContext(
        run_id=run.run_id,
        tenant=run.tenant,
        workflow=run.workflow,
        definition_version=run.definition_version,
        payload_version=payload_version,
        step=run.current_step,
        attempt=run.attempt,
        variables=variables,
        tool_results=tool_results,
        approvals=tuple(
            ApprovalView(
                approval_id=a.approval_id,
                action=a.action,
                params_hash=a.params_hash,
                decision=a.decision.value,
                approver=a.approver,
            )
            for a in snap.approvals
        ),
        memory=tuple(sorted(facts, key=lambda f: (f.namespace, f.key))),
        events=dict(payload.get("_events", {})),
    )


@dataclass
class ExecutorSettings:
    lease_seconds: float = 30.0
    #: an external call is made only if at least this much lease time remains
    lease_margin: float = 1.0
    max_attempts: int = 5
    retry_backoff: float = 1.0
    max_steps_per_claim: int = 64
    tenant_keys: Mapping[str, bytes] = field(default_factory=dict)
    #: seeded protocol bugs to switch on (see :mod:`reference_runtime._bugs`)
    bugs: frozenset[str] = frozenset()


class LeaseKeeper(Protocol):
    """Who extends and gives up leases: the store itself, or Redis."""

    def renew(self, claim: Claim, now: float, ttl: float) -> Claim: ...

    def release(self, claim: Claim) -> None: ...


class _StoreLeases:
    def __init__(self, store: Store) -> None:
        self.store = store

    def renew(self, claim: Claim, now: float, ttl: float) -> Claim:
        return self.store.renew_lease(claim, now, ttl)

    def release(self, claim: Claim) -> None:
        self.store.release(claim)


class _Yield(Exception):
    """Stop working on this run for now (it waits, finished, or was parked)."""


class Executor:
    """Advances leased runs. One per worker process."""

    def __init__(
        self,
        *,
        store: Store,
        services: ExternalServices | None,
        registry: Registry,
        clock: Clock,
        worker_id: str,
        artifacts: ArtifactStore | None = None,
        settings: ExecutorSettings | None = None,
        model: Callable[[ModelContext, Definition], Action] | None = None,
        on_context: Callable[[ModelContext], None] | None = None,
        leases: LeaseKeeper | None = None,
    ) -> None:
        self.store = store
        self.leases: LeaseKeeper = leases or _StoreLeases(store)
        self.services = services
        self.registry = registry
        self.clock = clock
        self.worker_id = worker_id
        self.artifacts = artifacts
        self.settings = settings or ExecutorSettings()
        self._model = model
        self._on_context = on_context
        self._claim: Claim | None = None
        #: only for the seeded bug context-from-process-memory
        self._context_cache: dict[str, ModelContext] = {}

    # -- the loop -------------------------------------------------------------

    def advance(self, claim: Claim) -> Run | None:
        """Work on ``claim``'s run until it waits, ends, is parked, or the step
        budget is used. Returns the last run row this worker saw (None if it
        lost the run to another writer, or lost its storage connection)."""
        self._claim = claim
        last: Run | None = claim.run
        try:
            for _ in range(self.settings.max_steps_per_claim):
                snap = self.store.load(claim.run.run_id)
                last = snap.run
                if snap.run.status in TERMINAL or snap.run.error:
                    break
                self._step(snap)
        except _Yield:
            pass
        except ConcurrencyConflict:
            # Another worker advanced the run or took the lease: its state
            # wins, ours is discarded. Nothing to undo -- we never commit
            # partial state.
            return None
        except StorageUnavailable:
            # The connection died, and the transaction in flight with it: as
            # after losing the lease, stop here. What was committed before is
            # durable; the next claim re-reads it and carries on (an effect
            # called but not recorded is reconciled, as after a crash).
            return None
        finally:
            if self._claim is not None:
                self._release(self._claim)
            self._claim = None
        return last

    def _release(self, claim: Claim) -> None:
        """Give the lease back; releasing is idempotent (owner and token are
        compared), so a connection lost on the way is retried once on a fresh
        one. Failing twice, the lease simply runs out."""
        for attempt in (1, 2):
            try:
                self.leases.release(claim)
                return
            except ConcurrencyConflict:
                return
            except StorageUnavailable:
                if attempt == 2:
                    return

    def _now(self) -> float:
        return self.clock.now()

    # -- checkpoint helper -------------------------------------------------

    def _commit(
        self,
        run: Run,
        *,
        status: RunStatus | None = None,
        action: str = "transition",
        detail: dict[str, Any] | None = None,
        state: WorkingState | None = None,
        operations: tuple[Operation, ...] = (),
        approvals: tuple[Approval, ...] = (),
        inbox_acked: tuple[str, ...] = (),
        memory: tuple[MemoryRecord, ...] = (),
        artifacts: tuple[ArtifactRef, ...] = (),
        children: tuple[tuple[Run, WorkingState], ...] = (),
        outbox: tuple[InboxMessage, ...] = (),
        extra_audit: tuple[AuditEvent, ...] = (),
        **fields: Any,
    ) -> Run:
        assert self._claim is not None
        now = self._now()
        dst = status or run.status
        check_transition(run.run_id, run.status, dst)
        new = run.model_copy(
            update={
                **fields,
                "status": dst,
                "state_version": run.state_version + 1,
                "updated_at": now,
            }
        )
        audit = AuditEvent(
            tenant=run.tenant,
            created_at=now,
            updated_at=now,
            run_id=run.run_id,
            at=now,
            actor=self.worker_id,
            action=action,
            from_status=run.status,
            to_status=dst,
            state_version=new.state_version,
            detail={"step": run.current_step, "next_step": new.current_step, **(detail or {})},
        )
        self.store.commit(
            Commit(
                run=new,
                expected_version=run.state_version,
                worker_id=self.worker_id,
                fencing_token=self._claim.fencing_token,
                now=now,
                state=state,
                operations=operations,
                approvals=approvals,
                audit=(audit, *extra_audit),
                inbox_acked=inbox_acked,
                memory=memory,
                artifacts=artifacts,
                children=children,
                outbox=outbox,
            )
        )
        return new

    def _state(self, snap: Snapshot, payload: dict[str, Any]) -> WorkingState:
        return snap.state.model_copy(
            update={
                "payload": payload,
                "payload_version": self.registry.payload_version(snap.run.workflow),
                "updated_at": self._now(),
            }
        )

    # -- one step ---------------------------------------------------------

    def _step(self, snap: Snapshot) -> None:
        run = snap.run
        try:
            check_schema_version("run record", run.schema_version)
            check_schema_version("working-state record", snap.state.schema_version)
            definition = self.registry.definition(run.workflow, run.definition_version)
            payload = self.registry.upgrade(
                run.workflow, dict(snap.state.payload), snap.state.payload_version
            )
            if (
                "no-migration" in self.settings.bugs
                and snap.state.payload_version < self.registry.payload_version(run.workflow)
            ):
                # SEEDED BUG no-migration: only payloads from the future are
                # refused; an older one is read as if it had this code's shape.
                payload = dict(snap.state.payload)
        except (FutureSchemaError, UnknownWorkflowError) as exc:
            # Never mis-read or overwrite what newer code wrote: park the run
            # untouched and let a newer worker continue it.
            self.store.park(run.run_id, str(exc), self._now())
            raise _Yield from exc

        if run.status is S.CREATED or run.status is S.RETRY_SCHEDULED:
            self._commit(run, status=S.RUNNING, wake_at=None)
        elif run.status is S.WAITING_FOR_APPROVAL:
            self._on_approval_wait(snap, payload)
        elif run.status is S.WAITING_FOR_EVENT:
            self._on_event_wait(snap, definition, payload)
        elif run.status is S.RECONCILING:
            self._reconcile(snap, definition, payload, self._pending_op(snap))
        elif run.status is S.RUNNING:
            op = self._pending_op(snap)
            if op is not None and not (op.status is OS.PREPARED and self._unreconcilable(op)):
                # An intent without a result: we may have called. Find out
                # before doing anything else.
                run = self._commit(run, status=S.RECONCILING, detail={"op_id": op.op_id})
                snap = Snapshot(run, snap.state, snap.operations, snap.approvals, ())
                self._reconcile(snap, definition, payload, op)
            else:
                self._decide_and_act(snap, definition, payload)

    def _pending_op(self, snap: Snapshot) -> Operation | None:
        oid = op_id_for(snap.run.run_id, snap.run.current_step)
        for op in snap.operations:
            if op.op_id == oid and op.status in (OS.PREPARED, OS.SENT, OS.UNKNOWN):
                return op
        return None

    def _caps(self, op: Operation) -> Any:
        assert self.services is not None
        return self.services.capabilities(op.kind.split(".", 1)[0])

    def _unreconcilable(self, op: Operation) -> bool:
        caps = self._caps(op)
        return not (caps.idempotency_keys or caps.lookup_by_key or caps.lookup_by_business_key)

    def _decide_and_act(
        self, snap: Snapshot, definition: Definition, payload: dict[str, Any]
    ) -> None:
        run = snap.run
        now = self._now()
        ctx = build_context(
            snap,
            definition,
            payload,
            self.registry.payload_version(run.workflow),
            lambda ns, trust, t: self.store.read_memory(run.tenant, ns, t, min_trust=trust),
            now,
        )
        if "context-from-process-memory" in self.settings.bugs:
            # SEEDED BUG context-from-process-memory: "tool results and memory
            # do not change under a running worker" -- so they are kept from
            # the first context this process built for the run.
            cached = self._context_cache.setdefault(run.run_id, ctx)
            ctx = ctx.model_copy(
                update={"tool_results": cached.tool_results, "memory": cached.memory}
            )
        if self._on_context is not None:
            self._on_context(ctx)
        policy = self._model or definition.policy
        try:
            action = policy(ctx, definition)
        except Exception as exc:
            # The model (or the step's code) broke on this context. That is
            # the run's problem, not the worker's: back off and retry, then
            # fail the run -- never crash-loop every worker that claims it.
            self._retry_later(
                run,
                what=f"the model failed at step {run.current_step!r}",
                reason=f"{type(exc).__name__}: {exc}",
                action="model_error",
            )

        if isinstance(action, Proceed):
            self._checkpoint_step(snap, payload, action.updates, action.next_step, "step")
        elif isinstance(action, CallTool):
            self._call_tool(snap, payload, action)
        elif isinstance(action, RequestApproval):
            self._request_approval(snap, action)
        elif isinstance(action, AwaitEvent):
            cp.hit("before_step_commit")
            self._commit(
                run,
                status=S.WAITING_FOR_EVENT,
                waiting_on=f"event:{action.event_key}",
                wake_at=now + action.timeout_seconds,
                current_step=action.next_step,
            )
            cp.hit("after_step_commit")
            raise _Yield
        elif isinstance(action, WriteMemory):
            self._write_memory(snap, payload, action)
        elif isinstance(action, StoreArtifact):
            self._store_artifact(snap, payload, action)
        elif isinstance(action, SpawnChild):
            self._spawn_child(snap, payload, action)
        elif isinstance(action, Complete):
            self._finish(snap, S.COMPLETED, {"output": action.output}, payload)
        elif isinstance(action, Fail):
            self._finish(snap, S.FAILED, {"error": action.reason}, payload, error=action.reason)
        elif isinstance(action, Cancel):
            self._finish(snap, S.CANCELLED, {"reason": action.reason}, payload)

    # -- actions without external effect ---------------------------------------

    def _checkpoint_step(
        self,
        snap: Snapshot,
        payload: dict[str, Any],
        updates: Mapping[str, Any],
        next_step: str,
        action: str,
        **commit_args: Any,
    ) -> Run:
        cp.hit("before_step_commit")
        run = self._commit(
            snap.run,
            status=S.RUNNING,
            action=action,
            state=self._state(snap, {**payload, **updates}),
            current_step=next_step,
            attempt=0,
            **commit_args,
        )
        cp.hit("after_step_commit")
        return run

    def _write_memory(self, snap: Snapshot, payload: dict[str, Any], a: WriteMemory) -> None:
        run, now = snap.run, self._now()
        # Number past every stored version, live or not. Counting only live
        # ones would restart at v1 after the newest was erased or expired: the
        # new record would then overwrite the v1 row (another user's data,
        # same memory_id) and, older than the erased newest, never be read.
        stored = [
            r
            for r in self.store.read_memory_unfiltered(a.namespace)
            if r.tenant == run.tenant and r.key == a.key
        ]
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
        self._checkpoint_step(
            snap, payload, a.updates, a.next_step, "memory_write", memory=memory, detail=detail
        )

    def _store_artifact(self, snap: Snapshot, payload: dict[str, Any], a: StoreArtifact) -> None:
        if self.artifacts is None:
            raise UnknownWorkflowError(
                f"workflow {snap.run.workflow!r} stores artifacts, but this worker has no "
                "artifact directory configured (--artifacts DIR)"
            )
        run, now = snap.run, self._now()
        uri, digest = self.artifacts.put(a.content.encode())
        ref = ArtifactRef(
            tenant=run.tenant,
            created_at=now,
            updated_at=now,
            uri=uri,
            sha256=digest,
            owner=run.run_id,
            subject=a.subject,
        )
        self._checkpoint_step(
            snap, payload, {a.variable: uri}, a.next_step, "artifact", artifacts=(ref,)
        )

    def _spawn_child(self, snap: Snapshot, payload: dict[str, Any], a: SpawnChild) -> None:
        run, now = snap.run, self._now()
        definition = self.registry.definition(a.workflow)
        child_input = self.registry.validate_input(a.workflow, a.input)
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
            payload_version=self.registry.payload_version(a.workflow),
            payload={**child_input, "_envelope": envelope},
        )
        self._checkpoint_step(
            snap,
            payload,
            {"children": [*payload.get("children", []), a.child_run_id]},
            a.next_step,
            "delegate",
            children=((child, child_state),),
            detail={"child_run_id": a.child_run_id},
        )

    def _finish(
        self,
        snap: Snapshot,
        status: RunStatus,
        detail: dict[str, Any],
        payload: dict[str, Any],
        error: str | None = None,
    ) -> None:
        run, now = snap.run, self._now()
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
        cp.hit("before_step_commit")
        self._commit(
            run,
            status=status,
            detail=detail,
            state=self._state(snap, {**payload, "_output": detail}),
            current_step="done",
            error=error,
            outbox=outbox,
            wake_at=None,
            waiting_on=None,
        )
        cp.hit("after_step_commit")
        raise _Yield

    # -- approvals ---------------------------------------------------------

    def _request_approval(self, snap: Snapshot, a: RequestApproval) -> None:
        run, now = snap.run, self._now()
        approval = Approval(
            tenant=run.tenant,
            created_at=now,
            updated_at=now,
            approval_id=a.approval_id,
            run_id=run.run_id,
            action=a.action,
            params=a.params,
            params_hash=stable_hash(a.params),
            resource=a.resource,
            scope=a.scope,
            requester=self.worker_id,
            approver_role=a.approver_role,
            expires_at=now + a.ttl_seconds,
            policy_version=POLICY_VERSION,
        )
        cp.hit("before_approval_write")
        self._commit(
            run,
            status=S.WAITING_FOR_APPROVAL,
            action="approval_requested",
            approvals=(approval,),
            waiting_on=f"approval:{a.approval_id}",
            wake_at=approval.expires_at,
            current_step=a.next_step,
            detail={"approval_id": a.approval_id, "params_hash": approval.params_hash},
        )
        cp.hit("after_approval_write")
        raise _Yield

    def _on_approval_wait(self, snap: Snapshot, payload: dict[str, Any]) -> None:
        run, now = snap.run, self._now()
        approval_id = (run.waiting_on or "").removeprefix("approval:")
        approval = next((a for a in snap.approvals if a.approval_id == approval_id), None)
        if approval is None:
            self._commit(run, status=S.FAILED, error=f"approval {approval_id!r} is missing")
            raise _Yield
        acked: list[str] = []
        rejected: list[AuditEvent] = []
        decided = None
        for msg in snap.pending_inbox:
            acked.append(msg.message_id)
            reason = None
            if msg.kind != "approval_decision":
                reason = f"a {msg.kind} message while waiting for approval {approval_id}"
            else:
                try:
                    vd = verify_decision(msg, approval, self.settings.tenant_keys)
                except (ForgedApprovalError, MalformedEventError) as exc:
                    reason = str(exc)
                else:
                    if vd.params_hash != approval.params_hash:
                        reason = "the decision is for other parameters than the request"
                    elif is_expired(approval, now):
                        reason = f"the decision arrived after expiry ({approval.expires_at})"
                    else:
                        decided = vd
            if reason is not None:
                rejected.append(self._audit(run, "decision_ignored", msg.message_id, reason))
            if decided is not None:
                break
        acks = tuple(acked)
        if decided is not None:
            new_approval = approval.model_copy(
                update={
                    "decision": decided.decision,
                    "approver": decided.approver,
                    "decided_at": now,
                    "updated_at": now,
                }
            )
            approved = decided.decision is Decision.APPROVED
            cp.hit("before_approval_write")
            cp.hit("before_inbox_ack")
            self._commit(
                run,
                status=S.RUNNING if approved else S.CANCELLED,
                action="decision",
                approvals=(new_approval,),
                inbox_acked=acks,
                extra_audit=tuple(rejected),
                waiting_on=None,
                wake_at=None,
                detail={
                    "approval_id": approval_id,
                    "decision": decided.decision.value,
                    "approver": decided.approver,
                },
            )
            cp.hit("after_inbox_ack")
            cp.hit("after_approval_write")
            if not approved:
                raise _Yield
            return
        # Same bound as wake_at (= expires_at): a wait that wakes must end, or
        # the run stays runnable and the worker spins claiming it.
        if is_expired(approval, now):
            self._commit(
                run,
                status=S.CANCELLED,
                action="approval_expired",
                inbox_acked=acks,
                extra_audit=tuple(rejected),
                waiting_on=None,
                wake_at=None,
                detail={"approval_id": approval_id},
            )
            raise _Yield
        if acks:
            cp.hit("before_inbox_ack")
            self._commit(run, inbox_acked=acks, extra_audit=tuple(rejected), action="inbox")
            cp.hit("after_inbox_ack")
        raise _Yield

    def _audit(self, run: Run, action: str, message_id: str, reason: str) -> AuditEvent:
        now = self._now()
        return AuditEvent(
            tenant=run.tenant,
            created_at=now,
            updated_at=now,
            run_id=run.run_id,
            at=now,
            actor=self.worker_id,
            action=action,
            detail={"message_id": message_id, "reason": reason},
        )

    # -- events --------------------------------------------------------------

    def _on_event_wait(self, snap: Snapshot, d: Definition, payload: dict[str, Any]) -> None:
        run, now = snap.run, self._now()
        waiting = run.waiting_on or ""
        key = waiting.split(":", 1)[1] if ":" in waiting else waiting
        operator = waiting.startswith("operator:")
        acked: list[str] = []
        ignored: list[AuditEvent] = []
        match: InboxMessage | None = None
        for msg in snap.pending_inbox:
            acked.append(msg.message_id)
            want = waiting if operator else key
            if msg.kind in ("event", "webhook") and msg.payload.get("event_key") == want:
                match = msg
                break
            ignored.append(self._audit(run, "event_ignored", msg.message_id, f"waits on {waiting}"))
        acks = tuple(acked)
        if match is not None and operator:
            self._resolve_by_operator(snap, d, payload, key, match, acks, tuple(ignored))
            return
        if match is not None:
            events = {**payload.get("_events", {}), key: match.payload.get("data")}
            cp.hit("before_inbox_ack")
            self._commit(
                run,
                status=S.RUNNING,
                action="event",
                state=self._state(snap, {**payload, "_events": events}),
                inbox_acked=acks,
                extra_audit=tuple(ignored),
                waiting_on=None,
                wake_at=None,
                detail={"event_key": key, "message_id": match.message_id},
            )
            cp.hit("after_inbox_ack")
            return
        if run.wake_at is not None and now >= run.wake_at:
            self._commit(
                run,
                status=S.FAILED,
                action="timeout",
                inbox_acked=acks,
                error=f"timed out waiting for {waiting}",
                waiting_on=None,
                wake_at=None,
            )
            raise _Yield
        if acks:
            cp.hit("before_inbox_ack")
            self._commit(run, inbox_acked=acks, extra_audit=tuple(ignored), action="inbox")
            cp.hit("after_inbox_ack")
        raise _Yield

    def _resolve_by_operator(
        self,
        snap: Snapshot,
        d: Definition,
        payload: dict[str, Any],
        op_id: str,
        msg: InboxMessage,
        acks: tuple[str, ...],
        ignored: tuple[AuditEvent, ...],
    ) -> None:
        """An operator tells whether an effect of unknown outcome was applied."""
        run, now = snap.run, self._now()
        op = next(o for o in snap.operations if o.op_id == op_id)
        data = msg.payload.get("data") or {}
        applied = bool(data.get("applied"))
        if applied:
            new_op = op.model_copy(
                update={
                    "status": OS.RECONCILED,
                    "external_ref": data.get("external_ref"),
                    "response": {},
                    "updated_at": now,
                }
            )
            next_step = d.after(run.current_step) if run.current_step in d.steps else "done"
        else:
            new_op = op.model_copy(update={"status": OS.FAILED, "updated_at": now})
            next_step = run.current_step
        cp.hit("before_inbox_ack")
        self._commit(
            run,
            status=S.RUNNING,
            action="operator_resolution",
            operations=(new_op,),
            inbox_acked=acks,
            extra_audit=ignored,
            waiting_on=None,
            wake_at=None,
            current_step=next_step,
            detail={"op_id": op_id, "applied": applied},
        )
        cp.hit("after_inbox_ack")

    # -- effects ----------------------------------------------------------------

    def _recheck_approval(
        self,
        snap: Snapshot,
        run: Run,
        approval_id: str,
        kind: str,
        request_hash: str,
        operations: tuple[Operation, ...] = (),
    ) -> None:
        """Cancel the run unless ``approval_id`` authorizes this exact request now.

        Called before every send of a gated effect -- the first one and any
        resend after reconciliation -- so an approval that expired or no
        longer matches the parameters never authorizes the effect.
        """
        approval = next((x for x in snap.approvals if x.approval_id == approval_id), None)
        if approval is not None:
            # An approval granted under older code names the parameters in
            # that code's shape; compare like with like.
            approval = upgrade_approval(self.registry, run.workflow, approval)
        why = authorizes(approval, kind, request_hash, self._now())
        if "skip-approval-recheck" in self.settings.bugs and approval is not None:
            # SEEDED BUG skip-approval-recheck: "it was approved when the
            # decision came in" -- expiry and parameters are not looked at.
            why = None if approval.decision is Decision.APPROVED else why
        if why is not None:
            self._commit(
                run,
                status=S.CANCELLED,
                action="approval_denied",
                operations=operations,
                error=f"{kind} not authorized: {why}",
                detail={"approval_id": approval_id, "reason": why},
            )
            raise _Yield

    def _call_tool(self, snap: Snapshot, payload: dict[str, Any], a: CallTool) -> None:
        run, now = snap.run, self._now()
        kind = f"{a.service}.{a.action}"
        request_hash = stable_hash(a.request)
        if a.requires_approval is not None:
            self._recheck_approval(snap, run, a.requires_approval, kind, request_hash)
        oid = op_id_for(run.run_id, run.current_step)
        previous = next((o for o in snap.operations if o.op_id == oid), None)
        op = Operation(
            tenant=run.tenant,
            created_at=previous.created_at if previous else now,
            updated_at=now,
            op_id=oid,
            run_id=run.run_id,
            step=run.current_step,
            kind=kind,
            idempotency_key=idempotency_key(run.tenant, run.run_id, run.current_step),
            business_key=a.business_key,
            request_hash=request_hash,
            request=a.request,
            status=OS.PREPARED,
            delivery=a.delivery,
            attempts=(previous.attempts + 1) if previous else 1,
            approval_id=a.requires_approval,
        )
        if "effect-before-intent" in self.settings.bugs:
            # SEEDED BUG effect-before-intent: "one commit per effect is
            # enough": call first, then record intent and result together.
            self._send(snap, run, payload, op, a.next_step, intent_persisted=False)
            return
        cp.hit("before_intent_commit")
        run = self._commit(
            run,
            action="effect_intent",
            operations=(op,),
            detail={"op_id": oid, "kind": kind, "idempotency_key": op.idempotency_key},
        )
        cp.hit("after_intent_commit")
        self._send(snap, run, payload, op, a.next_step)

    def _send(
        self,
        snap: Snapshot,
        run: Run,
        payload: dict[str, Any],
        op: Operation,
        next_step: str,
        *,
        intent_persisted: bool = True,
    ) -> None:
        """Call the service for a persisted intent and record the outcome."""
        assert self.services is not None and self._claim is not None
        service, action = op.kind.split(".", 1)
        if self._unreconcilable(op) and intent_persisted:
            # Nothing can tell us later whether the call happened, so record
            # that we are about to make it: an intent without this mark was
            # certainly never sent.
            op = op.model_copy(update={"status": OS.SENT, "updated_at": self._now()})
            cp.hit("before_sent_mark")
            run = self._commit(
                run, action="effect_sent", operations=(op,), detail={"op_id": op.op_id}
            )
            cp.hit("after_sent_mark")
        cp.hit("before_lease_renew")
        self._claim = self.leases.renew(self._claim, self._now(), self.settings.lease_seconds)
        cp.hit("after_lease_renew")
        cp.hit("before_external_call")
        # A paused worker may wake up here long after its lease ran out; the
        # store would refuse its next commit, but the call would already be
        # out. Check the lease against the clock right before calling.
        if self._now() + self.settings.lease_margin > self._claim.lease_expiry:
            raise LeaseLostError(
                run.run_id,
                self.worker_id,
                self._claim.fencing_token,
                "lease too close to expiry to start an external call",
            )
        try:
            response = self.services.call(
                service,
                action,
                op.request,
                # SEEDED BUG no-idempotency-key: the key is computed and
                # stored for reconciliation, but never sent with the call.
                idempotency_key=(
                    None if "no-idempotency-key" in self.settings.bugs else op.idempotency_key
                ),
                business_key=op.business_key,
                context=CallContext(
                    tenant=run.tenant,
                    run_id=run.run_id,
                    op_id=op.op_id,
                    worker_id=self.worker_id,
                    fencing_token=self._claim.fencing_token,
                ),
            )
        except ServiceRejected as exc:
            cp.hit("after_external_call")
            self._rejected(snap, run, op, str(exc))
            return
        except OutcomeUnknown as exc:
            cp.hit("after_external_call")
            cp.hit("before_result_commit")
            self._commit(
                run,
                status=S.RECONCILING,
                action="effect_unknown",
                operations=(
                    op.model_copy(update={"status": OS.UNKNOWN, "updated_at": self._now()}),
                ),
                detail={"op_id": op.op_id, "reason": str(exc)},
            )
            cp.hit("after_result_commit")
            return
        cp.hit("after_external_call")
        self._record_result(snap, run, payload, op, response, OS.CONFIRMED, next_step)

    def _record_result(
        self,
        snap: Snapshot,
        run: Run,
        payload: dict[str, Any],
        op: Operation,
        response: ServiceResponse,
        status: OperationStatus,
        next_step: str,
    ) -> None:
        done = op.model_copy(
            update={
                "status": status,
                "external_ref": response.external_ref,
                "response": dict(response.body),
                "updated_at": self._now(),
            }
        )
        cp.hit("before_result_commit")
        self._commit(
            run,
            status=S.RUNNING,
            action="effect_confirmed" if status is OS.CONFIRMED else "effect_reconciled",
            operations=(done,),
            state=self._state(snap, payload),
            current_step=next_step,
            attempt=0,
            detail={
                "op_id": op.op_id,
                "external_ref": response.external_ref,
                "deduplicated": response.deduplicated,
            },
        )
        cp.hit("after_result_commit")

    def _rejected(self, snap: Snapshot, run: Run, op: Operation, reason: str) -> None:
        failed = op.model_copy(update={"status": OS.FAILED, "updated_at": self._now()})
        self._retry_later(
            run,
            what=f"{op.kind} rejected",
            reason=reason,
            action="effect_rejected",
            operations=(failed,),
            detail={"op_id": op.op_id},
        )

    def _retry_later(
        self,
        run: Run,
        *,
        what: str,
        reason: str,
        action: str,
        operations: tuple[Operation, ...] = (),
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Back off exponentially; after ``max_attempts`` the run fails."""
        attempt = run.attempt + 1
        if attempt >= self.settings.max_attempts:
            self._commit(
                run,
                status=S.FAILED,
                action=action.replace("rejected", "failed").replace("error", "failed"),
                operations=operations,
                attempt=attempt,
                error=f"{what} {attempt} times; last: {reason}",
                detail={**(detail or {}), "reason": reason},
            )
            raise _Yield
        delay = self.settings.retry_backoff * (2 ** (attempt - 1))
        self._commit(
            run,
            status=S.RETRY_SCHEDULED,
            action=action,
            operations=operations,
            attempt=attempt,
            wake_at=self._now() + delay,
            detail={**(detail or {}), "reason": reason, "retry_in": delay},
        )
        raise _Yield

    def _reconcile(
        self, snap: Snapshot, d: Definition, payload: dict[str, Any], op: Operation | None
    ) -> None:
        """Resolve an operation whose outcome is unknown before any retry."""
        assert self.services is not None
        run = snap.run
        next_step = d.after(run.current_step) if run.current_step in d.steps else "done"
        if op is None:
            # Nothing in flight (the result was recorded by a racing worker
            # or the operation was resolved): simply continue.
            self._commit(run, status=S.RUNNING, action="reconciled_nothing")
            return
        service = op.kind.split(".", 1)[0]
        caps = self._caps(op)
        found: ServiceResponse | None = None
        can_resend = caps.idempotency_keys
        try:
            if caps.lookup_by_key:
                cp.hit("before_reconcile_lookup")
                found = self.services.lookup(
                    service, idempotency_key=op.idempotency_key, tenant=run.tenant
                )
                cp.hit("after_reconcile_lookup")
                can_resend = True
            elif caps.lookup_by_business_key and op.business_key:
                cp.hit("before_reconcile_lookup")
                found = self.services.lookup(
                    service, business_key=op.business_key, tenant=run.tenant
                )
                cp.hit("after_reconcile_lookup")
                can_resend = True
        except (ServiceRejected, OutcomeUnknown) as exc:
            # The service cannot answer now: try again later, never guess.
            self._commit(
                run,
                status=S.RETRY_SCHEDULED,
                action="reconcile_deferred",
                attempt=run.attempt + 1,
                wake_at=self._now() + self.settings.retry_backoff,
                detail={"op_id": op.op_id, "reason": str(exc)},
            )
            raise _Yield from exc
        if found is not None:
            self._record_result(snap, run, payload, op, found, OS.RECONCILED, next_step)
            return
        at_most_once = op.delivery is Delivery.AT_MOST_ONCE
        if not can_resend and op.status is not OS.PREPARED and at_most_once:
            # Sent or maybe sent, and nobody can tell: an operator must.
            self._commit(
                run,
                status=S.WAITING_FOR_EVENT,
                action="needs_operator",
                operations=(op.model_copy(update={"status": OS.UNKNOWN}),),
                waiting_on=f"operator:{op.op_id}",
                wake_at=None,
                detail={"op_id": op.op_id, "kind": op.kind},
            )
            raise _Yield
        if op.approval_id is not None and can_resend:
            # The service says it was not applied: re-check the approval before
            # sending again (it may have expired while the run was down).
            failed = op.model_copy(update={"status": OS.FAILED, "updated_at": self._now()})
            self._recheck_approval(
                snap, run, op.approval_id, op.kind, op.request_hash, operations=(failed,)
            )
        # Not applied (or safe to repeat): send again with the same key.
        resend = op.model_copy(update={"status": OS.PREPARED, "attempts": op.attempts + 1})
        run = self._commit(
            run,
            status=S.RUNNING,
            action="reconciled_resend",
            operations=(resend,),
            detail={"op_id": op.op_id},
        )
        self._send(snap, run, payload, resend, next_step)
