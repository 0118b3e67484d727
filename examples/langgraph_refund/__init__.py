"""The refund workflow as a LangGraph application, in two versions.

``naive.py`` is how it is usually first written: no idempotency key, the
default ``async`` durability, and a state field renamed between code
versions without a migration. ``correct.py`` survives every fault the
harness throws at it: an idempotency key from the run's stable id, ``sync``
durability, approval through ``interrupt()``, a state version with a
migration step on resume, and a single-writer guard per thread.
``test_resilience.py`` is the pytest file a user adds to CI;
``measure_kill.py`` counts what a kill after the refund does to ``naive.py``.
"""
