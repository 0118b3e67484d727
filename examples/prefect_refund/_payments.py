"""The payments API as the refund flows call it: plain httpx, nothing of the harness.

``PAYMENTS_API_URL`` is read at each call. A refusal, an outage or a lost
reply raises, and the task's retries (Prefect's) try again.
"""

from __future__ import annotations

import os

import httpx


def post_refund(customer_id: str, amount_cents: int, currency: str, key: str | None) -> str:
    """Refund ``amount_cents`` in ``currency`` to the customer; its reference.
    ``key``: the ``Idempotency-Key`` header (None: none)."""
    reply = httpx.post(
        os.environ["PAYMENTS_API_URL"] + "/payments/refunds",
        json={"customer_id": customer_id, "amount_cents": amount_cents, "currency": currency},
        headers={} if key is None else {"Idempotency-Key": key},
        timeout=30,
    )
    reply.raise_for_status()
    return str(reply.json()["external_ref"])
