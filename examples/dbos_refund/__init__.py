"""The refund workflow as a DBOS application, in two versions.

``naive.py`` is how it is usually first written: the refund step carries no
idempotency key, and each release runs under an application version of its
own (DBOS's default: a hash of the workflow code). ``careful.py`` keys the
refund by the workflow id and the step's name, retries a lost answer with the
same key, and ships its code change as a DBOS patch under one application
version. ``test_resilience.py`` is the pytest file a user adds to CI.
"""
