"""The refund agent, shared by every version: one tool call, then an answer.

Plain ADK, nothing of the harness: the ``refund`` tool posts to the payments
API at ``PAYMENTS_API_URL``; the model is an OpenAI-compatible chat endpoint
at ``REFUND_MODEL_URL`` (ADK's ``ApigeeLlm`` with an ``apigee/openai/`` model,
which speaks ``/chat/completions`` over httpx: no LiteLLM, no key), retried
on 429 and 5xx. :func:`build_app` assembles a version from three choices, so
that the versions differ in exactly what they decide:

* ``key``: the ``Idempotency-Key`` the tool sends (``None``: none);
* ``retry_lost``: whether the tool retries a lost reply itself (with the same
  key), or raises and leaves the retry to ADK's resume (a refusal or an
  outage is retried in the tool either way, up to ``TRIES``: ADK never runs
  again a tool that raised);
* ``answer_once``: a ``before_model_callback`` that does not ask the model
  again once the invocation holds its answer (after a resume).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import httpx
from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.apps import App, ResumabilityConfig
from google.adk.models.apigee_llm import ApigeeLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.tool_context import ToolContext
from google.genai import types

Key = Callable[[ToolContext], str]
#: a call refused, lost or met by an outage is tried this many times in all
TRIES = 3


def refund_tool(key: Key | None, *, retry_lost: bool) -> Callable[..., str]:
    def refund(
        customer_id: str, amount_cents: int, currency: str, tool_context: ToolContext
    ) -> str:
        """Refund ``amount_cents`` in ``currency`` to the customer; returns its reference."""
        body = {"customer_id": customer_id, "amount_cents": amount_cents, "currency": currency}
        headers = {} if key is None else {"Idempotency-Key": key(tool_context)}
        for attempt in range(1, TRIES + 1):
            try:
                reply = httpx.post(
                    os.environ["PAYMENTS_API_URL"] + "/payments/refunds",
                    json=body,
                    headers=headers,
                    timeout=30,
                )
            except httpx.TransportError:  # the reply was lost: applied or not, nobody knows
                if retry_lost and attempt < TRIES:
                    continue
                raise
            if reply.is_success:
                return str(reply.json()["external_ref"])
            if attempt == TRIES:  # refused (4xx) or down (5xx) every time: give up
                reply.raise_for_status()
        raise AssertionError("unreachable")

    return refund


def answered(callback_context: CallbackContext, llm_request: LlmRequest) -> LlmResponse | None:
    """Do not ask the model again when the conversation already ends in its
    answer: a resumed invocation whose answer was stored before ADK marked
    it ended. The empty response ends the turn and stores nothing."""
    last = llm_request.contents[-1] if llm_request.contents else None
    parts = (last.parts or []) if last is not None else []
    if last is not None and last.role == "model" and not any(p.function_call for p in parts):
        return LlmResponse(turn_complete=True)
    return None


def build_app(name: str, key: Key | None, *, retry_lost: bool, answer_once: bool) -> App:
    model = ApigeeLlm(
        model="apigee/openai/gpt-4o-mini",
        proxy_url=os.environ.get("REFUND_MODEL_URL", "http://127.0.0.1:9/v1"),
        retry_options=types.HttpRetryOptions(attempts=4, initial_delay=0.05, max_delay=0.5),
    )
    extra: dict[str, Any] = {"before_model_callback": answered} if answer_once else {}
    agent = LlmAgent(
        name="refunds",
        model=model,
        instruction="Refund what the customer asks for, then say so.",
        tools=[refund_tool(key, retry_lost=retry_lost)],
        **extra,
    )
    resumable = ResumabilityConfig(is_resumable=True)
    return App(name=name, root_agent=agent, resumability_config=resumable)


def by_session(tool_context: ToolContext) -> str:
    """A key from the session (the run): the same for every try and every resume."""
    return f"{tool_context.session.id}:refund"


def by_call(tool_context: ToolContext) -> str:
    """A key from the model's function call id: the same when ADK resumes the
    call, a new one when the model is asked again."""
    return str(tool_context.function_call_id)
