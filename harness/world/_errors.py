"""Errors raised by the simulated world.

Every error the world raises on purpose derives from :class:`WorldError`.
Three kinds are kept apart: an answer of a simulated service (what a runtime
under test must handle), the caller's mistake (a bad argument or a missing
world file: fix the calling code), and a capability the service does not have::

    WorldError
    ├── ServiceFault                       -- a simulated service's answer; handle it
    │   ├── Rejected                       (definitely NOT applied; safe to retry)
    │   └── Unknown (TimeoutError)         (may or may not have been applied; reconcile)
    ├── NotSupported (NotImplementedError) -- the service has no such lookup/feature
    └── WorldUsageError (ValueError)       -- the caller's mistake: unknown service or
                                              action, bad rule, non-JSON request, no world

``Unknown`` inherits :class:`TimeoutError` because that is what it models: the
caller lost sight of the request. ``NotSupported`` inherits
:class:`NotImplementedError`, which is what an ``ExternalServices.lookup`` of
the reference runtime's contract raises for a missing lookup.

Every one of them survives ``pickle`` (runtimes such as DBOS pickle a step's
exception to record it): the ones with their own ``__init__`` say how to
rebuild themselves in ``__reduce__``.
"""

from __future__ import annotations

from typing import Any


class WorldError(Exception):
    """Root of every error the world raises on purpose."""


class ServiceFault(WorldError):
    """A simulated service answered with an error. A runtime must handle it."""

    def __init__(self, service: str, action: str, reason: str) -> None:
        self.service, self.action, self.reason = service, action, reason
        super().__init__(f"{service}.{action}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        # The default rebuilds from ``args`` (the one message), which this
        # ``__init__`` does not take; attributes set later travel as state.
        return (type(self), (self.service, self.action, self.reason), dict(vars(self)))


class Rejected(ServiceFault):
    """The service refused the request before applying it: nothing happened.

    ``reason`` says why (an injected fault, or an idempotency key reused with a
    different request).
    """


class Unknown(ServiceFault, TimeoutError):
    """The caller lost sight of the request: it may or may not have been applied.

    A correct runtime reconciles (lookup by idempotency or business key) before
    it retries; only the world's records say what really happened.
    """


class NotSupported(WorldError, NotImplementedError):
    """The service does not offer what was asked (e.g. a lookup it lacks).

    Check :meth:`WorldClient.capabilities` first.
    """

    def __init__(self, service: str, feature: str) -> None:
        self.service, self.feature = service, feature
        super().__init__(
            f"service {service!r} does not support {feature}; "
            f"check capabilities({service!r}) before asking"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.service, self.feature), dict(vars(self)))


class WorldUsageError(WorldError, ValueError):
    """The caller's mistake: the message names the wrong value and the fix."""
