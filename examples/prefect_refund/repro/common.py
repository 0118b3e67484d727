"""What the reproductions share: a deployment, a flow run of it, a process that runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect.client.orchestration import SyncPrefectClient

from examples.prefect_refund.repro.flows import refund_flow

ROOT = Path(__file__).resolve().parents[3]
RUN = """
import os, signal, sys
from prefect.client.orchestration import get_client
from prefect.flow_engine import run_flow
from examples.prefect_refund.repro.flows import refund_flow
with get_client(sync_client=True) as client:
    flow_run = client.read_flow_run(sys.argv[1])
if os.environ["REPRO_AT"] == "stop:before_running":  # claimed, stalled before RUNNING
    os.kill(os.getpid(), signal.SIGSTOP)
run_flow(refund_flow, flow_run=flow_run, return_type="state")
"""


def deployed_run(client: SyncPrefectClient, parameters: dict[str, Any]) -> UUID:
    """A flow run of a deployment of the refund flow, SCHEDULED."""
    flow_id = client.create_flow(refund_flow)
    deployment = client.create_deployment(flow_id, "repro", entrypoint="flows.py:refund_flow")
    return client.create_flow_run_from_deployment(deployment, parameters=parameters).id


def execute(run_id: UUID, at: str = "") -> subprocess.Popen[bytes]:
    """A process that executes the flow run, as a worker's would; ``at``: REPRO_AT."""
    env = {**os.environ, "REPRO_AT": at, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", RUN, str(run_id)], env=env, cwd=ROOT)


def states(client: SyncPrefectClient, run_id: UUID) -> list[str]:
    return [s.type.value for s in client.read_flow_run_states(run_id)]
