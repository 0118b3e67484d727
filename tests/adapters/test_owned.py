"""Folders and processes an adapter owns (issue 18): a runtime's server
started by ``spawn_owned`` into an ``owned_folder`` dies with the harness,
and what survives a SIGKILL of the harness (its process group) is killed by
the next run's sweep -- never a process that merely reuses a recorded pid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness import _janitor
from harness.adapters.kit import owned_folder, spawn_owned

OWNER = """
import sys
from pathlib import Path
from harness.adapters.kit import owned_folder, spawn_owned

folder = owned_folder("server")
direct = spawn_owned(["sleep", "600"], folder=folder)
# A server with a child of its own: the child is in the server's group.
shell = spawn_owned(
    ["sh", "-c", "sleep 600 & echo $! > grandchild; wait"], folder=folder, cwd=folder.path
)
grandchild = folder.path / "grandchild"
while not grandchild.exists() or not grandchild.read_text().strip():
    pass
print(folder.path, direct.pid, shell.pid, grandchild.read_text().strip(), flush=True)
sys.stdin.readline()
"""


def _gone(pid: int) -> bool:
    """Ended: no such process, or a zombie no one reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2 :].split()[0] == b"Z"


def _ends(pid: int, within: float = 30.0) -> bool:
    """Whether ``pid`` ends within ``within`` seconds (a signal is delivered
    at once, a death takes a moment)."""
    deadline = time.monotonic() + within
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "600"], start_new_session=True)


def test_after_a_sigkill_of_the_owner_the_sweep_kills_what_it_left(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert owner.stdout is not None
    path, *pids = owner.stdout.readline().split()
    folder = Path(path)
    direct, shell, grandchild = (int(p) for p in pids)
    assert folder.parent == tmp_path and folder.name.startswith("harness-server-")
    assert _janitor.sweep_folders(tmp_path) == [], "a live owner's folder is kept"
    assert not _gone(direct) and not _gone(grandchild)

    owner.send_signal(signal.SIGKILL)  # the owner only: its children have sessions of their own
    owner.wait(30)
    owner.stdout.close()
    assert owner.stdin is not None
    owner.stdin.close()
    # The parent-death signal killed the processes it started; the server's
    # own child was out of its reach and outlived the owner.
    assert _ends(direct) and _ends(shell)
    assert not _gone(grandchild), "the grandchild is left for the sweep"

    assert _janitor.sweep_folders(tmp_path) == [folder.name]
    assert not folder.exists()
    assert _gone(grandchild), "the sweep waits for what it killed"


def test_the_sweep_kills_only_the_process_recorded(tmp_path: Path) -> None:
    """A record names a process by pid, start time and PID namespace: a
    process with that pid that started at another time (a reused pid), or a
    pid of another namespace, is left alone."""
    ours, reused, foreign = _sleeper(), _sleeper(), _sleeper()
    try:
        folder = _janitor.scratch_dir("server", root=tmp_path)
        os.close(_janitor._held.pop(folder))  # its owner is dead: the lock is free
        for proc in (ours, reused, foreign):
            _janitor.record_process(folder, proc.pid, ["sleep", "600"])
        records = folder / _janitor.PROCS_NAME
        for proc, change in ((reused, {"start": -1}), (foreign, {"pidns": "pid:[1]"})):
            path = records / f"{proc.pid}.json"
            path.write_text(json.dumps({**json.loads(path.read_text()), **change}))

        assert _janitor.sweep_folders(tmp_path) == [folder.name]
        assert not folder.exists()
        assert ours.wait(10) == -signal.SIGKILL
        assert reused.poll() is None and foreign.poll() is None
    finally:
        for proc in (ours, reused, foreign):
            proc.kill()
            proc.wait()


def test_close_stops_the_owned_processes_and_removes_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = owned_folder("server")
    try:
        server = spawn_owned(["sh", "-c", "echo started; exec sleep 600"], folder=folder)
        assert folder.path.parent == tmp_path
        assert (folder.path / _janitor.PROCS_NAME / f"{server.pid}.json").is_file()
        assert _janitor.sweep_folders(tmp_path) == [], "its owner is alive"
        while b"started" not in (folder.path / "sh.log").read_bytes():
            time.sleep(0.02)
    finally:
        folder.close()
    assert server.returncode == -signal.SIGTERM, "asked to stop first"
    assert not folder.path.exists()
    folder.close()  # idempotent
