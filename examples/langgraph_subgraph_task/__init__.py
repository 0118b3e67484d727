"""A subgraph that calls a side-effecting ``@task`` before ``interrupt()``.

Hiring: a ``screening`` subgraph buys a background check (a ``@task`` that
pays the provider) and then waits for the manager's decision. Upstream issue
#6792 reports that resuming such a subgraph runs its pre-interrupt tasks
again; on langgraph 1.2.24 it does not (``measure_replay.py``: each task
runs once when a new process resumes, on SQLite and on Postgres). What
remains is the crash window inside the task: ``naive.py`` buys the check
without an idempotency key, ``correct.py`` with one from the thread id.
"""
