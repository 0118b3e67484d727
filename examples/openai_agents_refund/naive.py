"""The refund agent as it is usually first wired to a job queue. The harness finds two bugs.

* The refund carries **no idempotency key**: a worker killed after the
  payment service applied it leaves the session without the tool's output
  (the SDK saves a response with its tools' outputs once they are done), so
  the turn runs again and refunds twice (``exactly_once_effects``).
* A resumed run is retried **with the same user message**, as the job was
  queued: the session then holds the message twice (``state_equivalence``),
  and the model sees it twice (``context_rebuild``).

    PYTHONPATH=. harness run --adapter harness.adapters.openai_agents:OpenAIAgentsAdapter \\
        --adapter-opt app=examples.openai_agents_refund.naive:APP
"""

from __future__ import annotations

from typing import Any

from harness.adapters.openai_agents import AgentsApp

from ._refund import DELIVERY, REFUND, build_agent, message


def agent() -> Any:
    return build_agent(keyed=False)


APP = AgentsApp(
    name="refund-naive",
    agent=agent,
    workflows=(REFUND,),
    delivery=DELIVERY,
    message=message,
    resend_message=True,
)
