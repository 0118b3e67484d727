"""The simulated services: what each one offers and how it processes a request.

Each service is a small, fixed specification, and processing is a pure
function of the world's durable records, run inside the caller's write
transaction. Nothing here depends on time or on which process calls, so the
same sequence of calls always gives the same records and external refs.

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
from collections.abc import Mapping
from dataclasses import dataclass

from ._errors import NotSupported, WorldUsageError
from ._model import LOOKUP, Capabilities, Response
from ._store import next_counter


@dataclass(frozen=True)
class ServiceSpec:
    """One simulated service: its actions (with the status each answers), what
    it supports, and the prefix of its external refs."""

    name: str
    actions: Mapping[str, str]
    capabilities: Capabilities
    ref_prefix: str


SERVICES: dict[str, ServiceSpec] = {
    spec.name: spec
    for spec in (
        ServiceSpec(
            "payments",
            {"charge": "succeeded", "refund": "refunded"},
            Capabilities(idempotency_keys=True, lookup_by_key=True, lookup_by_business_key=False),
            "pay",
        ),
        ServiceSpec(
            "provisioning",
            {"create_account": "created"},
            Capabilities(idempotency_keys=False, lookup_by_key=False, lookup_by_business_key=True),
            "acct",
        ),
        ServiceSpec(
            "email",
            {"send": "sent", "notify": "sent"},
            Capabilities(idempotency_keys=False, lookup_by_key=False, lookup_by_business_key=False),
            "mail",
        ),
        ServiceSpec(
            "identity",
            {"verify": "verified"},
            Capabilities(
                idempotency_keys=False,
                lookup_by_key=False,
                lookup_by_business_key=False,
                side_effect=False,
            ),
            "idv",
        ),
    )
}


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
        ServiceKind(spec.name, action, status, spec.capabilities)
        for spec in SERVICES.values()
        for action, status in spec.actions.items()
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
    n = next_counter(conn, f"ref:{spec.name}:{logical}") if spec.capabilities.side_effect else 1
    ref = f"{spec.ref_prefix}-{logical}-{n}"
    body = {"status": spec.actions[action], "external_ref": ref}
    return Processed(applied=spec.capabilities.side_effect, response=Response(ref, body))


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
