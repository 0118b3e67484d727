"""The support agent's refund tool (see README.md)."""

from __future__ import annotations

import os

import requests
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool


@tool
def refund(customer_id: str, amount_cents: int, currency: str, config: RunnableConfig) -> str:
    """Refund a customer's payment; returns the refund's reference."""
    reply = requests.post(
        os.environ["PAYMENTS_API_URL"] + "/payments/refunds",
        json={"customer_id": customer_id, "amount_cents": amount_cents, "currency": currency},
        headers={},
        timeout=30,
    )
    reply.raise_for_status()
    return str(reply.json()["external_ref"])


TOOLS = [refund]
