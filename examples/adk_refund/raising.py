"""ADK 1: a tool that raised is never run again by a resume.

As ``careful.py``, but a lost reply is raised, leaving its retry to ADK's
resume: ``ResumabilityConfig`` promises to resume an invocation "paused or
failed midway", at least once (a refusal is still retried in the tool).
The payments API applied the refund, then the reply was lost; the resume
calls neither the tool nor the model, and ends the invocation with the call
unanswered: the customer is refunded and never told
(``resume_equivalence``: the run fails where the fault-free run answered).

    harness run --adapter adk --adapter-opt app=examples.adk_refund.raising:APP
"""

from ._agent import build_app, by_session

APP = build_app("refund_raising", by_session, retry_lost=False, answer_once=True)
