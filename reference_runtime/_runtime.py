"""The runtime's public API: configuration, submitting runs, delivering
messages, and worker loops.

One :class:`RuntimeConfig` (frozen) describes a deployment; it round-trips
through environment variables (``RR_*``) so a supervisor can hand it to worker
processes. Everything that holds a connection is opened lazily in the process
that uses it, never inherited across ``fork``.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from . import crashpoints as cp
from ._artifacts import ArtifactStore
from ._bugs import parse_bugs
from ._clock import Clock, FileClock, SystemClock
from ._errors import ConfigError, MalformedEventError, StorageUnavailable
from ._executor import Executor, ExecutorSettings, LeaseKeeper
from ._inputs import check_json, check_name
from ._model import ModelContext
from ._records import AuditEvent, InboxMessage, Run, WorkingState
from ._services import ExternalServices, load_services
from ._states import RunStatus
from ._workflows import CURRENT_CODE_VERSION, Registry
from .store import Claim, RetentionPolicy, Store


def _parse_keys(spec: str) -> dict[str, bytes]:
    keys: dict[str, bytes] = {}
    for term in filter(None, (t.strip() for t in spec.split(","))):
        tenant, sep, hexkey = term.partition("=")
        try:
            if not sep:
                raise ValueError("missing '='")
            if not tenant:
                raise ValueError("the tenant name is empty")
            key = bytes.fromhex(hexkey)
            # An empty key would make every HMAC computable by anyone: a
            # forger could sign approvals for this tenant.
            if not key:
                raise ValueError("the key is empty")
            keys[tenant] = key
        except ValueError as exc:
            raise ConfigError(
                f"bad tenant key {term!r} ({exc}); expected TENANT=HEXKEY, e.g. acme=00ff10"
            ) from exc
    return keys


_CONNECTION_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,63}")


@dataclass(frozen=True)
class RuntimeConfig:
    """Everything a worker needs to know. ``from_env``/``to_env`` round-trip it."""

    store_url: str
    schema: str | None = None
    services: str | None = None
    services_arg: str | None = None
    clock: str = "system"  # or "file:/path/to/clock"
    artifact_dir: str | None = None
    queue: str = "store"  # or "redis"
    redis_url: str | None = None
    code_version: int = CURRENT_CODE_VERSION
    lease_seconds: float = 30.0
    max_attempts: int = 5
    retry_backoff: float = 1.0
    tenant_keys: Mapping[str, bytes] = field(default_factory=dict)
    #: names this process's storage sessions: the Postgres ``application_name``
    #: and the Redis client name, so an operator can find (and end) them
    connection_name: str | None = None
    #: seeded bugs to switch on (names from :data:`reference_runtime._bugs.BUGS`);
    #: empty in any real deployment
    bugs: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        # Validated (and normalized from any iterable) here, once: deeper code
        # only asks ``name in bugs``, so a misspelt name must never get there.
        object.__setattr__(self, "bugs", parse_bugs(self.bugs))
        if self.queue not in ("store", "redis"):
            raise ConfigError(f"queue must be 'store' or 'redis', got {self.queue!r}")
        if self.queue == "redis" and not self.redis_url:
            raise ConfigError("queue='redis' needs redis_url (or RR_REDIS_URL)")
        if not (self.clock == "system" or self.clock.startswith("file:")) or self.clock == "file:":
            raise ConfigError(f"clock must be 'system' or 'file:PATH', got {self.clock!r}")
        if self.lease_seconds <= 0:
            raise ConfigError(f"lease_seconds must be positive, got {self.lease_seconds}")
        if self.connection_name is not None and not _CONNECTION_NAME.fullmatch(
            self.connection_name
        ):
            # Redis refuses spaces in a client name; Postgres truncates at 63.
            raise ConfigError(
                f"connection_name {self.connection_name!r} is not usable as a Postgres "
                "application_name and a Redis client name: use 1-63 letters, digits or "
                "'_.:-', e.g. 'rr-worker-prod'"
            )

    _ENV = {
        "store_url": "RR_STORE",
        "schema": "RR_SCHEMA",
        "services": "RR_SERVICES",
        "services_arg": "RR_SERVICES_ARG",
        "clock": "RR_CLOCK",
        "artifact_dir": "RR_ARTIFACTS",
        "queue": "RR_QUEUE",
        "redis_url": "RR_REDIS_URL",
        "code_version": "RR_CODE_VERSION",
        "lease_seconds": "RR_LEASE_SECONDS",
        "max_attempts": "RR_MAX_ATTEMPTS",
        "retry_backoff": "RR_RETRY_BACKOFF",
        "connection_name": "RR_CONNECTION_NAME",
    }

    def to_env(self) -> dict[str, str]:
        env = {
            var: str(getattr(self, name))
            for name, var in self._ENV.items()
            if getattr(self, name) is not None
        }
        env["RR_TENANT_KEYS"] = ",".join(f"{t}={k.hex()}" for t, k in self.tenant_keys.items())
        env["RR_BUGS"] = ",".join(sorted(self.bugs))
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RuntimeConfig:
        env = os.environ if env is None else env
        if not env.get("RR_STORE", "").strip():
            # Empty counts as unset: `RR_STORE= cmd` and `--store ''` used to
            # get past this check and fail later with a TypeError.
            state = "is empty" if "RR_STORE" in env else "is not set"
            raise ConfigError(
                f"RR_STORE {state}: name the store with --store or RR_STORE, "
                "e.g. RR_STORE=sqlite:///tmp/agent.db"
            )
        kwargs: dict[str, Any] = {}
        types = {
            "code_version": int,
            "lease_seconds": float,
            "max_attempts": int,
            "retry_backoff": float,
        }
        for name, var in cls._ENV.items():
            if var in env and env[var] != "":
                try:
                    kwargs[name] = types.get(name, str)(env[var])
                except ValueError as exc:
                    raise ConfigError(f"{var}={env[var]!r} is not a valid {name}") from exc
        kwargs["tenant_keys"] = _parse_keys(env.get("RR_TENANT_KEYS", ""))
        kwargs["bugs"] = parse_bugs(env.get("RR_BUGS", ""))
        return cls(**kwargs)

    def with_(self, **changes: Any) -> RuntimeConfig:
        return replace(self, **changes)


def open_clock(spec: str) -> Clock:
    if spec == "system":
        return SystemClock()
    return FileClock(spec.removeprefix("file:"))


class Runtime:
    """A handle on one deployment: submit runs, deliver messages, run workers."""

    def __init__(
        self,
        config: RuntimeConfig,
        *,
        clock: Clock | None = None,
        create_store: bool = True,
        read_only: bool = False,
    ) -> None:
        """``create_store=False``: refuse (NoStoreError) a store that does not
        exist yet instead of creating it; ``read_only``: open the store so
        that it refuses every write (and so never creates or migrates it)."""
        self.config = config
        self.create_store = create_store and not read_only
        self.read_only = read_only
        self.clock = clock or open_clock(config.clock)
        self.registry = Registry(config.code_version, bugs=config.bugs)
        self._store: Store | None = None
        self._pid = os.getpid()

    @property
    def store(self) -> Store:
        if self._store is None or self._pid != os.getpid():
            from .store import open_store

            self._store = open_store(
                self.config.store_url,
                schema=self.config.schema,
                connection_name=self.config.connection_name,
                read_only=self.read_only,
            )
            try:
                self._store.setup(create=self.create_store)
            except BaseException:
                self._store.close()
                self._store = None
                raise
            self._store.bugs = self.config.bugs
            self._pid = os.getpid()
        return self._store

    def close(self) -> None:
        if self._store is not None and self._pid == os.getpid():
            self._store.close()
        self._store = None

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ingress ------------------------------------------------------------

    def submit(
        self,
        workflow: str,
        input: Mapping[str, Any],
        *,
        tenant: str,
        run_id: str,
        parent_run_id: str | None = None,
    ) -> Run:
        """Create a run. Validates input first; raises MalformedEventError or
        UnknownWorkflowError without writing anything."""
        if not tenant or not run_id:
            raise MalformedEventError("a run needs a non-empty tenant and run_id")
        check_name(tenant, "tenant")
        check_name(run_id, "run_id")
        if not isinstance(input, Mapping):
            # Checked here, at the boundary: dict() of a list would raise a bare
            # TypeError (or silently accept a list of pairs) deeper down.
            raise MalformedEventError(
                f"the input of a {workflow!r} run must be a JSON object (a mapping of field "
                f"names to values), got {type(input).__name__}: {input!r:.80}"
            )
        definition = self.registry.definition(workflow)
        check_json(input, "the input")
        payload = self.registry.validate_input(workflow, dict(input))
        now = self.clock.now()
        run = Run(
            tenant=tenant,
            created_at=now,
            updated_at=now,
            run_id=run_id,
            workflow=workflow,
            definition_version=definition.version,
            status=RunStatus.CREATED,
            current_step=definition.steps[0],
            parent_run_id=parent_run_id,
        )
        state = WorkingState(
            tenant=tenant,
            created_at=now,
            updated_at=now,
            run_id=run_id,
            workflow=workflow,
            payload_version=self.registry.payload_version(workflow),
            payload=payload,
        )
        audit = AuditEvent(
            tenant=tenant,
            created_at=now,
            updated_at=now,
            run_id=run_id,
            at=now,
            actor="api",
            action="created",
            to_status=RunStatus.CREATED,
            state_version=0,
            detail={"workflow": workflow, "definition_version": definition.version},
        )
        self.store.create_run(run, state, audit)
        return run

    def deliver(self, message: Mapping[str, Any]) -> bool:
        """Accept an inbound message (webhook, event, approval decision).

        Returns False for a duplicate ``message_id`` (nothing changes). Raises
        MalformedEventError, without writing, for a message that lacks fields or
        names an unknown run or another tenant's run.
        """
        now = self.clock.now()
        if not isinstance(message, Mapping):
            raise MalformedEventError(
                f"an inbound message must be a JSON object, got {type(message).__name__}"
            )
        check_json(message, "the message")
        # Name every missing field at once, rather than a bare KeyError for the
        # first one: the sender fixes its message in one go.
        missing = [f for f in ("message_id", "tenant", "run_id", "kind") if not message.get(f)]
        payload = message.get("payload")
        if missing or not isinstance(payload, Mapping | None):
            what = (
                f"lacks {', '.join(missing)}" if missing else "has a payload that is not an object"
            )
            raise MalformedEventError(
                f"inbound message {message.get('message_id')!r} rejected: it {what}; a message "
                "needs message_id, tenant, run_id, kind (approval_decision|event|webhook) and "
                "a payload object"
            )
        try:
            msg = InboxMessage(
                tenant=str(message["tenant"]),
                created_at=now,
                updated_at=now,
                message_id=str(message["message_id"]),
                run_id=str(message["run_id"]),
                kind=message["kind"],
                payload=dict(message.get("payload") or {}),
                signature=message.get("signature"),
                received_at=now,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedEventError(
                f"inbound message rejected: {exc}; a message needs message_id, tenant, "
                "run_id, kind (approval_decision|event|webhook) and a payload object"
            ) from exc
        run = self.store.get_run(msg.run_id)
        if run is None or run.tenant != msg.tenant:
            raise MalformedEventError(
                f"inbound message {msg.message_id!r} names run {msg.run_id!r} of tenant "
                f"{msg.tenant!r}, which does not exist; check the message's run_id and "
                "tenant against the run (python -m reference_runtime status RUN_ID)"
            )
        return self.store.deliver(msg)

    def unpark(self, run_id: str, actor: str = "operator") -> bool:
        """Let workers pick a parked run up again (after deploying code that can
        read its payload). False if the run was not parked."""
        return self.store.unpark(run_id, self.clock.now(), actor)

    def cancel(self, run_id: str, reason: str = "cancelled", actor: str = "operator") -> bool:
        """Cancel a run now, whether or not a worker holds it (an operator's
        out-of-band write, checked against the run's version like any other).
        False if it had already ended."""
        check_name(run_id, "run_id")
        check_name(reason, "the reason", max_len=2000)
        check_name(actor, "the actor")
        return self.store.cancel(run_id, self.clock.now(), actor, reason)

    def get(self, run_id: str) -> Run | None:
        """The run ``run_id``, or None. Raises MalformedEventError for an id no
        run can have (empty, not UTF-8, a NUL or other control character)."""
        return self.store.get_run(check_name(run_id, "run_id"))

    # -- data protection and retention ---------------------------------------

    def forget(self, tenant: str, subject: str) -> int:
        """Erase what the runtime holds about one user of ``tenant``.

        Marks deleted every memory record about ``subject`` and, transitively,
        every record derived from one (a summary carries its sources' data),
        then removes the bytes of the artifacts recorded with that subject
        (unless equal bytes are also recorded for someone else).
        Returns how many memory records and artifacts were erased; 0 when
        there was nothing (left) to erase, so calling it twice is harmless.
        """
        if not tenant or not subject:
            raise MalformedEventError("forget needs a non-empty tenant and subject")
        erased = self.store.delete_subject(tenant, subject, self.clock.now())
        if self.config.artifact_dir:
            artifacts = ArtifactStore(self.config.artifact_dir)
            refs = self.store.artifacts()
            mine = {r.uri for r in refs if r.tenant == tenant and r.subject == subject}
            # Content-addressed: equal bytes produced for someone else share
            # the uri. Those bytes are not only this user's; they stay.
            shared = {r.uri for r in refs if (r.tenant, r.subject) != (tenant, subject)}
            erased += sum(artifacts.delete(uri) for uri in sorted(mine - shared))
        return erased

    def prune(self, policy: RetentionPolicy | None = None) -> int:
        """Apply the retention policy at the clock's now: finished runs older
        than it lose their working state and inbox (run row and audit stay).
        Runs still in progress are never touched. Returns how many runs were
        compacted by this call."""
        return self.store.prune(self.clock.now(), policy or RetentionPolicy())

    # -- workers ------------------------------------------------------------

    def worker(
        self,
        worker_id: str,
        *,
        services: ExternalServices | None = None,
        context_log: str | None = None,
    ) -> Worker:
        return Worker(self, worker_id, services=services, context_log=context_log)


class Worker:
    """Claims runnable runs under a lease and advances them."""

    def __init__(
        self,
        runtime: Runtime,
        worker_id: str,
        *,
        services: ExternalServices | None = None,
        context_log: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.worker_id = worker_id
        self.context_log = context_log
        cfg = runtime.config
        if services is None and cfg.services:
            services = load_services(cfg.services, cfg.services_arg)
        self.services = services
        self.contexts: list[ModelContext] = []
        self._coordinator = _coordinator(runtime)
        self.executor = Executor(
            store=runtime.store,
            services=services,
            registry=runtime.registry,
            clock=runtime.clock,
            worker_id=worker_id,
            artifacts=ArtifactStore(cfg.artifact_dir) if cfg.artifact_dir else None,
            settings=ExecutorSettings(
                lease_seconds=cfg.lease_seconds,
                max_attempts=cfg.max_attempts,
                retry_backoff=cfg.retry_backoff,
                tenant_keys=cfg.tenant_keys,
                bugs=cfg.bugs,
            ),
            on_context=self._on_context,
            leases=self._coordinator,
        )

    def _on_context(self, ctx: ModelContext) -> None:
        """Keep every context the model was given; with a context log, append it
        as a JSON line, so an observer can compare resumed and fault-free runs."""
        self.contexts.append(ctx)
        if self.context_log:
            line = json.dumps(
                {
                    "run_id": ctx.run_id,
                    "step": ctx.step,
                    "worker_id": self.worker_id,
                    "fingerprint": ctx.fingerprint(),
                    "context": ctx.model_dump(mode="json"),
                },
                sort_keys=True,
            )
            with open(self.context_log, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")

    def claim(self, run_id: str | None = None) -> Claim | None:
        cp.hit("before_lease_acquire")
        claim = self._coordinator.claim(self.worker_id, run_id)
        if claim is not None:
            cp.hit("after_lease_acquire")
        return claim

    def run_once(self, run_id: str | None = None) -> Run | None:
        """Claim and advance one run; None when nothing was runnable.

        A storage connection lost while claiming is retried once on a fresh
        connection (a claim is one transaction: it happened whole or not at
        all); lost again, :class:`StorageUnavailable` propagates: the storage
        is down, not just one session. Lost while advancing, the executor
        drops the run and this returns the claimed row, so a worker loop
        claims again.
        """
        try:
            claim = self.claim(run_id)
        except StorageUnavailable:
            claim = self.claim(run_id)
        if claim is None:
            return None
        return self.executor.advance(claim) or claim.run

    def run_until_idle(self, max_claims: int = 10_000) -> int:
        """Advance runs until none is runnable now; returns how many claims it made."""
        n = 0
        while n < max_claims and self.run_once() is not None:
            n += 1
        return n

    def run_forever(self, poll_seconds: float = 0.2, stop_after_idle: float | None = None) -> None:
        idle_since: float | None = None
        while True:
            if self.run_once() is not None:
                idle_since = None
                continue
            idle_since = idle_since or time.monotonic()
            if stop_after_idle is not None and time.monotonic() - idle_since > stop_after_idle:
                return
            time.sleep(poll_seconds)

    def close(self) -> None:
        if self.services is not None:
            self.services.close()


class _StoreCoordinator:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def claim(self, worker_id: str, run_id: str | None) -> Claim | None:
        rt = self.runtime
        return rt.store.claim(worker_id, rt.clock.now(), rt.config.lease_seconds, run_id)

    def renew(self, claim: Claim, now: float, ttl: float) -> Claim:
        return self.runtime.store.renew_lease(claim, now, ttl)

    def release(self, claim: Claim) -> None:
        self.runtime.store.release(claim)


class Coordinator(LeaseKeeper, Protocol):
    """Grants leases on runnable runs (the store itself, or Redis)."""

    def claim(self, worker_id: str, run_id: str | None) -> Claim | None: ...


def _coordinator(runtime: Runtime) -> Coordinator:
    if runtime.config.queue == "redis":
        from .store.redis_queue import RedisCoordinator

        return RedisCoordinator(runtime)
    return _StoreCoordinator(runtime)
