"""What both versions of the refund app share: the workflow spec and the request.

Release 2 (today's code) added a validation before the refund (a step of
its own in ``naive.py`` and ``patched.py``, workflow code in ``careful.py``);
release 1 (``code_version=1``) refunds straight away. The refund request is the same
in both releases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.adapters import WorkflowSpec

REFUND = WorkflowSpec(
    name="refund",
    inputs=(
        {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
        {"customer_id": "c-2", "amount_cents": 99_00, "currency": "USD"},
    ),
    effects=("payments.refund",),
)
DELIVERY = {"payments.refund": "exactly_once"}


def request_of(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payments service's refund request for a run's input."""
    return {k: payload[k] for k in ("customer_id", "amount_cents", "currency")}


def validate(payload: Mapping[str, Any]) -> None:
    """Release 2's check: a refund of nothing, or of a negative amount, is refused."""
    if int(payload["amount_cents"]) <= 0:
        raise ValueError(f"nothing to refund: {payload['amount_cents']} cents")
