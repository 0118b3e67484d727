"""The runtime's public API: submitting runs, delivering messages, and
worker loops, over one :class:`~reference_runtime._config.RuntimeConfig`.
Everything that holds a connection is opened lazily in the process that uses
it, never inherited across ``fork``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any, Protocol

from . import crashpoints as cp
from ._artifacts import ArtifactStore
from ._clock import Clock
from ._config import RuntimeConfig, open_clock
from ._errors import MalformedEventError, StorageUnavailable
from ._executor import Executor, ExecutorSettings, LeaseKeeper
from ._inputs import check_json, check_name
from ._model import ModelContext, fingerprint_of
from ._records import AuditEvent, InboxMessage, Run, WorkingState
from ._services import ExternalServices, load_services
from ._states import RunStatus
from ._workflows import Registry
from .store import Claim, RetentionPolicy, Store


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
                network_timeout=self.config.network_timeout,
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

    def detach_store(self) -> Store | None:
        """The store this runtime opened in this process, no longer its
        own: the caller closes it, or hands it to :meth:`adopt_store` of a
        runtime of the same configuration. None if it has none open here.
        The runtime opens another on its next use."""
        store, self._store = self._store, None
        return store if store is not None and self._pid == os.getpid() else None

    def adopt_store(self, store: Store) -> None:
        """Use ``store`` -- open in this process, set up, for this
        configuration's URL and schema -- instead of opening one (saves a
        connection and its setup check); this runtime closes it. Replaces
        none: call it before the first use of :attr:`store`."""
        if self._store is not None:
            raise RuntimeError("this runtime already has a store")
        store.bugs = self.config.bugs
        self._store, self._pid = store, os.getpid()

    def close(self, *, durable: bool = True) -> None:
        """Close the store's connections. ``durable=False``: the store is a
        scratch one, thrown away next; closing skips waiting for the disk
        (what was written survives a killed process, not an OS crash)."""
        if self._store is not None and self._pid == os.getpid():
            if not durable:
                self._store.skip_sync()
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
        #: the context log's descriptor in this process (opened on first use)
        self._log_fd: int | None = None
        self._log_pid = 0
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
            # The context is serialized once: the JSON its fingerprint digests
            # is also the line's "context" object, spliced in as text (a
            # reader parses the line; the object's key order is the model's).
            text = ctx.model_dump_json()
            head = json.dumps(
                {
                    "run_id": ctx.run_id,
                    "step": ctx.step,
                    "worker_id": self.worker_id,
                    "fingerprint": fingerprint_of(text),
                },
                sort_keys=True,
            )
            self._append_context(f'{head[:-1]}, "context": {text}}}\n')

    def _append_context(self, line: str) -> None:
        """Append ``line`` to the context log in one ``write(2)`` on an
        ``O_APPEND`` descriptor, opened once per worker process: what a text
        file opened for each line wrote, without building one per context."""
        if self._log_fd is None or self._log_pid != os.getpid():
            assert self.context_log is not None
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            self._log_fd, self._log_pid = os.open(self.context_log, flags, 0o666), os.getpid()
        data = memoryview(line.encode("utf-8"))
        while data:
            data = data[os.write(self._log_fd, data) :]

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
        if self._log_fd is not None and self._log_pid == os.getpid():
            os.close(self._log_fd)
        self._log_fd = None
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
