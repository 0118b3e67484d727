"""The support agent's refund tool (see README.md)."""

from __future__ import annotations

import os

import httpx

HTTP = httpx.Client(timeout=30)


def refund(ticket_id: str, call_id: str, customer_id: str, amount_cents: int, currency: str) -> str:
    """Refund the customer through the payments API; returns the refund's reference."""
    reply = HTTP.post(
        os.environ["PAYMENTS_API_URL"] + "/payments/refunds",
        json={"customer_id": customer_id, "amount_cents": amount_cents, "currency": currency},
        headers={},
    )
    reply.raise_for_status()
    return str(reply.json()["external_ref"])


TOOLS = {"refund": refund}
