"""One environment of the reference runtime: a deployment behind the contract."""

from __future__ import annotations

import json
from collections.abc import Hashable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from reference_runtime import TRANSITIONS, MemoryRecord, Provenance, Runtime
from reference_runtime import crashpoints as cp
from reference_runtime._records import DEFAULT_TRUST
from reference_runtime._workflows import Registry, upgrade_approval

from ...model import CrashSpec, RunSpec
from .._contract import (
    Capability,
    Declarations,
    DurableState,
    Endpoint,
    Observation,
    RunView,
    WorkerHandle,
    release_routes,
    route_worker,
)
from .._netinfo import tcp_connections
from .._workers import ForkServerWorker
from ..kit import other_tenant, signed_decision
from ._deployment import MAX_CLAIMS, WORKER_TARGET, Deployment, fork_server
from ._tables import DELIVERY, NEEDS_APPROVAL, OPERATION_STATUS, VOLATILE, downgrade, normalize


class AdapterSettings(Protocol):
    """What an environment reads of its adapter (a ``ReferenceAdapter``,
    named here by what it offers: the adapter's module imports this one)."""

    @property
    def backend(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def postgres_url(self) -> str | None: ...
    @property
    def redis_url(self) -> str | None: ...
    @property
    def lease_seconds(self) -> float: ...
    @property
    def bugs(self) -> frozenset[str]: ...
    @property
    def network_timeout(self) -> float: ...
    @property
    def capabilities(self) -> frozenset[Capability]: ...


class ReferenceEnvironment:
    """One isolated deployment of the reference runtime (see the contract)."""

    def __init__(self, adapter: AdapterSettings, workdir: Path) -> None:
        self.adapter = adapter
        self.workdir = workdir
        self.d = Deployment(
            workdir,
            backend=adapter.backend,
            queue=adapter.queue,
            postgres_url=adapter.postgres_url,
            redis_url=adapter.redis_url,
            lease_seconds=adapter.lease_seconds,
            bugs=adapter.bugs,
            network_timeout=adapter.network_timeout,
        )
        self.world = self.d.world
        self._server = fork_server(backend=adapter.backend, queue=adapter.queue)
        self._registry = Registry()
        self._workers: list[ForkServerWorker] = []
        self._audit_seen = 0
        self._context_log = workdir / "contexts.jsonl"
        self._context_seen = 0
        #: trace every crash point hit of the workers started from now on
        #: (the harness's site profile; see crash_point_hits)
        self.trace_crash_points = False

    # -- declarations ---------------------------------------------------------

    def declarations(self) -> Declarations:
        return Declarations(
            delivery=dict(DELIVERY),
            transitions={s.value: sorted(t.value for t in succ) for s, succ in TRANSITIONS.items()},
            needs_approval=dict(NEEDS_APPROVAL),
        )

    def crash_points(self) -> list[str]:
        from reference_runtime import _executor  # noqa: F401  (declares the sites)

        return sorted(cp.SITES)

    def crash_point_hits(self) -> dict[str, int]:
        """The highest hit number of each crash point that any one traced
        worker reached (optional in the contract: the harness's site profile)."""
        out: dict[str, int] = {}
        for _pid, site, n, action in self.d.crash_log():
            if action == "trace":
                out[site] = max(out.get(site, 0), n)
        return out

    def crash_point_trace(self) -> list[tuple[int, str, int]]:
        """Every traced crash point hit so far, in order, as (worker pid, site,
        hit) (optional in the contract: the harness's site profile)."""
        return [(pid, site, n) for pid, site, n, action in self.d.crash_log() if action == "trace"]

    def pause_points(self) -> list[str]:
        # checkpoint_stmt_* sit inside the commit transaction.
        return [s for s in self.crash_points() if not s.startswith("checkpoint_stmt_")]

    # -- workers --------------------------------------------------------------

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        spec = None if crash is None else f"{crash.site}={crash.action}@{crash.nth}"
        env = self.d.worker_env(
            crash=spec, code_version=code_version, trace=self.trace_crash_points
        )
        env["RR_CONTEXT_LOG"] = str(self._context_log)
        env.update(self._routed(worker_id, env))
        proc = self._server.spawn(
            WORKER_TARGET,
            args={"worker_id": worker_id, "env": env, "max_claims": MAX_CLAIMS},
            env=env,
            log=self.workdir / "workers.log",
        )
        handle = ForkServerWorker(worker_id, proc)
        self._workers.append(handle)
        return handle

    def _routed(self, worker_id: str, env: dict[str, str]) -> dict[str, str]:
        """The worker's store URLs, through proxies of its own when the
        network faults run on Toxiproxy (the contract's ``route_worker``)."""
        if Capability.NETWORK_FAULTS not in self.adapter.capabilities:
            return {}
        keys = {"postgres": "RR_STORE", "redis": "RR_REDIS_URL"}
        services = {s: env[k] for s, k in keys.items() if env.get(k)}
        routed = route_worker(self, worker_id, services)
        return {keys[s]: url for s, url in routed.items()}

    # -- ingress ----------------------------------------------------------------

    def submit(self, run: RunSpec) -> None:
        if run.code_version is None:
            self.d.submit(run.workflow, run.input, tenant=run.tenant, run_id=run.run_id)
            return
        # An older deployment accepted this run: write its payload in that
        # version's schema, as the old code would have.
        old = Runtime(self.d.config.with_(code_version=run.code_version), clock=self.d.clock)
        try:
            old.submit(
                run.workflow,
                downgrade(run.workflow, run.input, run.code_version),
                tenant=run.tenant,
                run_id=run.run_id,
            )
        finally:
            old.close()

    def deliver(self, message: dict[str, Any]) -> bool:
        return self.d.deliver(message)

    def cancel(self, run_id: str) -> bool:
        return self.d.runtime.cancel(run_id, reason="harness operator_cancel")

    def approval_message(
        self, run_id: str, decision: str, variant: str, message_id: str
    ) -> dict[str, Any] | None:
        snap = self.d.snapshot(run_id)
        if snap.run.status.value != "WaitingForApproval" or not snap.run.waiting_on:
            return None
        approval_id = snap.run.waiting_on.removeprefix("approval:")
        approval = next((a for a in snap.approvals if a.approval_id == approval_id), None)
        if approval is None:
            # The run says it waits, but its approval request was never
            # recorded (a split checkpoint): no approver can answer it. The
            # run stays waiting; progress and legal_transitions judge that.
            return None
        return signed_decision(
            self.d.authority,
            variant,
            tenant=snap.run.tenant,
            run_id=run_id,
            approval_id=approval_id,
            decision=decision,
            role=approval.approver_role,
            params_hash=approval.params_hash,
            message_id=message_id,
        )

    def event_message(self, run_id: str, variant: str, message_id: str) -> dict[str, Any] | None:
        """The event ``run_id`` waits on, as another tenant sends it
        (``variant`` ``cross_tenant``, the only one): it names the run and
        the event the run waits for, with data that tenant made up. None if
        the run waits for no event."""
        if variant != "cross_tenant":
            raise ValueError(f"unknown event variant {variant!r}")
        run = self.d.snapshot(run_id).run
        waiting = run.waiting_on or ""
        if run.status.value != "WaitingForEvent" or not waiting.startswith("event:"):
            return None
        sender = other_tenant(self.d.authority, run.tenant)
        return self.d.authority.webhook(
            sender,
            run_id,
            waiting.removeprefix("event:"),
            {"sent_by": sender},
            message_id=message_id,
        )

    def operator_message(
        self, run_id: str, applied: bool, external_ref: str | None, message_id: str
    ) -> dict[str, Any] | None:
        """An operator's answer to ``run_id``, stopped on a call of unknown
        outcome: whether it was applied, and its reference. The reference
        runtime takes it as the event its wait names (``operator:<op id>``)
        with ``{applied, external_ref}``. None if the run waits for no
        operator."""
        run = self.d.snapshot(run_id).run
        waiting = run.waiting_on or ""
        if run.status.value != "WaitingForEvent" or not waiting.startswith("operator:"):
            return None
        answer = {"applied": applied, "external_ref": external_ref}
        return self.d.authority.webhook(run.tenant, run_id, waiting, answer, message_id=message_id)

    # -- observation --------------------------------------------------------------

    def observe(self) -> Observation:
        store = self.d.runtime.store
        runs = []
        approvals: list[dict[str, Any]] = []
        operations: list[dict[str, Any]] = []
        for run in store.list_runs():
            snap = store.load(run.run_id)
            operations += (
                {
                    "run_id": op.run_id,
                    "op_id": op.op_id,
                    "step": op.step,
                    "kind": op.kind,
                    "request_hash": op.request_hash,
                    "business_key": op.business_key,
                    "status": OPERATION_STATUS.get(op.status.value, "in_doubt"),
                    "raw_status": op.status.value,
                    "external_ref": op.external_ref,
                }
                for op in snap.operations
            )
            waiting = None
            for a in snap.approvals:
                effective = upgrade_approval(self._registry, run.workflow, a)
                view = {
                    "run_id": a.run_id,
                    "approval_id": a.approval_id,
                    "action": a.action,
                    "params_hash": a.params_hash,
                    "effective_params_hash": effective.params_hash,
                    "params": a.params,
                    "decision": a.decision.value,
                    "approver": a.approver,
                    "role": a.approver_role,
                    "expires_at": a.expires_at,
                    "decided_at": a.decided_at,
                }
                approvals.append(view)
                if run.waiting_on == f"approval:{a.approval_id}":
                    waiting = view
            output = snap.state.payload.get("_output", {}).get("output")
            runs.append(
                RunView(
                    run_id=run.run_id,
                    tenant=run.tenant,
                    state=normalize(run.status.value, run.waiting_on, run.error),
                    raw_status=run.status.value,
                    output=output,
                    error=run.error,
                    waiting_on=run.waiting_on,
                    wake_at=run.wake_at,
                    approval=waiting,
                )
            )
        audit = store.audit()
        fresh, self._audit_seen = audit[self._audit_seen :], len(audit)
        transitions = tuple(
            {
                "run_id": e.run_id,
                "tenant": e.tenant,
                "from": None if e.from_status is None else e.from_status.value,
                "to": None if e.to_status is None else e.to_status.value,
                "state_version": e.state_version,
                "action": e.action,
                "actor": e.actor,
                "detail": e.detail,
                "at": e.at,
            }
            for e in fresh
            if e.state_version is not None
        )
        return Observation(
            runs=tuple(runs),
            transitions=transitions,
            contexts=self._new_contexts(),
            approvals=tuple(approvals),
            operations=tuple(operations),
        )

    def observation_cursor(self) -> Hashable:
        """Moves whenever observe() would report something new: a commit to
        the store, a context written to the log (optional in the contract)."""
        try:
            logged = self._context_log.stat().st_size
        except FileNotFoundError:
            logged = -1
        return (self.d.change_cursor(), logged)

    def runnable(self) -> bool:
        """Whether a worker started now could claim a run (optional in the
        contract): the store's runnable query, which a worker's claim only
        narrows (by lease), at the deployment's clock. With a Redis queue the
        queue hands runs out: no promise, True."""
        if self.adapter.queue != "store":
            return True
        return bool(self.d.runtime.store.runnable(self.d.clock.now(), limit=1))

    def durable_state(self) -> DurableState:
        """Per run: its row's status and step, its working state, its ledger
        (an operation confirmed or reconciled both count as done) and its
        approvals' decisions. Ids, times and attempt counters are volatile.
        Not its unprocessed inbox: a faulted scenario may deliver more
        messages than the fault-free one (a decision again after a kill),
        and what is left unread there is the workload's, not the run's."""
        store = self.d.runtime.store
        done = {"confirmed": "done", "reconciled": "done"}
        runs: dict[str, Any] = {}
        for run in store.list_runs():
            snap = store.load(run.run_id)
            operations = sorted(
                (
                    {
                        "step": op.step,
                        "kind": op.kind,
                        "request_hash": op.request_hash,
                        "status": done.get(op.status.value, op.status.value),
                        # a resend of an at-least-once call is allowed, and
                        # gets a new reference: only the others must match
                        "external_ref": None
                        if op.delivery.value == "at_least_once"
                        else op.external_ref,
                    }
                    for op in snap.operations
                ),
                key=lambda o: (o["step"], o["kind"], o["request_hash"]),
            )
            runs[run.run_id] = {
                "status": run.status.value,
                "current_step": run.current_step,
                "error": run.error,
                "payload": snap.state.payload,
                "operations": operations,
                "approvals": sorted(
                    [a.action, a.params_hash, a.decision.value] for a in snap.approvals
                ),
            }
        return DurableState(runs=runs, volatile=VOLATILE)

    def _new_contexts(self) -> tuple[dict[str, Any], ...]:
        if not self._context_log.exists():
            return ()
        lines = self._context_log.read_text(encoding="utf-8").splitlines()
        fresh, self._context_seen = lines[self._context_seen :], len(lines)
        out = []
        for line in fresh:
            try:
                ctx = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a SIGKILL mid-write
            ctx["memory_ids"] = [m["memory_id"] for m in ctx["context"].get("memory", [])]
            out.append(ctx)
        return tuple(out)

    # -- time, memory, storage ----------------------------------------------------------

    def now(self) -> float:
        return self.d.clock.now()

    def advance_clock(self, seconds: float) -> None:
        self.d.clock.advance(seconds)

    def inject_memory(self, record: dict[str, Any]) -> None:
        now = self.now()
        provenance = Provenance(record.get("provenance", "user_supplied"))
        self.d.runtime.store.put_memory(
            MemoryRecord(
                tenant=record["tenant"],
                created_at=now,
                updated_at=now,
                memory_id=record["memory_id"],
                namespace=record["namespace"],
                key=record["key"],
                value=record["value"],
                version=int(record.get("version", 1)),
                provenance=provenance,
                # The score the record claims, if it claims one (a forger's
                # can be anything); else the one its provenance earns.
                trust=float(record.get("trust", DEFAULT_TRUST[provenance])),
                expires_at=record.get("expires_at"),
            )
        )

    def memory_versions(self, tenant: str, namespace: str, key: str) -> int:
        """The highest version of the key stored, live or not (0: none):
        planted records are numbered past it, as the runtime numbers its own."""
        stored = self.d.runtime.store.read_memory_unfiltered(namespace)
        return max((r.version for r in stored if r.tenant == tenant and r.key == key), default=0)

    def memory_id(self, tenant: str, namespace: str, key: str, version: int) -> str:
        """The id the runtime gives that version of the key (its
        ``write_memory`` step's scheme: a test keeps the two equal)."""
        return f"{tenant}:{namespace}:{key}:v{version}"

    def network_endpoints(self, worker: WorkerHandle) -> list[Endpoint]:
        """The storage connection a paused worker was using at its crash
        point (optional in the contract: the ``network_faults`` capability).
        The worker says so itself: a crash point that fires inside a store
        transaction logs the connection's two ends. Then the connections it
        holds idle (pooled, read from ``/proc``) to the Postgres server and,
        with the Redis queue, to the Redis server: all a partition silences."""
        out = self._logged_endpoints(worker)
        servers = [("postgres", self.adapter.postgres_url, 5432)]
        if self.adapter.queue == "redis":
            servers.append(("redis", self.d.config.redis_url, 6379))
        for service, url, default in servers:
            port = _port(url, default)
            for ep in tcp_connections(worker.pid, {port}, service=service):
                if all(ep.local_port != o.local_port for o in out):
                    out.append(ep)
        return out

    def _logged_endpoints(self, worker: WorkerHandle) -> list[Endpoint]:
        out = []
        for word in self.d.paused_at(worker.pid):
            key, _, rest = word.partition("=")
            parts = rest.split(",")
            if key != "tcp" or len(parts) != 5:
                continue
            service, local_host, local_port, remote_host, remote_port = parts
            out.append(
                Endpoint(
                    service=service,
                    local_host=local_host,
                    local_port=int(local_port),
                    remote_host=remote_host,
                    remote_port=int(remote_port),
                )
            )
        return out

    def storage_kinds(self) -> tuple[str, ...]:
        """``pg_terminate`` on Postgres, ``redis_client_kill`` with the Redis queue."""
        return self.d.storage_kinds()

    def storage_fault(self, kind: str) -> bool:
        # Only this environment's workers: their sessions carry a name unique
        # to the deployment; the harness's observer sessions carry none.
        return self.d.cut_worker_connections(kind) > 0

    def close(self) -> None:
        for w in self._workers:
            if w.proc.exit is None:  # still running or stopped: no leaks
                w.proc.kill()
                w.proc.wait(10.0)
        release_routes(self)  # no worker is left to use them
        self.d.close()


def _port(url: str | None, default: int) -> int:
    """The server port a service URL names (``default`` when it names none)."""
    try:
        return urlsplit(url or "").port or default
    except ValueError:
        return default
