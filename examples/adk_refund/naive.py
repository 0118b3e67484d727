"""The refund agent as first written: the refund carries no idempotency key.

A worker killed after the payments API applied the refund leaves the call
without its response in the session; ADK's resume runs the call again, and a
lost reply the tool retries is sent again too: two refunds
(``exactly_once_effects``).

    harness run --adapter adk --adapter-opt app=examples.adk_refund.naive:APP
"""

from ._agent import build_app

APP = build_app("refund_naive", None, retry_lost=True, answer_once=True)
