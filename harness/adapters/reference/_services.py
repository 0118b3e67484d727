"""The reference runtime's tool interface, served by the harness's world.

A worker process of the reference runtime is configured with
``--services harness.adapters.reference._services:open_services`` and the
world's database path; every call then lands in the world, where effects are
counted. The world's errors are translated to the runtime's three outcomes.
"""

from __future__ import annotations

import os
from typing import Any

from reference_runtime import (
    CallContext,
    FileClock,
    OutcomeUnknown,
    ServiceCapabilities,
    ServiceRejected,
    ServiceResponse,
)

from ...world import NotSupported, Rejected, Unknown, WorldClient

SPEC = "harness.adapters.reference._services:open_services"


class WorldServices:
    """``reference_runtime.ExternalServices`` backed by a :class:`WorldClient`."""

    def __init__(self, client: WorldClient) -> None:
        self.client = client

    def capabilities(self, service: str) -> ServiceCapabilities:
        c = self.client.capabilities(service)
        return ServiceCapabilities(
            idempotency_keys=c.idempotency_keys,
            lookup_by_key=c.lookup_by_key,
            lookup_by_business_key=c.lookup_by_business_key,
            side_effect=c.side_effect,
        )

    def call(
        self,
        service: str,
        action: str,
        request: dict[str, Any],
        *,
        idempotency_key: str | None,
        business_key: str | None,
        context: CallContext,
    ) -> ServiceResponse:
        try:
            r = self.client.call(
                service,
                action,
                request,
                idempotency_key=idempotency_key,
                business_key=business_key,
                context=context,
            )
        except Rejected as exc:
            raise ServiceRejected(str(exc)) from exc
        except Unknown as exc:
            raise OutcomeUnknown(str(exc)) from exc
        return ServiceResponse(
            external_ref=r.external_ref, body=r.body, deduplicated=r.deduplicated
        )

    def lookup(
        self,
        service: str,
        *,
        idempotency_key: str | None = None,
        business_key: str | None = None,
        tenant: str,
    ) -> ServiceResponse | None:
        try:
            r = self.client.lookup(
                service, idempotency_key=idempotency_key, business_key=business_key, tenant=tenant
            )
        except NotSupported as exc:
            raise NotImplementedError(str(exc)) from exc
        except Rejected as exc:
            raise ServiceRejected(str(exc)) from exc
        except Unknown as exc:
            raise OutcomeUnknown(str(exc)) from exc
        if r is None:
            return None
        return ServiceResponse(
            external_ref=r.external_ref, body=r.body, deduplicated=r.deduplicated
        )

    def close(self) -> None:
        self.client.close()


def services_arg(world_path: str, clock_path: str | None) -> str:
    """The ``RR_SERVICES_ARG`` that :func:`open_services` understands."""
    return world_path if clock_path is None else f"{world_path}|{clock_path}"


def open_services(arg: str | None) -> WorldServices:
    """Factory for ``RR_SERVICES``: ``arg`` is ``WORLD_DB[|CLOCK_FILE]``; with a
    clock file the world stamps its records with the deployment's virtual time,
    so the same scenario gives the same records."""
    if not arg:
        raise ValueError("open_services needs the world's path: RR_SERVICES_ARG=WORLD_DB[|CLOCK]")
    world_path, _, clock_path = arg.partition("|")
    if not os.path.exists(world_path):
        raise ValueError(f"no world at {world_path!r}: the controller creates it first")
    clock = FileClock(clock_path).now if clock_path else None
    return WorldServices(WorldClient(world_path, clock=clock))
