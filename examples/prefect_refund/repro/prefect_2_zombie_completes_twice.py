"""Prefect 2, without the harness: a stalled process whose run was marked
crashed and retried wakes up and writes a second COMPLETED, which the server
accepts.

Process A executes a flow run of a deployment and stops (SIGSTOP) after the
refund, before the flow run's COMPLETED -- a process stalled past its
heartbeats. What the "detect zombie flows" automation and a retry do is done
here by hand: the run is marked CRASHED, rescheduled (``AwaitingRetry``) and
executed by process B, which refunds and completes it. Then A is continued.

    python examples/prefect_refund/repro/prefect_2_zombie_completes_twice.py
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from prefect.client.orchestration import SyncPrefectClient
from prefect.states import AwaitingRetry, Crashed

from examples.prefect_refund.repro._server import prefect_server
from examples.prefect_refund.repro.common import deployed_run, execute, states


def main() -> int:
    ledger = Path(tempfile.mkdtemp()) / "ledger"
    with prefect_server() as api, SyncPrefectClient(api) as client:
        run_id = deployed_run(client, {"ledger": str(ledger)})
        a = execute(run_id, at="stop:before_completed")
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
        if history[-2:] == ["COMPLETED", "COMPLETED"]:
            print("reproduced: the server accepted a second COMPLETED from the zombie")
            return 0
    print("not reproduced")
    return 1


if __name__ == "__main__":
    sys.exit(main())
