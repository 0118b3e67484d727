"""The controller side of the world: create it, arm faults, read its records.

The harness owns a :class:`World`; workers get a :class:`WorldClient` for the
same file, either from :meth:`World.client` (in-process) or from
:func:`open_world` (a worker process given the spec
``"harness.world:open_world"`` and the file's path). Exactly-once is judged
from :meth:`World.effects`, never from the runtime's own records.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, cast

from ._client import Clock, WorldClient
from ._errors import WorldUsageError
from ._faults import ArmedRule, arm, call_counter, disarm, list_rules
from ._model import (
    MODEL,
    FaultMode,
    FaultRule,
    FiredFault,
    Outcome,
    RequestRecord,
    ServiceCounts,
)
from ._services import (
    BUILTIN,
    SERVICES,
    declare_services,
    record_services,
    rule_target,
    services_of_world,
)
from ._store import OnWorldFile, read_counter

if TYPE_CHECKING:
    from ._chat import ModelSource
    from ._http import HttpFace

#: Environment variable :func:`open_world` reads when given no path.
ENV_WORLD_PATH = "HARNESS_WORLD_PATH"

_REQUEST_COLUMNS = (
    "seq, service, action, tenant, run_id, op_id, worker_id, fencing_token, idempotency_key, "
    "business_key, request, request_hash, outcome, applied, deduplicated, external_ref, "
    "response, error, rule_id, pid, at"
)


class World(OnWorldFile):
    """One simulated world, stored in the SQLite file at ``path``.

    ``World(path)`` touches nothing; call :meth:`create` for a new world or
    :meth:`open` to check an existing one. ``clock`` (a callable returning
    seconds) stamps the records written through :meth:`client`; default
    :func:`time.time`. Every method reads the durable file, so it sees the
    calls of every process.
    """

    def __init__(self, path: str | os.PathLike[str], clock: Clock | None = None) -> None:
        super().__init__(path)
        self._clock = clock

    def create(self) -> World:
        """Create the world's file, empty. Refuses an existing file.

        The file records the services declared in this process
        (:func:`~harness.world.declare_services`), so that every process that
        opens the world knows them."""
        self._store.create()
        if any(spec not in BUILTIN for spec in SERVICES.values()):
            with self._store.transaction() as conn:
                record_services(conn)
        return self

    def open(self) -> World:
        """Check that ``path`` holds a world this code can read, and know the
        services it records; returns self."""
        declare_services(services_of_world(self._store.conn()))
        return self

    def client(self) -> WorldClient:
        """A client for this world (same clock), for in-process callers."""
        return WorldClient(self._store.path, clock=self._clock)

    def serve_http(self, *, model: ModelSource | None = None) -> HttpFace:
        """Serve this world's services over HTTP on a loopback port (same
        clock), started; ``.url`` is its base URL, ``.close()`` stops it.
        ``model``: also answer ``POST /v1/chat/completions`` and ``POST
        /v1/responses`` from that script (``harness.world._chat``) or
        cassette (``harness.world._cassette``), streamed or not. Needs the ``http`` extra; see
        ``harness.world._http``."""
        from ._http import HttpFace

        return HttpFace(self._store.path, clock=self._clock, model=model).start()

    def model_calls(self, after: int = 0) -> list[dict[str, Any]]:
        """Every call of the scripted model, in order: who made it (tenant,
        run, worker, pid), the step that answered, the request and the reply
        served (as a model fault changed it), token counts, and the model
        fault that fired at it (``fault``, its ``rule_id``; None for none).
        ``after``: only those whose ``seq`` is greater (the recorder reads
        what is new since its last look)."""
        rows = self._store.conn().execute(
            "SELECT seq, tenant, run_id, worker_id, pid, model, step, request, reply, "
            "prompt_tokens, completion_tokens, at, fault, rule_id FROM model_calls "
            "WHERE seq > ? ORDER BY seq",
            (after,),
        )
        names = ("seq", "tenant", "run_id", "worker_id", "pid", "model", "step", "request",
                 "reply", "prompt_tokens", "completion_tokens", "at", "fault",
                 "rule_id")  # fmt: skip
        out = []
        for row in rows:
            call = dict(zip(names, row, strict=True))
            call["request"], call["reply"] = json.loads(row[7]), json.loads(row[8])
            out.append(call)
        return out

    # -- faults -------------------------------------------------------------------

    def arm(self, rule: FaultRule) -> int:
        """Arm ``rule`` durably; returns its id. Refuses a rule for an unknown
        service or action, and one whose ``nth`` call has already happened."""
        if not isinstance(rule, FaultRule):
            raise WorldUsageError(f"arm() takes a FaultRule; got {rule!r}")
        with self._store.transaction() as conn:
            declare_services(services_of_world(conn))  # those the world's file declares
            return arm(conn, rule)

    def disarm(self, rule_id: int) -> bool:
        """Remove rule ``rule_id`` if it has not fired yet (a step that armed
        it for one worker's call, and that worker ended without making it);
        whether it was removed. A rule that fired stays, with its record."""
        with self._store.transaction() as conn:
            return disarm(conn, rule_id)

    def rules(self) -> list[ArmedRule]:
        """Every armed rule in arming order, with whether it has fired."""
        return list_rules(self._store.conn())

    def fired(self) -> list[FiredFault]:
        """The rules that actually fired, by the time they fired (then by
        rule: arming order). Not a log to read from an offset: a ``slow``
        rule armed first is recorded when its caller's delay ends, after a
        rule armed later that fired meanwhile."""
        rows = self._store.conn().execute(
            "SELECT rule_id, service, action, nth, mode, delay, request_seq, tenant, run_id, "
            "worker_id, pid, at FROM fired ORDER BY at, rule_id"
        )
        return [
            FiredFault(
                rule_id=r[0],
                service=r[1],
                action=r[2],
                nth=r[3],
                mode=cast(FaultMode, r[4]),
                delay=r[5],
                request_seq=r[6],
                tenant=r[7],
                run_id=r[8],
                worker_id=r[9],
                pid=r[10],
                at=r[11],
            )
            for r in rows
        ]

    def calls(self, service: str, action: str | None = None) -> int:
        """How many calls ``service`` (and ``action``) has had, lookups excluded
        (``action`` :data:`~harness.world.LOOKUP`: how many lookups).

        Arm ``nth=world.calls(s) + 1`` to hit the next call.
        """
        if service != MODEL:
            rule_target(service, action)
        return read_counter(self._store.conn(), call_counter(service, action))

    # -- records ------------------------------------------------------------------

    def requests(self, service: str | None = None) -> list[RequestRecord]:
        """Every recorded request (lookups included), in order; of one service if given."""
        return self._select("" if service is None else "WHERE service = ?", service)

    def effects(self, service: str | None = None) -> list[RequestRecord]:
        """The requests that changed the world (``applied=True``), in order.

        This is what exactly-once is judged on: two effects for one logical
        operation are a duplicate, whatever the runtime believes.
        """
        where = "WHERE applied = 1" + ("" if service is None else " AND service = ?")
        return self._select(where, service)

    def summary(self) -> dict[str, ServiceCounts]:
        """Counts per service (every service listed, in name order).

        ``calls`` excludes lookups; ``applied`` counts effects; ``unknown`` and
        ``killed`` count the fault outcomes (of calls: a lookup refused by a
        lookup rule is in :meth:`requests` only).
        """
        rows = (
            self._store.conn()
            .execute(
                "SELECT service, "
                "SUM(action != 'lookup'), SUM(applied), SUM(outcome = 'deduplicated'), "
                "SUM(action != 'lookup' AND outcome = 'rejected'), "
                "SUM(action != 'lookup' AND outcome LIKE 'unknown_%'), "
                "SUM(outcome LIKE 'killed_%') "
                "FROM requests GROUP BY service"
            )
            .fetchall()
        )
        counts = {name: ServiceCounts() for name in sorted(SERVICES)}
        for service, *numbers in rows:
            counts[service] = ServiceCounts(*(int(n) for n in numbers))
        return counts

    def _select(self, where: str, service: str | None) -> list[RequestRecord]:
        params: tuple[Any, ...] = () if service is None else (service,)
        rows = self._store.conn().execute(
            f"SELECT {_REQUEST_COLUMNS} FROM requests {where} ORDER BY seq", params
        )
        return [_request_record(row) for row in rows]


def open_world(arg: str | None) -> WorldClient:
    """Factory for worker processes: a client for the world at path ``arg``.

    Meant for a ``"harness.world:open_world"`` spec string; ``arg`` is the
    world's file (``None``: read it from ``$HARNESS_WORLD_PATH``). The world
    must already exist (the controller creates it). Records are stamped with
    the wall clock.
    """
    path = arg if arg else os.environ.get(ENV_WORLD_PATH)
    if not path:
        raise WorldUsageError(
            "open_world needs the world's file: pass its path as the factory argument "
            f"or set ${ENV_WORLD_PATH}"
        )
    client = WorldClient(path)
    client._store.conn()  # fail here, at start-up, if there is no world at path
    return client


def _request_record(row: tuple[Any, ...]) -> RequestRecord:
    (seq, service, action, tenant, run_id, op_id, worker_id, token, key, bkey, request, rhash,
     outcome, applied, dedup, ref, response, error, rule_id, pid, at) = row  # fmt: skip
    return RequestRecord(
        seq=seq,
        service=service,
        action=action,
        tenant=tenant,
        run_id=run_id,
        op_id=op_id,
        worker_id=worker_id,
        fencing_token=token,
        idempotency_key=key,
        business_key=bkey,
        request=json.loads(request),
        request_hash=rhash,
        outcome=cast(Outcome, outcome),
        applied=bool(applied),
        deduplicated=bool(dedup),
        external_ref=ref,
        response=None if response is None else json.loads(response),
        error=error,
        rule_id=rule_id,
        pid=pid,
        at=at,
    )
