"""The LangGraph adapter's run registry keeps one SQLite connection per
process (issue 33: one per call was a fifth of the harness's time), and a
forked process opens its own, leaving its parent's alone."""

from __future__ import annotations

import os
from pathlib import Path

from harness.adapters.langgraph._store import Registry, RunRow


def open_fds(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path``."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == str(path))


def row(run_id: str) -> RunRow:
    return RunRow(run_id, "acme", "refund", {"amount": 1}, None)


def test_calls_share_one_connection_until_closed(tmp_path: Path) -> None:
    path = (tmp_path / "runs.db").resolve()
    registry = Registry(path).create()
    for i in range(5):
        registry.add_run(row(f"r{i}"))
        assert registry.deliver(f"m{i}", f"r{i}", "a", {"decision": "approve"})
        assert registry.decision(f"r{i}", "a") == {"decision": "approve"}
    assert [r.run_id for r in registry.runs()] == [f"r{i}" for i in range(5)]
    assert open_fds(path) == 1  # one connection, kept open
    registry.close()
    assert open_fds(path) == 0
    assert len(registry.runs()) == 5  # a call after close opens a new one
    registry.close()


def test_a_forked_process_opens_its_own_connection(tmp_path: Path) -> None:
    path = (tmp_path / "runs.db").resolve()
    registry = Registry(path).create()
    registry.add_run(row("parent"))
    pid = os.fork()
    if pid == 0:  # the child: writes through a connection of its own
        code = 1
        try:
            registry.add_run(row("child"))
            ok = [r.run_id for r in registry.runs()] == ["parent", "child"]
            # the parent's inherited descriptor, and the child's own
            code = 0 if ok and open_fds(path) == 2 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # the parent's connection was neither used nor closed by the child
    assert [r.run_id for r in registry.runs()] == ["parent", "child"]
    registry.add_run(row("after"))
    assert open_fds(path) == 1
    registry.close()
