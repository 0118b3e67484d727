"""The worker side of the world: :class:`WorldClient`, what a runtime calls.

A call is one write transaction that counts the call, fires a matching fault
rule, processes the request and records it -- all or nothing. Only after that
transaction commits does the caller learn anything (a response, an error, or
SIGKILL), so the world's records always say what really happened, even when
the caller never finds out.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._calls import _answer, _answer_lookup, _one_caller, _Request, _Tenant, _without_ref
from ._declare import ServiceSpec
from ._errors import WorldUsageError
from ._faults import ArmedRule, count_and_match, stop_caller
from ._model import (
    LOOKUP,
    MODEL,
    Caller,
    CallerLike,
    Capabilities,
    Outcome,
    Response,
    canonical_json,
)
from ._services import (
    Processed,
    declare_services,
    find_first,
    process,
    service_spec,
    services_of_world,
)
from ._store import OnWorldFile

Clock = Callable[[], float]

#: The fault modes that kill the caller.
KILL_MODES = ("kill_before_apply", "kill_after_apply")
#: The fault modes that stop (SIGSTOP) the caller once the request is applied.
STOP_MODES = ("stop_after_apply",)

#: What the record says for a fault that fires before the service processes the request.
_BEFORE_APPLY: dict[str | None, Outcome] = {
    "reject": "rejected",
    "unavailable": "rejected",
    "timeout_before_apply": "unknown_not_applied",
    "kill_before_apply": "killed_before_apply",
}


class WorldClient(OnWorldFile):
    """Calls the simulated services of one world (one SQLite file).

    Safe to share across ``fork``: each process opens its own connection on
    first use. Several processes may call at once; their calls are serialised
    by the world's write lock. It has the shape of the reference runtime's
    ``ExternalServices`` (``capabilities``, ``call``, ``lookup``, ``close``), but
    raises the world's own errors (:class:`Rejected`, :class:`Unknown`,
    :class:`NotSupported`); an adapter translates them for a runtime.

    A ``kill_*`` fault rule SIGKILLs the *calling* process: never arm one for a
    call made in the test runner's own process.
    """

    def __init__(self, path: str | os.PathLike[str], clock: Clock | None = None) -> None:
        super().__init__(path)
        self._clock: Clock = clock if clock is not None else time.time
        self._services_read = 0  # the pid that read the world's declared services

    def spec(self, service: str, action: str | None = None) -> ServiceSpec:
        """The declaration of ``service`` (and ``action``): built in, or
        declared by the process that created the world (read from its file)."""
        if self._services_read != os.getpid():
            declare_services(services_of_world(self._store.conn()))
            self._services_read = os.getpid()
        return service_spec(service, action)

    def capabilities(self, service: str) -> Capabilities:
        """What ``service`` offers for deduplication and reconciliation."""
        return self.spec(service).capabilities

    def attribute(self, caller: CallerLike, *, pid: int | None = None) -> None:
        """Record that process ``pid`` (default: this one) calls for ``caller``.

        What the world's HTTP face records for a request it gets from that
        process (or from a process it started), whose app says nothing of
        runs: a worker calls it before it runs the app's code, again for each
        run it takes. A later call for the same process replaces it.
        """
        who = _one_caller(caller, None)
        with self._store.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO callers (pid, tenant, run_id, op_id, worker_id, "
                "fencing_token) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    os.getpid() if pid is None else pid,
                    who.tenant,
                    who.run_id,
                    who.op_id,
                    who.worker_id,
                    who.fencing_token,
                ),
            )

    def record_model_call(
        self,
        who: CallerLike,
        *,
        pid: int,
        model: str,
        step: int,
        request: Mapping[str, Any],
        reply: Mapping[str, Any],
        conversation: Sequence[Mapping[str, Any]] | None = None,
    ) -> ServedModelCall:
        """Count and record a call of the world's model whose source answered
        ``reply``; the model fault armed for it (if any) fires here, in the
        same transaction: what is served and recorded is the reply as the
        fault left it. A conversation the model answered before gets new
        tool-call ids, as a real model's (``_chat.reissued``). Never an
        effect. ``conversation``: what the prompt is (default: the
        request's ``messages``)."""
        from ._chat import Prompt, answered_before, faulted_reply, record_call, reissued, reply_kind

        said = Prompt.of(request, conversation)  # its JSON and hash, made once a call
        with self._store.transaction() as conn:
            answered = answered_before(conn, said)
            reply = reissued(reply, answered)
            matched = count_and_match(conn, MODEL, reply_kind(reply))
            mode = None if matched is None else matched[0].rule.mode
            served = dict(reply) if mode is None else faulted_reply(mode, reply)
            _, prompt, completion = record_call(
                conn,
                who=who,
                pid=pid,
                model=model,
                step=step,
                request=request,
                reply=served,
                at=float(self._clock()),
                said=said,
                fault=mode,
                rule_id=None if matched is None else matched[0].rule_id,
            )
            if matched is not None:
                self._record_fired(conn, matched, who, request_seq=None, pid=pid)
            return ServedModelCall(served, prompt, completion, mode, answered, said.digest)

    def callers(self) -> list[int]:
        """The processes attributed (:meth:`attribute`), the latest first."""
        rows = self._store.conn().execute("SELECT pid FROM callers ORDER BY rowid DESC")
        return [int(r[0]) for r in rows]

    def attributed(self, pid: int) -> Caller | None:
        """The caller process ``pid`` was attributed to (:meth:`attribute`), if any."""
        row = (
            self._store.conn()
            .execute(
                "SELECT tenant, run_id, op_id, worker_id, fencing_token FROM callers WHERE pid = ?",
                (pid,),
            )
            .fetchone()
        )
        return None if row is None else Caller(*row)

    def call(
        self,
        service: str,
        action: str,
        request: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        business_key: str | None = None,
        caller: CallerLike | None = None,
        context: CallerLike | None = None,
    ) -> Response:
        """Perform ``action`` at ``service`` on behalf of ``caller``.

        Returns a :class:`Response` (applied, or deduplicated for a repeated
        idempotency key with the same request). Raises :class:`Rejected` when
        nothing was applied (an injected fault, or a key reused with another
        request), :class:`Unknown` when the caller cannot know, and
        :class:`WorldUsageError` for an unknown service/action or a request
        that is not plain JSON. ``context=`` is accepted as another name for
        ``caller=`` (the reference runtime's keyword); give exactly one.
        Every call is recorded before this returns or raises.
        """
        who = _one_caller(caller, context)
        req = self.request(service, action, request, idempotency_key, business_key, who)
        outcome, done = self.perform(req, pid=os.getpid())
        # The transaction has committed: what follows is only what the caller sees.
        if done.stop:
            stop_caller()  # held here until the harness continues it
        return _answer(service, action, outcome, done)

    def request(
        self,
        service: str,
        action: str,
        request: Mapping[str, Any],
        idempotency_key: str | None,
        business_key: str | None,
        who: CallerLike,
    ) -> _Request:
        """A request checked for :meth:`perform` (:class:`WorldUsageError` if
        the service, action, keys or body are wrong)."""
        spec = self.spec(service, action)
        for name, key in (("idempotency_key", idempotency_key), ("business_key", business_key)):
            if key is not None and not isinstance(key, str):
                raise WorldUsageError(f"{name} must be a str or None; got {key!r}")
        if not isinstance(request, Mapping):
            raise WorldUsageError(f"a request is a mapping of JSON values; got {request!r}")
        return _Request(spec, action, dict(request), idempotency_key, business_key, who)

    def perform(
        self, req: _Request, *, pid: int, cannot_kill: str | None = None
    ) -> tuple[Outcome, Processed]:
        """Count, fault, process and record ``req`` as made by process ``pid``;
        returns what happened, committed. The caller is not killed here: a
        ``killed_*`` outcome tells whoever answers to kill ``pid``.
        ``cannot_kill`` (why the caller's process cannot be killed: unknown,
        or the one serving it): a kill rule that would fire raises
        :class:`WorldUsageError` saying so, and nothing is recorded, since a
        kill that cannot happen would make the records lie."""
        service, action = req.spec.name, req.action
        with self._store.transaction() as conn:
            matched = count_and_match(conn, service, action)
            if (
                matched is not None
                and cannot_kill
                and matched[0].rule.mode in (*KILL_MODES, *STOP_MODES)
            ):
                raise WorldUsageError(
                    f"rule {matched[0].rule_id} ({matched[0].rule.mode}) would kill or stop the "
                    f"caller of this {service}.{action}, but {cannot_kill}; nothing was recorded"
                )
            if matched is not None and matched[0].rule.mode == "slow":
                # Do not hold the world's write lock while sleeping: other
                # workers must keep going. The request is processed afterwards.
                self._record_fired(conn, matched, req.caller, request_seq=None, pid=pid)
            else:
                outcome, done, seq = self._execute(conn, req, matched, pid=pid)
        if matched is not None and matched[0].rule.mode == "slow":
            time.sleep(matched[0].rule.delay)
            with self._store.transaction() as conn:
                outcome, done, seq = self._execute(
                    conn, req, None, rule_id=matched[0].rule_id, pid=pid
                )
                conn.execute(
                    "UPDATE fired SET request_seq = ? WHERE rule_id = ?", (seq, matched[0].rule_id)
                )
        return outcome, done

    def lookup(
        self,
        service: str,
        *,
        idempotency_key: str | None = None,
        business_key: str | None = None,
        tenant: str,
    ) -> Response | None:
        """The first applied request of ``tenant`` with that key, or None.

        Give exactly one key. Raises :class:`NotSupported` when ``service``
        has no lookup of that kind (see :meth:`capabilities`). The lookup is
        recorded (action ``"lookup"``, never an effect), so a checker can see
        whether a runtime reconciled before it retried. Only rules armed for
        lookups (action :data:`~harness.world.LOOKUP`) count it; one that
        fires makes the service refuse to answer (:class:`Rejected`) or the
        answer get lost (:class:`Unknown`).
        """
        outcome, done = self.perform_lookup(
            service,
            idempotency_key=idempotency_key,
            business_key=business_key,
            tenant=tenant,
            pid=os.getpid(),
        )
        return _answer_lookup(service, outcome, done)

    def perform_lookup(
        self,
        service: str,
        *,
        idempotency_key: str | None,
        business_key: str | None,
        tenant: str,
        pid: int,
    ) -> tuple[Outcome, Processed]:
        """:meth:`lookup` as made by process ``pid``, recorded; what happened."""
        spec = self.spec(service)
        keys = {"idempotency_key": idempotency_key, "business_key": business_key}
        req = _Request(spec, LOOKUP, keys, idempotency_key, business_key, _Tenant(tenant))
        with self._store.transaction() as conn:
            # A lookup the service lacks is the caller's mistake, fault or no fault.
            found = find_first(
                conn,
                spec,
                tenant=tenant,
                idempotency_key=idempotency_key,
                business_key=business_key,
            )
            matched = count_and_match(conn, service, LOOKUP)
            if matched is None:
                done = Processed(False, found)
                self._insert(conn, req, "applied", done, rule_id=None, pid=pid)
                return "applied", done
            mode = matched[0].rule.mode
            error = f"injected fault: {mode} (rule {matched[0].rule_id})"
            outcome = _BEFORE_APPLY[mode]
            done = Processed(applied=False, response=None, error=error)
            seq = self._insert(conn, req, outcome, done, rule_id=matched[0].rule_id, pid=pid)
            self._record_fired(conn, matched, req.caller, request_seq=seq, pid=pid)
        return outcome, done

    # -- inside the transaction -------------------------------------------------

    def _execute(
        self,
        conn: sqlite3.Connection,
        req: _Request,
        matched: tuple[ArmedRule, int] | None,
        *,
        rule_id: int | None = None,
        pid: int,
    ) -> tuple[Outcome, Processed, int]:
        mode = None if matched is None else matched[0].rule.mode
        outcome: Outcome
        if mode in _BEFORE_APPLY:
            assert matched is not None
            done = Processed(
                applied=False,
                response=None,
                error=f"injected fault: {mode} (rule {matched[0].rule_id})",
            )
            outcome = _BEFORE_APPLY[mode]
        else:
            done = process(
                conn,
                req.spec,
                req.action,
                tenant=req.caller.tenant,
                request_hash=req.hash,
                idempotency_key=req.idempotency_key,
                run_id=req.caller.run_id,
                request=req.body,
            )
            if mode == "apply_then_timeout":
                outcome = "unknown_applied"
            elif mode == "kill_after_apply":
                outcome = "killed_after_apply"
            elif done.response is None:
                outcome = "rejected"
            else:
                outcome = "deduplicated" if done.deduplicated else "applied"
        if matched is not None:
            rule_id = matched[0].rule_id
        seq = self._insert(conn, req, outcome, done, rule_id=rule_id, pid=pid)
        if matched is not None:
            self._record_fired(conn, matched, req.caller, request_seq=seq, pid=pid)
        if mode in STOP_MODES:
            done = dataclasses.replace(done, stop=True)
        if mode == "reply_missing_ref" and done.response is not None:
            # Recorded whole; the caller gets it without its reference.
            done = dataclasses.replace(done, response=_without_ref(done.response))
        return outcome, done, seq

    def _insert(
        self,
        conn: sqlite3.Connection,
        req: _Request,
        outcome: Outcome,
        done: Processed,
        *,
        rule_id: int | None,
        pid: int,
    ) -> int:
        who = req.caller
        response = None if done.response is None else canonical_json(done.response.to_dict())
        cursor = conn.execute(
            "INSERT INTO requests (service, action, tenant, run_id, op_id, worker_id, "
            "fencing_token, idempotency_key, business_key, request, request_hash, outcome, "
            "applied, deduplicated, external_ref, response, error, rule_id, pid, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                req.spec.name,
                req.action,
                who.tenant,
                who.run_id,
                who.op_id,
                who.worker_id,
                who.fencing_token,
                req.idempotency_key,
                req.business_key,
                req.text,
                req.hash,
                outcome,
                int(done.applied),
                int(done.deduplicated),
                None if done.response is None else done.response.external_ref,
                response,
                done.error,
                rule_id,
                pid,
                float(self._clock()),
            ),
        )
        return int(cursor.lastrowid or 0)

    def _record_fired(
        self,
        conn: sqlite3.Connection,
        matched: tuple[ArmedRule, int],
        who: CallerLike,
        *,
        request_seq: int | None,
        pid: int,
    ) -> None:
        armed, nth = matched
        rule = armed.rule
        conn.execute(
            "INSERT INTO fired (rule_id, service, action, nth, mode, delay, request_seq, "
            "tenant, run_id, worker_id, pid, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                armed.rule_id,
                rule.service,
                rule.action if rule.action is not None else "*",
                nth,
                rule.mode,
                rule.delay,
                request_seq,
                who.tenant,
                who.run_id,
                who.worker_id,
                pid,
                float(self._clock()),
            ),
        )


@dataclass(frozen=True)
class ServedModelCall:
    """What the model endpoint serves for one call: the reply (as a model
    fault left it), its token counts, and the fault that fired (None: none)."""

    reply: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    fault: str | None
    #: how many replies the model made to this conversation before
    answered: int
    #: the sha256 of the conversation's canonical JSON (``_chat.Prompt``)
    conversation_hash: str
