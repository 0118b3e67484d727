"""A map-reduce refund as a LangGraph application, in two versions.

A node fans out one ``Send`` branch per order line, each branch refunds its
line at the payment service, and a reduce node totals the refunds and
notifies the customer. ``naive.py`` gives each branch a fresh idempotency key
per call (a key, but not one that survives a resume) and runs with the
default ``async`` durability; ``correct.py`` keys each line's refund by
thread id and line, runs with ``sync`` durability and one writer per thread.
``measure_kill.py`` counts, per line, what a kill at each effect does.
"""
