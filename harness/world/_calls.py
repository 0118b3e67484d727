"""The pieces of one call to the world: a validated request, the caller of
a lookup, who calls, and what the caller sees once the call's records are
committed (a response, an error, or SIGKILL)."""

from __future__ import annotations

from typing import Any

from ._declare import ServiceSpec
from ._errors import Rejected, Unknown, WorldUsageError
from ._faults import kill_caller
from ._model import (
    LOOKUP,
    CallerLike,
    Outcome,
    Response,
    canonical_json,
    request_hash,
)
from ._services import (
    Processed,
)


class _Request:
    """A validated request, with its canonical JSON and hash computed once."""

    def __init__(
        self,
        spec: ServiceSpec,
        action: str,
        body: dict[str, Any],
        idempotency_key: str | None,
        business_key: str | None,
        caller: CallerLike,
    ) -> None:
        self.spec, self.action, self.caller, self.body = spec, action, caller, body
        self.idempotency_key, self.business_key = idempotency_key, business_key
        self.text = canonical_json(body)
        self.hash = request_hash(body)


class _Tenant:
    """The caller of a lookup: only its tenant is known."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self.run_id: str | None = None
        self.op_id: str | None = None
        self.worker_id: str | None = None
        self.fencing_token: int | None = None


def _one_caller(caller: CallerLike | None, context: CallerLike | None) -> CallerLike:
    if (caller is None) == (context is None):
        raise WorldUsageError(
            "say who calls with exactly one of caller= or context= "
            "(e.g. caller=Caller(tenant='t1', run_id='r1'))"
        )
    who = caller if caller is not None else context
    assert who is not None
    if not isinstance(getattr(who, "tenant", None), str):
        raise WorldUsageError(f"the caller must have a str tenant; got {who!r}")
    return who


def _without_ref(response: Response) -> Response:
    """``response`` without the reference: the body's fields that carry it
    left out, ``external_ref`` empty."""
    ref = response.external_ref
    body = {k: v for k, v in response.body.items() if v != ref}
    return Response("", body, response.deduplicated)


def _answer_lookup(service: str, outcome: Outcome, done: Processed) -> Response | None:
    if outcome == "applied":
        return done.response
    return _answer(service, LOOKUP, outcome, done)


def _answer(
    service: str,
    action: str,
    outcome: Outcome,
    done: Processed,
) -> Response:
    """What the caller sees, once the world's records are committed."""
    if outcome in ("killed_before_apply", "killed_after_apply"):
        kill_caller()
    if outcome in ("unknown_applied", "unknown_not_applied"):
        raise Unknown(service, action, "timed out waiting for the service's answer")
    if outcome == "rejected":
        raise Rejected(service, action, done.error or "rejected")
    assert done.response is not None, "an applied or deduplicated request has a response"
    return done.response
