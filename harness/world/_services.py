"""The simulated services: what each one offers and how it processes a request.

Each service is a declaration (:class:`~harness.world._declare.ServiceSpec`,
data), and processing is a pure function of the world's durable records, run
inside the caller's write transaction. Nothing here depends on time or on
which process calls, so the same sequence of calls always gives the same
records and external refs. The four built-in services are declared below;
:func:`declare_services` adds a user's (``harness.world.load_services``).

=============  ================  ===========  ============  ===========
service        actions           idem. keys   lookup by     side effect
=============  ================  ===========  ============  ===========
payments       charge, refund    yes          key           yes
provisioning   create_account    no           business key  yes
email          send, notify      no           --            yes
identity       verify            no           --            no
=============  ================  ===========  ============  ===========

A key the service does not support is recorded but ignored, as a real
service ignores a header it does not know: a repeated ``create_account`` or
``send`` is a real second effect whatever key it carries.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ._declare import ServiceSpec, check_catalogue, parse_service
from ._errors import NotSupported, WorldUsageError
from ._model import LOOKUP, Capabilities, Response
from ._store import next_counter

#: The four built-in services, as declarations (what a user's file holds).
BUILTIN_DECLARATIONS: tuple[Mapping[str, Any], ...] = (
    {
        "name": "payments",
        "ref_prefix": "pay",
        "idempotency_key": {"header": "Idempotency-Key"},
        "lookup": {"by": "key", "path": "/payments/by-key/{key}"},
        "actions": [
            {"name": "charge", "path": "/payments/charges", "status": "succeeded"},
            {"name": "refund", "path": "/payments/refunds", "status": "refunded"},
        ],
    },
    {
        "name": "provisioning",
        "ref_prefix": "acct",
        "business_key": {"header": "Business-Key"},
        "lookup": {"by": "business_key", "path": "/provisioning/by-business-key/{key}"},
        "actions": [
            {"name": "create_account", "path": "/provisioning/accounts", "status": "created"},
        ],
    },
    {
        "name": "email",
        "ref_prefix": "mail",
        "actions": [
            {"name": "send", "path": "/email/send", "status": "sent"},
            {"name": "notify", "path": "/email/notify", "status": "sent"},
        ],
    },
    {
        "name": "identity",
        "ref_prefix": "idv",
        "actions": [
            {"name": "verify", "path": "/identity/verify", "status": "verified",
             "side_effect": False},
        ],
    },
)  # fmt: skip

BUILTIN: tuple[ServiceSpec, ...] = check_catalogue(parse_service(d) for d in BUILTIN_DECLARATIONS)

#: Every service this process knows, by name: the built-in ones, then those
#: declared (:func:`declare_services`, or read from a world's file).
SERVICES: dict[str, ServiceSpec] = {spec.name: spec for spec in BUILTIN}


def declare_services(specs: Iterable[ServiceSpec]) -> tuple[ServiceSpec, ...]:
    """Add ``specs`` to the services this process knows (:data:`SERVICES`).

    A service already known under the same declaration is left as it is; one
    known under another declaration (a built-in name, say) is refused, as
    is a method and path another service answers: :class:`WorldUsageError`.
    A world created afterwards records them, so a worker process that opens
    it knows them too. Returns ``specs``.
    """
    new = tuple(specs)
    for spec in new:
        if not isinstance(spec, ServiceSpec):
            raise WorldUsageError(
                f"declare_services takes ServiceSpec values (load_services(path)); got {spec!r}"
            )
        known = SERVICES.get(spec.name)
        if known is not None and known != spec:
            raise WorldUsageError(
                f"service {spec.name!r} is already declared"
                + (" (built in)" if known in BUILTIN else "")
                + " with another declaration; give yours another name"
            )
    fresh = [s for s in new if s.name not in SERVICES]
    if not fresh:
        return new
    check_catalogue([*SERVICES.values(), *fresh])
    for spec in fresh:
        SERVICES[spec.name] = spec
    return new


def services_of_world(conn: sqlite3.Connection) -> tuple[ServiceSpec, ...]:
    """The declared (not built-in) services a world's file records."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'services'").fetchone()
    return () if row is None else tuple(parse_service(d) for d in json.loads(row[0]))


def record_services(conn: sqlite3.Connection) -> None:
    """Record in a new world's file the declared services this process knows."""
    declared = [s.to_dict() for s in SERVICES.values() if s not in BUILTIN]
    if declared:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('services', ?)",
            (json.dumps(declared, sort_keys=True),),
        )


def forget_services(names: Iterable[str]) -> None:
    """Forget the declared (not built-in) services ``names`` in this process."""
    builtin = {s.name for s in BUILTIN}
    for name in names:
        if name not in builtin:
            SERVICES.pop(name, None)


@dataclass(frozen=True)
class ServiceKind:
    """One effect kind the world offers (``service.action``), as an adapter
    declares it in ``WorkflowSpec.effects`` and ``Declarations.delivery``."""

    service: str
    action: str
    #: the ``status`` the service answers when it applies the request
    status: str
    #: what the service offers for deduplication and reconciliation
    capabilities: Capabilities
    #: how its HTTP face reaches the action
    method: str = "POST"
    path: str = ""

    @property
    def kind(self) -> str:
        return f"{self.service}.{self.action}"

    @property
    def delivery(self) -> str:
        """What the world does with the same request sent twice: what a
        runtime can build its delivery promise for this kind on."""
        caps = self.capabilities
        if not caps.side_effect:
            return "no effect (a read): a repeat changes nothing"
        if caps.idempotency_keys:
            return "a repeat with the same idempotency key is deduplicated"
        if caps.lookup_by_business_key:
            return "every call is a new effect; look up by business key before a retry"
        return "every call is a new effect; nothing to reconcile with"


