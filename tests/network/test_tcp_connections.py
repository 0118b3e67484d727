"""``harness.adapters.tcp_connections``: a process's TCP connections read
from /proc, for adapters whose workers cannot name their own. It agrees
with the connection a paused reference worker names itself."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from harness.adapters import tcp_connections
from harness.adapters.reference import ReferenceAdapter
from harness.model import CrashSpec, RunSpec


def test_a_connection_this_process_holds_is_listed_with_both_ends() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    try:
        port = server.getsockname()[1]
        (mine,) = tcp_connections(os.getpid(), {port}, service="echo")
        assert (mine.local_host, mine.local_port) == client.getsockname()
        assert (mine.remote_host, mine.remote_port) == ("127.0.0.1", port)
        assert mine.service == "echo"
        assert tcp_connections(os.getpid(), {1}) == []  # another server: none
    finally:
        for s in (accepted, client, server):
            s.close()


def test_a_process_that_is_gone_holds_nothing() -> None:
    assert tcp_connections(2**22 + 1) == []


@pytest.mark.postgres
def test_the_connection_a_paused_worker_names_is_one_proc_shows_it_holding(
    postgres_url: str, tmp_path: Path
) -> None:
    adapter = ReferenceAdapter("postgres", postgres_url=postgres_url)
    env = adapter.open(tmp_path / "env", seed=0)
    try:
        env.submit(
            RunSpec(
                run_id="r1",
                tenant="acme",
                workflow="procurement",
                input={"item": "bolts", "quantity": 3},
            )
        )
        crash = CrashSpec(site="checkpoint_stmt_commit", nth=2, action="pause")
        worker = env.start_worker("w1", crash=crash)
        assert worker.wait(120.0).stopped
        (named,) = env.network_endpoints(worker)
        held = tcp_connections(worker.pid, {named.remote_port}, service="postgres")
        assert named in held, (named, held)
        worker.kill()
        worker.wait(30.0)
    finally:
        env.close()
