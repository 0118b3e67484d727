"""ADK 2: the answer and ``end_of_agent`` are two commits.

As ``careful.py``, but the key is the model's function call id (which ADK
keeps when it resumes a call a crash interrupted) and the model is asked
whenever ADK says so. A worker killed after ADK stored the model's answer
and before it stored ``end_of_agent`` leaves the invocation open; the resume
asks the model again, on a conversation that ends in its own answer. A
model that acts on the request calls the tool again, with a new call id: a
second refund (``exactly_once_effects``).

    harness run --adapter adk --adapter-opt app=examples.adk_refund.call_keyed:APP
"""

from ._agent import build_app, by_call

APP = build_app("refund_call_keyed", by_call, retry_lost=True, answer_once=False)
