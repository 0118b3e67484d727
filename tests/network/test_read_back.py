"""Below the harness: a worker whose checkpoint COMMIT commits but whose
acknowledgement is lost finds it committed by reading back, and carries on
under the same claim -- no second claim, no redone step."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from harness import _netfilter
from harness.adapters.reference._deployment import Deployment

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("netfilter")]

PROCUREMENT = {"item": "bolts", "quantity": 3}


def _final(d: Deployment) -> tuple[str, int, int]:
    run = d.snapshot("r1").run
    return run.status.value, run.state_version, run.fencing_token


def _lost_ack_run(d: Deployment, crash: str | None) -> None:
    proc = d.start_worker("w1", crash=crash)
    try:
        if crash is not None:
            _, status = os.waitpid(proc.pid, os.WUNTRACED)
            assert os.WIFSTOPPED(status), "the worker never reached its pause"
            (word,) = [w for w in d.paused_at(proc.pid) if w.startswith("tcp=")]
            _, local_host, local_port, server_host, server_port = word[4:].split(",")
            rule = _netfilter.Rule(
                "drop_to_client",
                client_port=int(local_port),
                server_port=int(server_port),
                client_host=local_host,
                server_host=server_host,
            )
            with _netfilter.owner().holding(rule):
                os.kill(proc.pid, signal.SIGCONT)
                assert proc.wait(120) == 0
        else:
            assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()


@pytest.mark.parametrize("nth", [1, 2])
def test_a_commit_whose_ack_is_lost_is_found_committed_and_costs_no_second_claim(
    postgres_url: str, tmp_path: Path, nth: int
) -> None:
    finals = []
    for name, crash in (("plain", None), ("lost", f"checkpoint_stmt_commit=pause@{nth}")):
        with Deployment(tmp_path / name, backend="postgres", postgres_url=postgres_url) as d:
            d.submit("procurement", PROCUREMENT, tenant="acme", run_id="r1")
            _lost_ack_run(d, crash)
            finals.append(_final(d))
    plain, lost = finals
    # Same status and version; the same fencing token: the worker never
    # dropped the run to claim it again.
    assert lost == plain, (plain, lost)
