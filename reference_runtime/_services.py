"""The tool interface: the only way the runtime reaches external services.

The runtime never talks to a payment processor, a provisioning API or a mail
server directly. It calls an :class:`ExternalServices` object configured at
start-up (``--services module:factory``), so the same code runs against real
services, a sandbox, or a test harness's simulated *world*.

A call has three outcomes, never two:

* it returns a :class:`ServiceResponse` -- applied, with an external reference;
* it raises :class:`~reference_runtime.ServiceRejected` -- definitely **not**
  applied (validation error, service down before accepting the request);
* it raises :class:`~reference_runtime.OutcomeUnknown` -- timeout or lost
  connection: it may have been applied. The runtime must reconcile (ask by key
  or business key) before any retry.

Services differ in what they offer for reconciliation; each declares it in
:class:`ServiceCapabilities`:

* ``payments``     -- idempotency keys (a repeated key returns the first result)
                     and lookup by idempotency key;
* ``provisioning`` -- no keys, but an account can be looked up by its business key;
* ``email``        -- neither: exactly-once is impossible, so the runtime declares
                     at-most-once for it and hands an unknown outcome to an operator;
* ``identity``     -- a read-only check with no side effect.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ._errors import ConfigError


@dataclass(frozen=True)
class ServiceCapabilities:
    idempotency_keys: bool
    lookup_by_key: bool
    lookup_by_business_key: bool
    side_effect: bool = True


class ServiceResponse(BaseModel):
    """A service's answer to an applied request."""

    model_config = ConfigDict(frozen=True)

    external_ref: str
    body: dict[str, Any] = {}
    #: True when the service recognised a repeated idempotency key and returned
    #: the first result without applying again.
    deduplicated: bool = False


@dataclass(frozen=True)
class CallContext:
    """Who is calling: lets a service (or a test world) attribute every request."""

    tenant: str
    run_id: str
    op_id: str
    worker_id: str
    fencing_token: int


@runtime_checkable
class ExternalServices(Protocol):
    """The services a worker may call. Implementations must be process-safe:
    each worker process opens its own instance (see :func:`load_services`)."""

    def capabilities(self, service: str) -> ServiceCapabilities:
        """What ``service`` offers for deduplication and reconciliation."""
        ...

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
        """Apply ``action`` at ``service``. Raises ServiceRejected or OutcomeUnknown."""
        ...

    def lookup(
        self,
        service: str,
        *,
        idempotency_key: str | None = None,
        business_key: str | None = None,
        tenant: str,
    ) -> ServiceResponse | None:
        """Find an earlier applied request; None when there is none.

        Raises ``NotImplementedError`` when the service has no lookup of that
        kind (check :meth:`capabilities` first), ServiceRejected/OutcomeUnknown
        when the service could not answer.
        """
        ...

    def close(self) -> None: ...


def load_services(spec: str, arg: str | None) -> ExternalServices:
    """Build services from ``"module:factory"``; the factory takes ``arg``.

    Called inside each worker process, after fork, so connections are never
    shared between processes.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"services spec {spec!r} is not of the form 'package.module:factory'; "
            "example: --services harness.world:open_world"
        )
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load services factory {spec!r}: {exc}") from exc
    services: ExternalServices = factory(arg)
    # What isinstance(services, ExternalServices) checks, without walking the
    # protocol's MRO on every call (typing does, in each new worker process).
    missing = [name for name in _MEMBERS if getattr(services, name, None) is None]
    if missing:
        raise ConfigError(
            f"services factory {spec!r} returned {type(services).__name__}, which lacks "
            f"{', '.join(name + '()' for name in missing)} of reference_runtime.ExternalServices"
        )
    return services


#: The methods an :class:`ExternalServices` object must have.
_MEMBERS = tuple(
    sorted(
        name for name, value in vars(ExternalServices).items() if callable(value) and name[0] != "_"
    )
)
