"""The refund agent written to survive a kill anywhere.

* **An idempotency key from the session** (``"{session_id}:refund"``): the
  call ADK resumes, and a lost reply the tool retries, send the same key;
  the payments API applies the refund once.
* **A failed call is retried in the tool** (refused, lost or down; with that
  key), a few times, before it raises: ADK does not run again a tool that
  raised (``raising.py``).
* **The model is not asked again once it answered**: ADK stores the answer
  and its ``end_of_agent`` marker in two writes, and resumes an invocation
  killed between them by asking the model again (``call_keyed.py``).

    harness run --adapter adk --adapter-opt app=examples.adk_refund.careful:APP
"""

from ._agent import build_app, by_session

APP = build_app("refund_careful", by_session, retry_lost=True, answer_once=True)
