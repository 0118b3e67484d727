"""Prefect 1, without the harness: a flow run whose process is SIGKILLed
stays RUNNING, and Prefect refuses to reschedule it without a deployment.

A child process runs a flow (created by calling it, as a script does) and is
SIGKILLed after its task's work; the run's state is read at 0, 30 and 60 s
(``--quick``: 0 and 5 s); then the run is marked crashed, as a zombie
automation would, and its retry (``AwaitingRetry``) is proposed, and refused.

    python examples/prefect_refund/repro/prefect_1_killed_run_stays_running.py [--quick]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from prefect.client.orchestration import SyncPrefectClient
from prefect.states import AwaitingRetry, Crashed

from examples.prefect_refund.repro._server import prefect_server
from examples.prefect_refund.repro.common import ROOT

CALL = """
import sys
from examples.prefect_refund.repro.flows import refund_flow
refund_flow(sys.argv[1])
"""


def main() -> int:
    ledger = Path(tempfile.mkdtemp()) / "ledger"
    with prefect_server() as api, SyncPrefectClient(api) as client:
        env = {"REPRO_AT": "kill:after_refund", "PYTHONPATH": str(ROOT)}
        child = subprocess.run([sys.executable, "-c", CALL, str(ledger)], env={**os.environ, **env})
        assert child.returncode == -9, child.returncode
        (run,) = client.read_flow_runs()
        seen = []
        for at in (0, 5) if "--quick" in sys.argv else (0, 30, 60):
            time.sleep(at - (seen[-1][0] if seen else 0))
            seen.append((at, client.read_flow_run(run.id).state_type.value))
        print("state after the kill:", ", ".join(f"{s} at {t} s" for t, s in seen))
        client.set_flow_run_state(run.id, Crashed(message="its process was killed"))
        retry = client.set_flow_run_state(run.id, AwaitingRetry())  # a retry, once crashed
        print(f"retry: {retry.status.value}: {getattr(retry.details, 'reason', '')}")
        if all(s == "RUNNING" for _, s in seen) and retry.status.value == "ABORT":
            print("reproduced: the killed run stays RUNNING and cannot be rescheduled")
            return 0
    print("not reproduced")
    return 1


if __name__ == "__main__":
    sys.exit(main())
