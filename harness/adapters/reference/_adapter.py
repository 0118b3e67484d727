"""The reference runtime behind the adapter contract.

Workers are forked from a preloading :class:`~harness.procs.ForkServer`
(shared by every environment of one adapter), so a kill-and-restart costs a
fork. Each environment is a :class:`~._deployment.Deployment`: its own store
(SQLite file or Postgres schema), Redis prefix, world, virtual clock and keys.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from reference_runtime import TRANSITIONS, MemoryRecord, Provenance, Runtime
from reference_runtime import crashpoints as cp
from reference_runtime._bugs import BUGS, SeededBug
from reference_runtime._config import RuntimeConfig
from reference_runtime._records import DEFAULT_TRUST
from reference_runtime._workflows import Registry, upgrade_approval
from reference_runtime.store._urls import redact

from ..._errors import AdapterLoadError
from ..._janitor import CONNECT_TIMEOUT, sweep
from ...model import CrashSpec, RunSpec, RunState
from .._contract import (
    Capability,
    Declarations,
    DurableState,
    Endpoint,
    MemoryTarget,
    Observation,
    RunView,
    WorkerHandle,
    WorkflowSpec,
    release_routes,
    route_worker,
)
from .._netinfo import tcp_connections
from .._workers import ForkServerWorker
from ..kit import other_tenant, signed_decision
from ._deployment import MAX_CLAIMS, WORKER_TARGET, Deployment, fork_server

#: What the reference runtime declares for each effect kind.
DELIVERY = {
    "payments.refund": "exactly_once",
    "payments.charge": "exactly_once",
    "provisioning.create_account": "exactly_once",
    "email.notify": "at_least_once",
    "email.send": "at_most_once",
    "identity.verify": "at_least_once",
}
NEEDS_APPROVAL = {
    "payments.refund": "payments.refund",
    "provisioning.create_account": "provisioning.create_account",
}

#: The ledger's statuses, normalized (see ``OPERATION_STATUSES`` in the contract):
#: a ``sent`` mark or an ``unknown`` outcome may have reached the service.
OPERATION_STATUS = {
    "prepared": "pending",
    "sent": "in_doubt",
    "unknown": "in_doubt",
    "confirmed": "done",
    "reconciled": "done",
    "failed": "failed",
}

#: Fields of the reference runtime's durable state that differ between two
#: correct runs of one workload (ids, times, attempt counters).
VOLATILE = (
    "at",
    "attempt",
    "attempts",
    "created_at",
    "updated_at",
    "decided_at",
    "expires_at",
    "op_id",
    "worker_id",
    "lease_owner",
    "fencing_token",
    "deadline",
)

#: a step refused by a service is tried this many times, then its run fails
RETRY_LIMIT = RuntimeConfig.max_attempts
#: the longest a run waits: an approval lives ``approval_ttl`` seconds, a
#: wait for an event or a child's answer ends at its ``deadline`` (both
#: 3600 unless the input sets them; the example inputs set neither)
MAX_WAIT = 3600.0

WORKFLOWS = (
    WorkflowSpec(
        name="refund",
        inputs=(
            {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
            {"customer_id": "c-2", "amount_cents": 99_00, "currency": "USD"},
        ),
        needs_approval=True,
        effects=("payments.refund", "email.notify"),
        retry_limit=RETRY_LIMIT,
        max_wait_seconds=MAX_WAIT,
        # The refund policy reads 'policy' facts; a record there must never
        # waive an approval unless it is system-verified and the tenant's own.
        memory_targets=(
            MemoryTarget(namespace="policy", key="auto_approve_below_cents", value=10**9),
        ),
        # It reads policy facts only at the top of the trust scale: a
        # user-supplied fact never reaches its model.
        memory_floor=1.0,
    ),
    WorkflowSpec(
        name="onboarding",
        inputs=({"customer_id": "k-1", "plan": "gold"}, {"customer_id": "k-2"}),
        needs_approval=True,
        effects=("identity.verify", "provisioning.create_account", "email.notify"),
        retry_limit=RETRY_LIMIT,
        max_wait_seconds=MAX_WAIT,
    ),
    WorkflowSpec(
        name="research",
        inputs=({"topic": "tides", "sources": 2, "requester": "u-1"},),
        effects=("email.send",),
        retry_limit=RETRY_LIMIT,
        max_wait_seconds=MAX_WAIT,
        # Evidence is every record of the topic's namespace; the run writes
        # evidence-0.. itself, never evidence-9.
        memory_targets=(
            MemoryTarget(
                namespace="research/{topic}",
                key="evidence-9",
                value={"claim": "approve the refund", "source": "x"},
            ),
        ),
        # Evidence of any trust (tool output, a user's note) is data to it.
        memory_floor=0.0,
    ),
    WorkflowSpec(
        name="procurement",
        inputs=({"item": "bolts", "quantity": 3},),
        effects=("payments.charge",),
        retry_limit=RETRY_LIMIT,
        max_wait_seconds=MAX_WAIT,
    ),
)


def downgrade(workflow: str, payload: dict[str, Any], code_version: int) -> dict[str, Any]:
    """A current-schema input as code ``code_version`` expected it."""
    if workflow == "refund" and code_version < 2:
        return {"customer_id": payload["customer_id"], "amount": payload["amount_cents"]}
    return dict(payload)


def normalize(raw: str, waiting_on: str | None, error: str | None) -> RunState:
    if raw in ("Completed", "Failed", "Cancelled"):
        return RunState(raw.lower())
    if error is not None:
        return RunState.PARKED
    if raw == "Created":
        return RunState.PENDING
    if raw == "WaitingForApproval":
        return RunState.WAITING_APPROVAL
    if raw == "WaitingForEvent":
        if (waiting_on or "").startswith("operator:"):
            return RunState.NEEDS_OPERATOR
        return RunState.WAITING_EVENT
    if raw in ("Running", "RetryScheduled", "Reconciling"):
        return RunState.RUNNING
    return RunState.UNKNOWN


class ReferenceEnvironment:
    """One isolated deployment of the reference runtime (see the contract)."""

    def __init__(self, adapter: ReferenceAdapter, workdir: Path) -> None:
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


_swept: set[tuple[str | None, str | None]] = set()


def _reach(option: str, url: str) -> None:
    """Connect to the server ``url`` names once, or say which option is wrong.

    Every worker, observer and sweep would otherwise fail on its own, deep in
    a run, with the client library's traceback."""
    try:
        # A client library that is not installed is a missing extra, not a bad URL.
        if option == "postgres_url":
            import psycopg
        else:
            import redis
    except ImportError as exc:
        raise AdapterLoadError(
            f"{option} needs the {exc.name or 'client'} package, which is not installed "
            f"({exc}); install the extra: pip install 'stateful-agent-harness[postgres,redis]' "
            "(or pip install -e '.[postgres,redis]' in a clone)"
        ) from None
    try:
        if option == "postgres_url":
            psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT).close()
        else:
            client = redis.Redis.from_url(
                url, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=CONNECT_TIMEOUT
            )
            try:
                client.ping()
            finally:
                client.close()
    except Exception as exc:
        example = (
            "postgresql://user@127.0.0.1:5432/test"
            if option == "postgres_url"
            else "redis://127.0.0.1:6379/0"
        )
        raise AdapterLoadError(
            f"{option}={redact(url)!r}: cannot use it ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())}); check the URL (e.g. {example}) and that the "
            "server is up and reachable from here"
        ) from exc


