"""The refund workflow as a DBOS application, in three versions.

``naive.py`` is how it is usually first written: the refund step carries no
idempotency key, and each release runs under an application version of its
own (DBOS's default: a hash of the workflow code). ``careful.py`` keys the
refund by the workflow id and the step's name, retries a lost answer with the
same key, runs both releases under one application version, and makes
release 2's change without adding a step, so old and new workers can serve
side by side. ``patched.py`` is careful but ships the change as a new step
behind ``DBOS.patch``: a worker of the previous release that recovers a run
today's worker patched fails it. ``test_resilience.py`` is the pytest file a
user adds to CI.
"""