def service_catalogue() -> tuple[ServiceKind, ...]:
    """Every effect kind the world offers, service by service (in the order
    of :data:`SERVICES`), each with its answer and capabilities: what an
    adapter may name in ``WorkflowSpec.effects`` (``harness list services``)."""
    return tuple(
        ServiceKind(
            spec.name,
            action.name,
            action.status,
            replace(spec.capabilities, side_effect=action.side_effect),
            action.method,
            action.path,
        )
        for spec in SERVICES.values()
        for action in spec.endpoints
    )


def service_spec(service: str, action: str | None = None) -> ServiceSpec:
    """The spec of ``service``; checks ``action`` too when given."""
    spec = SERVICES.get(service)
    if spec is None:
        raise WorldUsageError(
            f"unknown service {service!r}; the world offers {', '.join(sorted(SERVICES))}"
        )
    if action is not None and action not in spec.actions:
        raise WorldUsageError(
            f"service {service!r} has no action {action!r}; it offers "
            f"{', '.join(sorted(spec.actions))}"
        )
    return spec


def rule_target(service: str, action: str | None) -> ServiceSpec:
    """The spec of what a fault rule (or a call count) names: ``service``
    and one of its actions, or :data:`~harness.world._model.LOOKUP` for a
    service that offers a lookup."""
    if action != LOOKUP:
        return service_spec(service, action)
    spec = service_spec(service)
    if not (spec.capabilities.lookup_by_key or spec.capabilities.lookup_by_business_key):
        raise WorldUsageError(
            f"service {service!r} offers no lookup, so a lookup rule could never fire; "
            "services with one: "
            + ", ".join(
                n
                for n, sp in sorted(SERVICES.items())
                if sp.capabilities.lookup_by_key or sp.capabilities.lookup_by_business_key
            )
        )
    return spec


@dataclass(frozen=True)
class Processed:
    """What the service did with a request it got to process."""

    applied: bool
    response: Response | None
    error: str | None = None
    #: a ``stop_after_apply`` rule fired: the caller is stopped (SIGSTOP)
    #: once the records are committed, before it sees the response
    stop: bool = False

    @property
    def deduplicated(self) -> bool:
        return self.response is not None and self.response.deduplicated


def process(
    conn: sqlite3.Connection,
    spec: ServiceSpec,
    action: str,
    *,
    tenant: str,
    request_hash: str,
    idempotency_key: str | None,
    run_id: str | None = None,
    request: Mapping[str, Any] | None = None,
) -> Processed:
    """Apply (or deduplicate, or refuse) one request. Runs inside the caller's
    write transaction, so the check for an earlier key and the apply are atomic
    across processes."""
    if spec.capabilities.idempotency_keys and idempotency_key is not None:
        first = conn.execute(
            "SELECT request_hash, response FROM requests "
            "WHERE service = ? AND tenant = ? AND idempotency_key = ? AND applied = 1 "
            "ORDER BY seq LIMIT 1",
            (spec.name, tenant, idempotency_key),
        ).fetchone()
        if first is not None:
            if first[0] != request_hash:
                return Processed(
                    applied=False,
                    response=None,
                    error=(
                        f"idempotency key {idempotency_key!r} was first used with a different "
                        f"request (hash {first[0][:12]}..., now {request_hash[:12]}...); "
                        "a key must name exactly one request"
                    ),
                )
            original = Response.from_dict(json.loads(first[1]))
            return Processed(
                applied=False,
                response=Response(original.external_ref, original.body, deduplicated=True),
            )
    # A ref names the logical request (tenant, run, request hash) and how many
    # times it was applied, not a global sequence: the same request gets the
    # same ref whatever other runs did before it, so a faulted run and its
    # fault-free oracle can be compared field by field. A real duplicate gets
    # "-2"; a read without side effect answers the same every time.
    logical = hashlib.sha256(f"{tenant}\n{run_id or ''}\n{request_hash}".encode()).hexdigest()[:10]
    declared = spec.action(action)
    n = next_counter(conn, f"ref:{spec.name}:{logical}") if declared.side_effect else 1
    ref = f"{spec.ref_prefix}-{logical}-{n}"
    body = declared.body(ref, request or {})
    return Processed(applied=declared.side_effect, response=Response(ref, body))


def find_first(
    conn: sqlite3.Connection,
    spec: ServiceSpec,
    *,
    tenant: str,
    idempotency_key: str | None,
    business_key: str | None,
) -> Response | None:
    """The response of the first applied request with that key, or None.

    Raises :class:`NotSupported` for a lookup the service lacks and
    :class:`WorldUsageError` unless exactly one key is given.
    """
    if (idempotency_key is None) == (business_key is None):
        raise WorldUsageError(
            "lookup needs exactly one of idempotency_key= or business_key=; "
            f"got idempotency_key={idempotency_key!r}, business_key={business_key!r}"
        )
    if idempotency_key is not None:
        if not spec.capabilities.lookup_by_key:
            raise NotSupported(spec.name, "lookup by idempotency key")
        column, value = "idempotency_key", idempotency_key
    else:
        if not spec.capabilities.lookup_by_business_key:
            raise NotSupported(spec.name, "lookup by business key")
        column, value = "business_key", str(business_key)
    row = conn.execute(
        f"SELECT response FROM requests WHERE service = ? AND tenant = ? AND {column} = ? "
        "AND applied = 1 ORDER BY seq LIMIT 1",
        (spec.name, tenant, value),
    ).fetchone()
    if row is None:
        return None
    found = Response.from_dict(json.loads(row[0]))
    return Response(found.external_ref, found.body, deduplicated=False)
