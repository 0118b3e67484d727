"""The flows the reproductions run: a refund that appends a line to a file
(the "payments API"), with a hook to stop or kill its process at a moment."""

from __future__ import annotations

import os
import signal

from prefect import flow, task
from prefect.context import TaskRunContext


def _at(moment: str) -> None:
    """Stop (SIGSTOP) or kill (SIGKILL) this process if ``REPRO_AT`` names ``moment``."""
    action, _, when = os.environ.get("REPRO_AT", "").partition(":")
    if when == moment:
        os.kill(os.getpid(), signal.SIGSTOP if action == "stop" else signal.SIGKILL)


def _refund(ledger: str) -> str:
    with open(ledger, "a") as f:
        f.write(f"refund by pid {os.getpid()}\n")
    _at("after_refund")  # the payments API applied it; the task has not returned
    return "re-1"


@task
def refund(ledger: str) -> str:
    return _refund(ledger)


def by_flow_run(context: TaskRunContext, parameters: dict[str, object]) -> str:
    return f"{context.task_run.flow_run_id}:refund"


@task(persist_result=True, cache_key_fn=by_flow_run)
def cached_refund(ledger: str) -> str:
    return _refund(ledger)


@flow(name="refund")
def refund_flow(ledger: str, cached: bool = False) -> str:
    ref = (cached_refund if cached else refund)(ledger)
    _at("before_completed")  # the task returned; the flow run is not COMPLETED yet
    return ref
