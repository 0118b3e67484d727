"""The refund workflow as an OpenAI Agents SDK application, in two versions.

A user asks for a refund; the agent calls its ``refund`` tool, which refunds
through the harness's payments service, then answers. The model is scripted
(``_refund.ScriptedRefundModel``): no network, the same answer to the same
input. ``naive.py`` refunds without an idempotency key and resumes a run by
sending the user's message again; ``careful.py`` keys the refund by the run
id and resumes from the session's history. ``test_resilience.py`` is the
pytest file a user adds to CI.
"""
