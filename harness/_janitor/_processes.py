"""The processes a scratch folder owns: recorded by pid, start time and PID
namespace (:func:`record_process`), so that the one who removes or sweeps
the folder kills them and their process groups, and never a process that
merely reuses a recorded pid (:func:`kill_recorded`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

#: the folder, inside a scratch folder, of its owned processes' records
PROCS_NAME = ".harness-procs"
#: seconds a sweep waits for the processes it killed to die
KILL_WAIT = 5.0


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, from
    ``/proc/<pid>/stat``), or None if there is no such process. With the pid,
    it names one process for good: a reused pid has a later start."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from
    # the last ")". starttime is field 22, the 20th after it.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[19])


def _living_in(groups: set[int]) -> bool:
    """Whether a process of one of the process ``groups`` is alive (not a
    zombie no one reaped yet)."""
    pids = [name for name in os.listdir("/proc") if name.isdigit()]
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        state, _ppid, pgrp = stat[stat.rindex(b")") + 2 :].split()[:3]
        if int(pgrp) in groups and state != b"Z":
            return True
    return False


def record_process(folder: Path, pid: int, argv: list[str] | None = None) -> Path:
    """Record ``pid`` (a process group leader, as ``start_new_session``
    makes it) as owned by the scratch folder ``folder``: a sweeper that
    finds the folder's owner dead kills it and its group (:func:`kill_recorded`)."""
    start = process_start(pid)
    if start is None:
        raise ProcessLookupError(f"no process {pid} to record")
    records = folder / PROCS_NAME
    records.mkdir(exist_ok=True)
    body = {"pid": pid, "start": start, "pidns": _pid_namespace(), "argv": argv or []}
    tmp = records / f"{pid}.json.tmp"
    tmp.write_text(json.dumps(body), encoding="utf-8")
    final = records / f"{pid}.json"
    os.replace(tmp, final)
    return final


def _kill(record: dict[str, Any]) -> int | None:
    """SIGKILL the recorded process and its process group, if it is still
    the process recorded; the group to wait for, or None."""
    pid, start = int(record["pid"]), int(record["start"])
    if record.get("pidns") != _pid_namespace():
        # Another PID namespace's pid names another process here. Its
        # parent-death signal killed it; nothing more can be done from here.
        return None
    now = process_start(pid)
    if now is not None and now != start:
        return None  # the pid was reused: not ours (and so neither is its group)
    if now is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    # Its group outlives it (a server's own children): while a group has a
    # member, Linux reuses neither its number as a pid nor as a group id.
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        return None if now is None else pid
    return pid


def kill_recorded(folder: Path) -> list[int]:
    """Kill every process recorded in ``folder`` (:func:`record_process`)
    that is still the process recorded, with its process group; wait up to
    :data:`KILL_WAIT` seconds for them to die, drop the records, and return
    the process groups killed."""
    records = folder / PROCS_NAME
    try:
        files = sorted(records.glob("*.json"))
    except OSError:
        return []
    groups: set[int] = set()
    for path in files:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        group = _kill(record)
        if group is not None:
            groups.add(group)
        path.unlink(missing_ok=True)
    deadline = time.monotonic() + KILL_WAIT
    while groups and time.monotonic() < deadline and _living_in(groups):
        time.sleep(0.02)
    return sorted(groups)
