"""A multi-round review as a LangGraph application: ``interrupt()`` inside a loop.

Each round bills a reviewer's fee and then waits for the reviewer's verdict.
``naive.py`` bills right before the ``interrupt()``, in the same node, with
no idempotency key: LangGraph re-runs the node from its start at every
resume, so earlier rounds are billed again (upstream issue #7780).
``correct.py`` bills in a node of its own, with a key from the thread id and
the round. ``measure_replay.py`` counts the fees each version bills when a
run is resumed round after round, without the harness.
"""
