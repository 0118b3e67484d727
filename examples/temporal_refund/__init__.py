"""The refund workflow as a Temporal application.

``naive.py`` is how it is usually first written: the refund activity carries
no idempotency key. ``careful.py`` keys it by the workflow id and the
activity id. ``reordered.py`` and ``patched.py`` are two ways to ship a
release that notifies the customer before refunding: reordering the
activities (runs the previous release started fail to replay), or behind
``workflow.patched()``. ``test_resilience.py`` is the pytest file a user
adds to CI.
"""