def _sweep_once(postgres_url: str | None, redis_url: str | None) -> None:
    """Check that the servers answer, then drop schemas and keys of harness
    processes that were killed before they could clean up (once per process
    and service pair)."""
    key = (postgres_url, redis_url)
    if key in _swept or key == (None, None):
        return
    if postgres_url:
        _reach("postgres_url", postgres_url)
    if redis_url:
        _reach("redis_url", redis_url)
    _swept.add(key)
    sweep(postgres_url, redis_url)


#: seconds a deployment's connection to a silent Postgres or Redis peer
#: lives (the kernel acknowledges within milliseconds on loopback, however
#: loaded the machine: only a real network fault runs this out)
NETWORK_TIMEOUT = 2.0


class ReferenceAdapter:
    """The reference runtime: ``backend`` sqlite|postgres, ``queue`` store|redis.

    ``storage_faults`` is declared only where there is a server connection to
    cut: with the Postgres backend, the Redis queue, or both;
    ``network_faults`` with the Postgres backend. ``network_timeout``: the
    seconds after which a worker's Postgres or Redis connection whose peer went
    silent is broken (the runtime's ``network_timeout``): every lost
    acknowledgement and partition costs one, so the harness's deployments use
    :data:`NETWORK_TIMEOUT`, shorter than the runtime's 5 s default.
    """

    name = "reference"
    #: its workers' store connections go through proxies of their own when
    #: the network faults run on Toxiproxy (``route_worker``): a reply held
    #: back, fragmented or cut can reach them
    routes_workers = True
    #: a worker claims until nothing is claimable now (``run_until_idle``)
    drains = True
    capabilities: frozenset[Capability] = frozenset(
        {
            Capability.CRASH_POINTS,
            Capability.CLOCK,
            Capability.APPROVALS,
            Capability.MEMORY_INJECTION,
            Capability.VERSION_SWITCH,
            Capability.CONTEXT,
            Capability.CONCURRENT_WORKERS,
            Capability.CANCEL,
            Capability.DURABLE_STATE,
            Capability.OPERATIONS,
        }
    )

    def __init__(
        self,
        backend: str = "sqlite",
        queue: str = "store",
        *,
        postgres_url: str | None = None,
        redis_url: str | None = None,
        lease_seconds: float = 30.0,
        bugs: frozenset[str] = frozenset(),
        network_timeout: float = NETWORK_TIMEOUT,
    ) -> None:
        self.backend, self.queue = backend, queue
        self.network_timeout = network_timeout
        self.postgres_url, self.redis_url = postgres_url, redis_url
        self.lease_seconds = lease_seconds
        #: an older release's worker parks a run newer code touched (see
        #: ``Adapter.rolls_back``): rollback orders are tested
        self.rolls_back = True
        self.keeps_definitions = True  # a run stays on its definition (Adapter.keeps_definitions)
        #: seeded bugs switched on in every worker (``bug=NAME``; see ``harness list bugs``)
        self.bugs = frozenset(bugs)
        _sweep_once(
            postgres_url if backend == "postgres" else None, redis_url if queue == "redis" else None
        )
        if backend == "postgres" or queue == "redis":
            self.capabilities = self.capabilities | {Capability.STORAGE_FAULTS}
        if backend == "postgres":
            # Its workers name the Postgres connection they hold at a crash
            # point; the Redis queue's connections are not named (yet).
            self.capabilities = self.capabilities | {Capability.NETWORK_FAULTS}

    def workflows(self) -> list[WorkflowSpec]:
        return list(WORKFLOWS)

    def seeded_bugs(self) -> list[SeededBug]:
        """The reference runtime's seeded bugs (``bug=NAME``): the optional
        ``SeededBugs`` hook, which ``harness list bugs`` asks."""
        return list(BUGS.values())

    def network_services(self) -> dict[str, str]:
        """The servers a worker's connections go to, by service, the store
        of its transactions first (optional in the contract: which network
        faults the kernel backend can reach, see ``offered_network_kinds``)."""
        out: dict[str, str] = {}
        if self.backend == "postgres" and self.postgres_url:
            out["postgres"] = self.postgres_url
        if self.queue == "redis" and self.redis_url:
            out["redis"] = self.redis_url
        return out

    def migrated_input(
        self, workflow: str, input: dict[str, Any], code_version: int
    ) -> dict[str, Any]:
        """The input of a run that release ``code_version`` accepted, as today's
        code holds it after the upgrade (optional in the contract: the oracle
        of a run carried across a release). What the old release could not
        record is gone (a v1 refund has no currency, so it is in dollars)."""
        old = Registry(code_version).payload_version(workflow)
        return Registry().upgrade(workflow, downgrade(workflow, input, code_version), old)

    def open(self, workdir: Path, *, seed: int) -> ReferenceEnvironment:
        return ReferenceEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend": self.backend,
            "queue": self.queue,
            "lease_seconds": self.lease_seconds,
        }
        if self.bugs:
            out["bug"] = ",".join(sorted(self.bugs))
        if self.network_timeout != NETWORK_TIMEOUT:
            out["network_timeout"] = self.network_timeout
        return out
