"""Prefect 2, without the harness: a stalled process whose run was marked
crashed and retried wakes up, runs the flow again and writes a second
COMPLETED, and the server accepts both.

Process A claims a flow run of a deployment (``Pending``, as a worker does)
and stops (SIGSTOP) before the flow runs -- a process stalled past its
heartbeats (``--before-completed``: it stops after the refund, before the
flow run's COMPLETED instead). What the "detect zombie flows" automation and
a retry do is done here by hand: the run is marked CRASHED, rescheduled
(``AwaitingRetry``) and executed by process B, which refunds and completes
it. Then A is continued, and the refunds are counted.

    python examples/prefect_refund/repro/prefect_2_zombie_completes_twice.py [--before-completed]
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from prefect.client.orchestration import SyncPrefectClient
from prefect.states import AwaitingRetry, Crashed, Pending

from examples.prefect_refund.repro._server import prefect_server
from examples.prefect_refund.repro.common import deployed_run, execute, states


def main() -> int:
    ledger = Path(tempfile.mkdtemp()) / "ledger"
    with prefect_server() as api, SyncPrefectClient(api) as client:
        run_id = deployed_run(client, {"ledger": str(ledger)})
        late = "--before-completed" in sys.argv
        if not late:
            client.set_flow_run_state(run_id, Pending())  # A's claim
        a = execute(run_id, at="stop:before_completed" if late else "stop:before_running")
        _, status = os.waitpid(a.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), status
        client.set_flow_run_state(run_id, Crashed(message="no heartbeat"))  # the automation
        client.set_flow_run_state(run_id, AwaitingRetry())  # the retry
        assert execute(run_id).wait(120) == 0
        print("after the retry:", states(client, run_id))
        os.kill(a.pid, signal.SIGCONT)
        a.wait(120)
        history = states(client, run_id)
        print("after the zombie woke up:", history)
        print("refunds:", len(ledger.read_text().splitlines()))
        if history[-2:] == ["COMPLETED", "COMPLETED"] or history[-3:] == [
            "COMPLETED",
            "RUNNING",
            "COMPLETED",
        ]:
            print("reproduced: the server accepted the zombie's writes after COMPLETED")
            return 0
    print("not reproduced")
    return 1


if __name__ == "__main__":
    sys.exit(main())
