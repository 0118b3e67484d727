"""Prefect 3, without the harness: a task cached by flow run skips a refund
that completed when the crashed run is retried, but not one killed mid-task.

Twice, a process executes a flow run whose refund task persists its result
under a cache key from the flow run, and is SIGKILLed: once after the task
returned (before the flow's COMPLETED), once inside the task after the
refund was made. Each run is then marked crashed, rescheduled and executed
again, and the refunds are counted.

    python examples/prefect_refund/repro/prefect_3_cache_is_not_idempotency.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from prefect.client.orchestration import SyncPrefectClient
from prefect.states import AwaitingRetry, Crashed

from examples.prefect_refund.repro._server import prefect_server
from examples.prefect_refund.repro.common import deployed_run, execute


def refunds_after_retry(client: SyncPrefectClient, kill_at: str) -> int:
    ledger = Path(tempfile.mkdtemp()) / "ledger"
    run_id = deployed_run(client, {"ledger": str(ledger), "cached": True})
    assert execute(run_id, at=f"kill:{kill_at}").wait(120) == -9
    client.set_flow_run_state(run_id, Crashed(message="its process exited"))
    client.set_flow_run_state(run_id, AwaitingRetry())
    assert execute(run_id).wait(120) == 0
    return len(ledger.read_text().splitlines())


def main() -> int:
    with prefect_server() as api, SyncPrefectClient(api) as client:
        os.environ["PREFECT_LOCAL_STORAGE_PATH"] = tempfile.mkdtemp()  # the cache, shared
        completed = refunds_after_retry(client, "before_completed")
        mid_task = refunds_after_retry(client, "after_refund")
    print(f"refunds: killed after the task completed: {completed}; killed mid-task: {mid_task}")
    if (completed, mid_task) == (1, 2):
        print("reproduced: the cache skipped the completed refund, not the one killed mid-task")
        return 0
    print("not reproduced")
    return 1


if __name__ == "__main__":
    sys.exit(main())
