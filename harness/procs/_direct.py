"""DirectSpawner: a fresh interpreter per worker, for runtimes that cannot be forked.

It is the slow path (an interpreter start and the imports per worker) and the
baseline of ``benchmarks/kill_cycles.py``. This process is the workers'
parent and reaps them itself, by pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from harness.procs._child import SETUP_FAILED_EXIT
from harness.procs._errors import SpawnerClosed, TargetError
from harness.procs._procs import (
    LogPath,
    _check_spawn_args,
    _child_environ,
    _open_spawners,
    _parent_for_death_signal,
)
from harness.procs._worker import Exit, Worker

# Not ``-m harness.procs._child``: this package already imports _child, and
# runpy warns when a module it is asked to run as __main__ is already loaded.
_CHILD_MAIN = "import sys; from harness.procs._child import main; main(sys.argv)"


class DirectSpawner:
    """Starts each worker as a fresh interpreter (see ``_child.main``).

    Slow (an interpreter start and the imports, per worker) but it forks
    nothing after imports. This process is the workers' parent and reaps them
    itself by pid, so nothing else in it may ``waitpid(-1)`` or ignore SIGCHLD.
    Workers started from the main thread die with this process (Linux).
    """

    def __init__(self, *, start_timeout: float = 60.0) -> None:
        self.start_timeout = start_timeout
        self._cond = threading.Condition()
        self._workers: dict[int, Worker] = {}
        self._closed = False

    def start(self) -> Self:
        """Nothing to start; present for symmetry with :class:`ForkServer`."""
        if self._closed:
            raise SpawnerClosed("this DirectSpawner was closed; create a new one")
        _open_spawners.add(self)
        return self

    def spawn(
        self,
        target: str,
        args: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        log: LogPath | None = None,
        configure: Sequence[str] = (),
    ) -> Worker:
        """Start ``target(args)`` in a new interpreter; return once the target is imported.

        Same contract as :meth:`ForkServer.spawn`; ``env`` is set before the
        interpreter starts, so it is visible at import time too (the
        ``configure`` hooks still run, after the imports, before the target).
        """
        plain_args, plain_env = _check_spawn_args(target, args, env, configure)
        self.start()
        child_env, pythonpath = _child_environ(plain_env)
        err_r, err_w = os.pipe()
        log_fd = -1
        try:
            if log is not None:
                log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            spec = {
                "target": target,
                "args": plain_args,
                "configure": list(configure),
                "sys_path": sys.path,
                "pythonpath": pythonpath,
                "err_fd": 3,
                "parent": _parent_for_death_signal(),
            }
            actions: list[tuple[Any, ...]] = [
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            ]
            if log_fd >= 0:
                actions += [(os.POSIX_SPAWN_DUP2, log_fd, 1), (os.POSIX_SPAWN_DUP2, log_fd, 2)]
            if err_w == 3:
                # dup2(3, 3) would not clear close-on-exec; move it first.
                err_w, old = os.dup(err_w), err_w
                os.close(old)
            actions.append((os.POSIX_SPAWN_DUP2, err_w, 3))
            with self._cond:
                if self._closed:
                    raise SpawnerClosed("spawn() on a closed DirectSpawner; create a new one")
                pid = os.posix_spawn(
                    sys.executable,
                    [sys.executable, "-c", _CHILD_MAIN, json.dumps(spec)],
                    child_env,
                    file_actions=actions,
                    setpgroup=0,
                    setsigmask=(),
                    setsigdef=(signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT),
                )
                worker = Worker(self, pid, target)
                self._workers[pid] = worker
        finally:
            os.close(err_w)
            if log_fd >= 0:
                os.close(log_fd)
        try:
            detail = self._read_until_eof(err_r, worker)
        finally:
            os.close(err_r)
        if detail:
            worker.kill()
            worker.wait(self.start_timeout)
            raise TargetError(target, detail)
        return worker

    def _read_until_eof(self, fd: int, worker: Worker) -> str:
        chunks: list[bytes] = []
        deadline = time.monotonic() + self.start_timeout
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(int(remaining * 1000) + 1):
                worker.kill()
                worker.wait(self.start_timeout)
                raise TargetError(
                    worker.target, f"the worker did not import it within {self.start_timeout:g}s"
                )
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                if worker.poll() == Exit.exited(SETUP_FAILED_EXIT) and not chunks:
                    return "the worker failed before importing it; see its stderr"
                return b"".join(chunks).decode(errors="replace")
            chunks.append(chunk)

    def close(self, timeout: float = 10.0) -> None:
        """SIGKILL and reap every worker still running; idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            for pid in self._workers:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
        _open_spawners.discard(self)
        self._wait_until(lambda: not self._workers, time.monotonic() + timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _signal(self, worker: Worker, signum: int) -> None:
        with self._cond:
            # Under the lock that reaping also takes: the pid is still ours.
            if worker.pid in self._workers:
                with contextlib.suppress(OSError):
                    os.killpg(worker.pid, signum)
                if signum == signal.SIGCONT:
                    # Running from now on: a waiter must not take the stop it
                    # already saw (the 'continued' report comes later) for a new one.
                    worker._on_continued()

    def _refresh(self) -> None:
        flags = os.WNOHANG | os.WUNTRACED | os.WCONTINUED
        with self._cond:
            for pid, worker in list(self._workers.items()):
                while True:
                    try:
                        got, status = os.waitpid(pid, flags)
                    except ChildProcessError:
                        # Someone else reaped it: the status is gone for good.
                        del self._workers[pid]
                        worker._on_lost("something else in this process reaped it")
                        break
                    if got == 0:
                        break
                    if os.WIFSTOPPED(status):
                        worker._on_stopped(os.WSTOPSIG(status))
                    elif os.WIFCONTINUED(status):
                        worker._on_continued()
                    else:
                        del self._workers[pid]
                        with contextlib.suppress(OSError):
                            os.killpg(pid, signal.SIGKILL)  # stragglers in its group
                        worker._on_exit(Exit.from_status(os.waitstatus_to_exitcode(status)))
                        break

    def _wait_until(self, ready: Callable[[], bool], deadline: float | None) -> bool:
        # The parent cannot block in waitpid with a timeout, and a SIGCHLD
        # handler would not do in a threaded harness: poll with backoff.
        pause = 0.0005
        while True:
            self._refresh()
            with self._cond:
                if ready():
                    return True
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            time.sleep(pause if remaining is None else min(pause, remaining))
            pause = min(pause * 2, 0.01)
