"""The executor's loop: claim in hand, load, decide, act, until the run waits.

:class:`Executor` advances one leased run at a time. Each step loads a fresh
snapshot, upgrades its payload to this code's shape (or parks a run written by
newer code), and hands the run to the step module for its status: a waiting
run to the inbox or approval steps, an unresolved effect to reconciliation, a
running one to the model, whose action is carried out by the local-step or
effect functions. All of them share the executor's :class:`StepContext`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._artifacts import ArtifactStore
from .._clock import Clock
from .._errors import (
    ConcurrencyConflict,
    FutureSchemaError,
    StorageUnavailable,
    UnknownWorkflowError,
)
from .._model import (
    Action,
    AwaitEvent,
    CallTool,
    Cancel,
    Complete,
    Fail,
    ModelContext,
    Proceed,
    RequestApproval,
    SpawnChild,
    StoreArtifact,
    WriteMemory,
)
from .._records import OperationStatus, Run, check_schema_version
from .._services import ExternalServices
from .._states import TERMINAL, RunStatus
from .._workflows import Definition, Registry
from ..store import Claim, Snapshot, Store
from ._approval_steps import on_approval_wait, request_approval
from ._context import build_context
from ._effects import call_tool, pending_op, reconcile, unreconcilable
from ._inbox import on_event_wait
from ._local_steps import (
    await_event,
    checkpoint_step,
    finish,
    spawn_child,
    store_artifact,
    write_memory,
)
from ._step import ExecutorSettings, LeaseKeeper, StepContext, StoreLeases, Yield

S = RunStatus
OS = OperationStatus


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
        self.step_context = StepContext(
            store=store,
            leases=leases or StoreLeases(store),
            services=services,
            registry=registry,
            clock=clock,
            worker_id=worker_id,
            artifacts=artifacts,
            settings=settings or ExecutorSettings(),
        )
        self._model = model
        self._on_context = on_context
        #: only for the seeded bug context-from-process-memory
        self._context_cache: dict[str, ModelContext] = {}

    # -- the loop -------------------------------------------------------------

    def advance(self, claim: Claim) -> Run | None:
        """Work on ``claim``'s run until it waits, ends, is parked, or the step
        budget is used. Returns the last run row this worker saw (None if it
        lost the run to another writer, or lost its storage connection)."""
        sc = self.step_context
        sc.claim = claim
        last: Run | None = claim.run
        try:
            for _ in range(sc.settings.max_steps_per_claim):
                snap = sc.store.load(claim.run.run_id)
                last = snap.run
                if snap.run.status in TERMINAL or snap.run.error:
                    break
                self._step(snap)
        except Yield:
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
            if sc.claim is not None:
                self._release(sc.claim)
            sc.claim = None
        return last

    def _release(self, claim: Claim) -> None:
        """Give the lease back; releasing is idempotent (owner and token are
        compared), so a connection lost on the way is retried once on a fresh
        one. Failing twice, the lease simply runs out."""
        for attempt in (1, 2):
            try:
                self.step_context.leases.release(claim)
                return
            except ConcurrencyConflict:
                return
            except StorageUnavailable:
                if attempt == 2:
                    return

    # -- one step ---------------------------------------------------------

    def _step(self, snap: Snapshot) -> None:
        run, sc = snap.run, self.step_context
        try:
            check_schema_version("run record", run.schema_version)
            check_schema_version("working-state record", snap.state.schema_version)
            definition = sc.registry.definition(run.workflow, run.definition_version)
            payload = sc.registry.upgrade(
                run.workflow, dict(snap.state.payload), snap.state.payload_version
            )
            if (
                "no-migration" in sc.settings.bugs
                and snap.state.payload_version < sc.registry.payload_version(run.workflow)
            ):
                # SEEDED BUG no-migration: only payloads from the future are
                # refused; an older one is read as if it had this code's shape.
                payload = dict(snap.state.payload)
        except (FutureSchemaError, UnknownWorkflowError) as exc:
            # Never mis-read or overwrite what newer code wrote: park the run
            # untouched and let a newer worker continue it.
            sc.store.park(run.run_id, str(exc), sc.now())
            raise Yield from exc

        if run.status is S.CREATED or run.status is S.RETRY_SCHEDULED:
            sc.commit(run, status=S.RUNNING, wake_at=None)
        elif run.status is S.WAITING_FOR_APPROVAL:
            on_approval_wait(sc, snap, payload)
        elif run.status is S.WAITING_FOR_EVENT:
            on_event_wait(sc, snap, definition, payload)
        elif run.status is S.RECONCILING:
            reconcile(sc, snap, definition, payload, pending_op(snap))
        elif run.status is S.RUNNING:
            op = pending_op(snap)
            if op is not None and not (op.status is OS.PREPARED and unreconcilable(sc, op)):
                # An intent without a result: we may have called. Find out
                # before doing anything else.
                run = sc.commit(run, status=S.RECONCILING, detail={"op_id": op.op_id})
                snap = Snapshot(run, snap.state, snap.operations, snap.approvals, ())
                reconcile(sc, snap, definition, payload, op)
            else:
                self._decide_and_act(snap, definition, payload)

    def _decide_and_act(
        self, snap: Snapshot, definition: Definition, payload: dict[str, Any]
    ) -> None:
        run, sc = snap.run, self.step_context
        now = sc.now()
        ctx = build_context(
            snap,
            definition,
            payload,
            sc.registry.payload_version(run.workflow),
            lambda ns, trust, t: sc.store.read_memory(run.tenant, ns, t, min_trust=trust),
            now,
        )
        if "context-from-process-memory" in sc.settings.bugs:
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
            sc.retry_later(
                run,
                what=f"the model failed at step {run.current_step!r}",
                reason=f"{type(exc).__name__}: {exc}",
                action="model_error",
            )

        if isinstance(action, Proceed):
            checkpoint_step(sc, snap, payload, action.updates, action.next_step, "step")
        elif isinstance(action, CallTool):
            call_tool(sc, snap, payload, action)
        elif isinstance(action, RequestApproval):
            request_approval(sc, snap, action)
        elif isinstance(action, AwaitEvent):
            await_event(sc, run, action, now)
        elif isinstance(action, WriteMemory):
            write_memory(sc, snap, payload, action)
        elif isinstance(action, StoreArtifact):
            store_artifact(sc, snap, payload, action)
        elif isinstance(action, SpawnChild):
            spawn_child(sc, snap, payload, action)
        elif isinstance(action, Complete):
            finish(sc, snap, S.COMPLETED, {"output": action.output}, payload)
        elif isinstance(action, Fail):
            finish(sc, snap, S.FAILED, {"error": action.reason}, payload, error=action.reason)
        elif isinstance(action, Cancel):
            finish(sc, snap, S.CANCELLED, {"reason": action.reason}, payload)
