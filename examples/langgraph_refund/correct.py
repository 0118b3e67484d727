"""The refund workflow written to survive crashes, races and upgrades.

What makes it correct, each against a bug of ``naive.py``:

* **Idempotency key from stable ids**: the refund's key is
  ``"{thread_id}:refund"``, the same in every process that ever runs the
  node, so the payment service applies a repeated refund once; a timeout is
  retried with the same key.
* **``sync`` durability**: each checkpoint is written before the next step
  starts, so a finished node does not run again after a kill.
* **Approval through ``interrupt()``**, with nothing consequential before it
  in the node (the node re-runs from its start on resume).
* **A state version and a migration step on resume**: version 2 still
  declares the old field ``amount`` (so a version-1 checkpoint keeps it) and
  every node upgrades such a state to ``amount_cents`` before using it.
* **A single writer per thread**: every resume runs under a lock on the
  thread -- a Postgres advisory lock on the checkpointer's database, or an
  ``flock`` on a lock file for SQLite -- and a process that cannot take it
  leaves the thread alone. LangGraph itself takes no such lock.

    PYTHONPATH=. harness run --adapter harness.adapters.langgraph:LangGraphAdapter \\
        --adapter-opt app=examples.langgraph_refund.correct:APP
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator
from typing import Any

from harness.adapters.langgraph import GuardSite, LangGraphApp

from ._refund import DELIVERY, NEEDS_APPROVAL, REFUND, build_graph, start_input


def build(checkpointer: Any, code_version: int) -> Any:
    return build_graph(checkpointer, code_version, idempotent=True, migrate=True)


@contextlib.contextmanager
def single_writer(site: GuardSite) -> Iterator[bool]:
    """Hold the thread's lock for the whole resume; yield False if another has it.

    Either lock dies with its holder (a SIGKILLed process closes its file and
    its database session), so a crash never leaves a thread locked.
    """
    name = f"{site.schema or ''}:{site.thread_id}"
    if site.backend == "postgres":
        import psycopg

        assert site.postgres_url is not None
        with psycopg.connect(site.postgres_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (name,)
            ).fetchone()
            held = bool(row and row[0])
            yield held
        return  # closing the session releases the lock
    digest = hashlib.sha256(name.encode()).hexdigest()[:32]
    fd = os.open(site.lock_dir / f"{digest}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


APP = LangGraphApp(
    name="refund-correct",
    build=build,
    workflows=(REFUND,),
    delivery=DELIVERY,
    needs_approval=NEEDS_APPROVAL,
    versions=(1, 2),
    start_input=start_input,
    durability="sync",
    guard=single_writer,
    # build only compiles: one compiled graph per version, each worker binds its saver
    compile_once=True,
)
