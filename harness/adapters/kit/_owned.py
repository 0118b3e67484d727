"""Owned folders and processes: swept like the harness's own."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..._janitor import kill_recorded, record_process, remove_scratch, scratch_dir
from ...procs._wire import die_with_parent, prctl

_KIND = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
#: prctl's PR_GET_DUMPABLE: a harmless call that loads libc before a fork
_PR_GET_DUMPABLE = 3


class OwnedFolder:
    """A scratch folder this process owns, swept like the harness's own.

    Made by :func:`owned_folder`: ``harness-<kind>-*`` in the temp folder,
    holding a lock file for as long as this process lives. Processes started
    into it with :func:`spawn_owned` are recorded there. :meth:`close` stops
    them and removes the folder; if this process dies first (SIGKILL, the
    OOM killer), the next harness run's janitor finds the lock free, kills
    the recorded processes still alive (by pid and start time, so a reused
    pid is never hit) with their process groups, and removes the folder.
    """

    def __init__(self, path: Path) -> None:
        #: the folder: put the runtime's files here (a server's database)
        self.path = path
        #: every process started into it, in order
        self.processes: list[subprocess.Popen[bytes]] = []

    def close(self, grace: float = 5.0) -> None:
        """SIGTERM each process still running (its whole process group),
        SIGKILL what is left after ``grace`` seconds, reap, and remove the
        folder; idempotent."""
        live = [p for p in self.processes if p.poll() is None]
        for proc in live:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
        for proc in self.processes:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)  # its group's stragglers too
            proc.wait()
        kill_recorded(self.path)
        remove_scratch(self.path)

    def __enter__(self) -> OwnedFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def owned_folder(kind: str = "adapter") -> OwnedFolder:
    """A fresh folder ``harness-<kind>-*`` in the temp folder, owned by this
    process until :meth:`OwnedFolder.close` or its death, then swept by the
    next harness run (``kind``: lowercase letters, digits, ``-``, ``_``)."""
    if not _KIND.match(kind):
        raise ValueError(f"a folder kind is 1-32 of [a-z0-9_-], got {kind!r}")
    return OwnedFolder(scratch_dir(kind))


def spawn_owned(
    argv: Sequence[str],
    *,
    folder: OwnedFolder,
    log: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as a process ``folder`` owns (a runtime's server).

    It runs in a session and process group of its own, with stdin from
    ``/dev/null`` and stdout and stderr appended to ``log`` (default:
    ``<folder>/<program>.log``). It is recorded in the folder (pid and start
    time): :meth:`OwnedFolder.close`, or the next run's janitor if this
    process was killed, kills it with its group. Called from the main
    thread, it also gets a parent-death signal (SIGKILL when this process
    dies, however it dies); Linux ties that signal to the calling *thread*,
    so from another thread it is left out (the thread's end would kill the
    server) and the janitor's sweep is the only backstop. ``env`` replaces
    the environment (default: this process's).
    """
    argv = [os.fspath(a) for a in argv]
    if not argv:
        raise ValueError("spawn_owned needs a program to run")
    log_path = Path(log) if log is not None else folder.path / f"{Path(argv[0]).name}.log"
    parent = os.getpid()
    main = threading.current_thread() is threading.main_thread()
    if main:
        prctl(_PR_GET_DUMPABLE, 0)  # loads libc now: the child must not dlopen after fork

    def in_child() -> None:  # between fork and exec: a prctl and a getppid
        die_with_parent(parent)

    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=in_child if main else None,
        )
    folder.processes.append(proc)
    with contextlib.suppress(ProcessLookupError):  # it already ended: nothing to sweep
        record_process(folder.path, proc.pid, argv)
    return proc
