"""``naive.py`` with a worker that SIGKILLs itself at an exact point of a checkpoint write.

Two applications for the tests of issue 17 (a uniquely named module, loaded
by the fork servers like any application):

* ``MID_BATCH``: dies right before the ``branch:to:refund`` row of the
  approve task's batch of writes is inserted, after its ``decision`` and
  ``approvals`` rows (SQLite only: the point is found with the connection's
  trace callback, which SQLite calls before each row of an ``executemany``).
* ``BEFORE_CHECKPOINT``: dies right before the first checkpoint written
  after the approve task's writes were saved, so the last checkpoint holds a
  finished task whose next checkpoint never came (any saver: the saver's
  ``put`` is wrapped).

Only worker ``w1`` dies (``MID_BATCH``: the first worker to get there, a
marker beside the database says so, and that is ``w1``), and never the
process that imported this module (the harness's own observer builds the
graph too); workers are forked after the fork server imported it. In ``w1``
the checkpoint after the approve step waits for the approve task's writes,
so that the kill always finds that checkpoint unwritten.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from pathlib import Path
from typing import Any

from examples.langgraph_refund import naive
from harness.adapters.langgraph import LangGraphApp

#: The worker that dies.
VICTIM = "w1"
#: Seconds the victim's checkpoint waits for the approve task's writes.
WAIT = 30.0
_IMPORTED_IN = os.getpid()


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _is_approve_batch(writes: Any) -> bool:
    return any(channel == "branch:to:refund" for channel, _ in writes)


def _order_writes_first(checkpointer: Any, *, die_before_checkpoint: bool) -> None:
    """In the victim, hold the checkpoint after the approve step until the
    approve task's writes are saved (then die there if asked).

    LangGraph saves a task's writes and the next checkpoint on background
    threads, in either order; the next checkpoint makes the writes moot, so
    a kill among the writes matters only when it comes first, as it usually
    does. This picks that order every time.
    """
    put, put_writes = checkpointer.put, checkpointer.put_writes
    saved = threading.Event()

    def put_writes_and_tell(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        put_writes(config, writes, task_id, task_path)
        if _is_approve_batch(writes):
            saved.set()

    def put_after_writes(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        # The run's configurable keys (the adapter's worker_id among them)
        # come with every checkpoint's config.
        if config["configurable"].get("worker_id") == VICTIM:
            if not saved.wait(WAIT):
                raise TimeoutError(f"the approve task's writes were not saved in {WAIT} s")
            if die_before_checkpoint:
                _die()
        return put(config, checkpoint, metadata, new_versions)

    checkpointer.put_writes = put_writes_and_tell
    checkpointer.put = put_after_writes


def _build_mid_batch(checkpointer: Any, code_version: int) -> Any:
    graph = naive.build(checkpointer, code_version)
    if os.getpid() == _IMPORTED_IN:
        return graph
    _order_writes_first(checkpointer, die_before_checkpoint=False)
    conn: sqlite3.Connection = checkpointer.conn
    db = next(row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main")
    marker = Path(f"{db}.killed-mid-batch")

    def trace(sql: str) -> None:
        # Called with the statement's SQL and its bound values expanded,
        # before it runs: the channel name is one of them.
        row = "INSERT" in sql and "INTO writes" in sql and "'branch:to:refund'" in sql
        if row and not marker.exists():
            marker.touch()
            _die()

    conn.set_trace_callback(trace)
    return graph


def _build_before_checkpoint(checkpointer: Any, code_version: int) -> Any:
    graph = naive.build(checkpointer, code_version)
    if os.getpid() != _IMPORTED_IN:
        _order_writes_first(checkpointer, die_before_checkpoint=True)
    return graph


def _like_naive(name: str, build: Any) -> LangGraphApp:
    app = naive.APP
    return LangGraphApp(
        name=name,
        build=build,
        workflows=app.workflows,
        delivery=app.delivery,
        needs_approval=app.needs_approval,
        versions=app.versions,
        start_input=app.start_input,
        durability=app.durability,
    )


MID_BATCH = _like_naive("refund-naive-killed-mid-batch", _build_mid_batch)
BEFORE_CHECKPOINT = _like_naive("refund-naive-killed-before-checkpoint", _build_before_checkpoint)
