"""The refund agent written to survive a kill at any effect boundary.

* **An idempotency key from the run's stable id** (``"{run_id}:refund"``):
  the turn a resumed worker runs again sends the same key, and the payments
  service applies the refund once.
* **Resume from the session, not from the queue**: a run whose session
  already holds the user's message is run with no new input, so the
  conversation is the one a run without faults has.

    PYTHONPATH=. harness run --adapter harness.adapters.openai_agents:OpenAIAgentsAdapter \\
        --adapter-opt app=examples.openai_agents_refund.careful:APP
"""

from __future__ import annotations

from typing import Any

from harness.adapters.openai_agents import AgentsApp

from ._refund import DELIVERY, REFUND, build_agent, message


def agent() -> Any:
    return build_agent(keyed=True)


APP = AgentsApp(
    name="refund-careful",
    agent=agent,
    workflows=(REFUND,),
    delivery=DELIVERY,
    message=message,
    resend_message=False,
)
