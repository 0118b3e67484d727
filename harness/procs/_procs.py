"""Spawners: start real worker processes that are cheap to kill, stop and continue.

:class:`ForkServer` (here) imports the heavy modules once in a helper process
and forks the workers from it, so a worker costs a fork, not an interpreter
start. :class:`~harness.procs.DirectSpawner` (``_direct``) starts a fresh
interpreter per worker. Both satisfy :class:`Spawner` and give a target the
same life (see ``_child``).

No worker outlives its spawner: ``close()`` (also on ``with`` exit and at
interpreter exit) kills them all; a fork server also kills them when the
harness dies, however it dies (see ``_forkserver``).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from harness.procs._child import target_format_problem
from harness.procs._errors import PreloadError, SpawnerClosed, SpawnerLost, TargetError
from harness.procs._wire import FrameReader, encode
from harness.procs._worker import Exit, Worker

LogPath = str | os.PathLike[str]

# The directory that holds the ``harness`` package: child interpreters need it
# on PYTHONPATH to find ``-m harness.procs...`` even when not installed.
_ROOT = str(Path(__file__).resolve().parents[2])


class Spawner(Protocol):
    """Starts workers; a context manager whose exit kills every worker still running."""

    def spawn(
        self,
        target: str,
        args: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        log: LogPath | None = None,
        configure: Sequence[str] = (),
    ) -> Worker:
        """Start ``target(args)`` in a new process and return its handle;
        ``configure``: ``"module:function"`` hooks the worker calls (no
        arguments) after ``env`` is set, before the target."""
        ...

    def close(self, timeout: float = 10.0) -> None:
        """Kill and reap every worker, release all resources; idempotent."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None: ...


def _check_spawn_args(
    target: str,
    args: Mapping[str, Any] | None,
    env: Mapping[str, str] | None,
    configure: Sequence[str] = (),
) -> tuple[dict[str, Any], dict[str, str]]:
    if isinstance(configure, str):
        raise TypeError(f"configure must be a sequence of targets, not the string {configure!r}")
    for name in (target, *configure):
        problem = target_format_problem(name)
        if problem is not None:
            raise TargetError(str(name), problem)
    plain_args = dict(args or {})
    try:
        json.dumps(plain_args)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"args for {target} must be JSON-serialisable: {exc}") from exc
    plain_env = dict(env or {})
    bad = {k: v for k, v in plain_env.items() if not (isinstance(k, str) and isinstance(v, str))}
    if bad:
        raise TypeError(f"env for {target} must map str to str; these do not: {bad!r}")
    return plain_args, plain_env


def _child_environ(overrides: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """The environment for a child interpreter, and the PYTHONPATH to restore in it."""
    env = {**os.environ, **overrides}
    original = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([_ROOT, original] if original else [_ROOT])
    return env, original


def _parent_for_death_signal() -> int | None:
    # PR_SET_PDEATHSIG fires when the creating *thread* exits. Only the main
    # thread is known to live as long as the process.
    return os.getpid() if threading.current_thread() is threading.main_thread() else None


class _Closable(Protocol):
    def close(self, timeout: float = 10.0) -> None: ...


_open_spawners: weakref.WeakSet[_Closable] = weakref.WeakSet()


@atexit.register
def _close_all_spawners() -> None:
    for spawner in list(_open_spawners):
        spawner.close(timeout=2.0)


class ForkServer:
    """A preloading fork server; each :meth:`spawn` forks one worker from it.

    ``preload`` names modules imported once in the server, before any fork;
    they must not start threads (checked) and should not open connections,
    which every worker would then share. A target's module is imported in
    the server on first use, so it is preloaded from then on.

    The server keeps ``spares`` workers forked ahead of time, each waiting
    for its target, so that :meth:`spawn` does not wait for a fork. A spare
    is a sleeping process (shared memory, one pipe); ``spares=0`` forks on
    demand.

    Workers get the harness's environment as of :meth:`start`, updated with
    the spawn's ``env`` just before the target is called (after imports:
    code that reads the environment at import time sees the server's).

    ``warm`` lists ``("module:function", args)`` calls the server makes once,
    after the preloads and before its first fork, with the JSON-able
    ``args`` dict: what every worker would otherwise build for itself (an
    application's agent or graph) is built there, kept in its module, and
    inherited by each fork. Like a preload, a call must start no thread
    (checked) and open no connection; one that raises is a
    :class:`PreloadError` naming it.
    """

    def __init__(
        self,
        preload: Iterable[str] = (),
        *,
        spares: int = 2,
        start_timeout: float = 60.0,
        warm: Iterable[tuple[str, Mapping[str, Any]]] = (),
    ) -> None:
        self.warm = [(target, _check_spawn_args(target, args, None)[0]) for target, args in warm]
        self.preload = list(preload)
        if not isinstance(spares, int) or spares < 0:
            raise ValueError(f"spares must be an int >= 0, got {spares!r}")
        self.spares = spares
        bad = [m for m in self.preload if not isinstance(m, str) or not m.strip()]
        if bad:
            raise TypeError(f"preload must be module names, got {bad!r}")
        self.start_timeout = start_timeout
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._reading = False
        self._frames = FrameReader()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._server_pid: int | None = None
        self._preload_error: PreloadError | None = None
        self._gone = False  # the server said bye or its socket hit EOF
        self._closed = False
        self._next_id = 0
        self._pending: dict[int, str] = {}
        self._replies: dict[int, Worker | BaseException] = {}
        self._workers: dict[int, Worker] = {}

    @property
    def pid(self) -> int | None:
        """The server's process id once started."""
        return self._server_pid

    def start(self) -> Self:
        """Start the server and wait until the preloads are imported; idempotent.

        Raises :class:`PreloadError` if a preload fails, :class:`SpawnerLost`
        if the server does not come up within ``start_timeout``.
        """
        if self._closed:
            raise SpawnerClosed("this ForkServer was closed; create a new one")
        if self._proc is not None:
            return self
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env, pythonpath = _child_environ({})
        config = {
            "fd": theirs.fileno(),
            "preload": self.preload,
            "warm": self.warm,
            "pool_size": self.spares,
            "sys_path": sys.path,
            "pythonpath": pythonpath,
            "parent": _parent_for_death_signal(),
        }
        # The server starts with SIGINT blocked (the mask is inherited) and
        # ignores it once it runs (its harness decides when it stops): a
        # terminal's Ctrl-C, which reaches the harness's whole process group,
        # must not print a KeyboardInterrupt traceback from the server's
        # imports. Held here for the few milliseconds of the start.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "harness.procs._forkserver", json.dumps(config)],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            theirs.close()
        self._sock = ours
        _open_spawners.add(self)
        ready = self._wait_until(
            lambda: self._server_pid is not None or self._preload_error is not None or self._gone,
            time.monotonic() + self.start_timeout,
            raise_if_gone=False,
        )
        if self._preload_error is not None:
            error = self._preload_error
            self.close()
            raise error
        if not ready or self._server_pid is None:
            self.close(timeout=1.0)
            raise SpawnerLost(
                f"the fork server did not start within {self.start_timeout:g}s "
                f"(exit status {self._proc.returncode}); its stderr above says why"
            )
        return self

    def spawn(
        self,
        target: str,
        args: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        log: LogPath | None = None,
        configure: Sequence[str] = (),
    ) -> Worker:
        """Fork a worker that calls ``target(args)``; return once it exists.

        ``target`` is ``"package.module:function"``; ``args`` must be JSON-able;
        ``env`` is applied in the worker before the call; stdout and stderr go
        to ``log`` (appended) or else to the harness's. ``configure`` names
        hooks (``"module:function"``, called with no arguments) the worker
        calls after ``env`` is applied and before the target: for a framework
        that read its settings when the server imported it, the call that
        makes it read them again. Raises :class:`TargetError` if the target
        or a hook cannot be imported (no worker is started), ``OSError`` if
        ``log`` cannot be opened.
        """
        plain_args, plain_env = _check_spawn_args(target, args, env, configure)
        if self._proc is None:
            self.start()
        with self._cond:
            if self._closed:
                raise SpawnerClosed("spawn() on a closed ForkServer; create a new one")
            rid = self._next_id
            self._next_id += 1
            self._pending[rid] = target
        request = {
            "op": "spawn",
            "id": rid,
            "target": target,
            "args": plain_args,
            "env": plain_env,
            "log": None if log is None else os.fspath(log),
            "configure": list(configure),
        }
        try:
            self._send(request)
        except SpawnerLost:
            with self._cond:
                self._pending.pop(rid, None)
            raise
        self._wait_until(lambda: rid in self._replies, None)
        with self._cond:
            reply = self._replies.pop(rid)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def close(self, timeout: float = 10.0) -> None:
        """Kill every worker, stop the server and wait for it; idempotent.

        Workers still running get :class:`Exit` ``killed(SIGKILL)``.
        """
        with self._cond:
            if self._closed:
                return
            self._closed = True
        _open_spawners.discard(self)
        deadline = time.monotonic() + timeout
        proc, sock = self._proc, self._sock
        if sock is not None and not self._gone:
            try:
                self._send({"op": "shutdown"})
                self._wait_until(lambda: self._gone, deadline, raise_if_gone=False)
            except (OSError, SpawnerLost):
                pass
        if proc is not None:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                # Its workers die with it (parent-death signal).
                proc.kill()
                proc.wait()
        if sock is not None:
            sock.close()
        with self._cond:
            self._on_gone()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the channel ---------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        sock = self._sock
        if sock is None or self._gone:
            raise SpawnerLost("the fork server is gone; create a new ForkServer")
        try:
            with self._send_lock:
                sock.sendall(encode(message))
        except OSError as exc:
            raise SpawnerLost(f"lost the fork server while sending: {exc}") from exc

    def _signal(self, worker: Worker, signum: int) -> None:
        # Sent from here, not through the server: the kill lands at once even
        # while the server is busy forking (benchmarks/kill_cycles.py: a
        # third less kill-to-exit latency). A pid is only reusable after the
        # server reaps it, and the reap is reported to us: so drain pending
        # reports first and signal only a worker not known to have ended.
        # What remains is the instant between the server's reap and our drain,
        # in which the kernel would have to hand out this very pid again
        # (it allocates pids in sequence, so only after wrapping pid_max).
        self._refresh()
        with self._cond:
            if worker.exit is None and worker.pid in self._workers:
                with contextlib.suppress(OSError):
                    os.killpg(worker.pid, signum)
                if signum == signal.SIGCONT:
                    # Running from now on: a waiter must not take the stop it
                    # already saw (the 'continued' report comes later) for a new one.
                    worker._on_continued()

    def _refresh(self) -> None:
        self._wait_until(lambda: False, time.monotonic(), raise_if_gone=False)

    def _wait_until(
        self, ready: Callable[[], bool], deadline: float | None, *, raise_if_gone: bool = True
    ) -> bool:
        """Pump messages until ``ready()`` holds (True) or ``deadline`` passes (False).

        Leader/follower: one waiting thread reads the socket at a time and
        dispatches for everyone, the others sleep on the condition. This costs
        no extra thread and no thread hop per message.
        """
        with self._cond:
            while True:
                if ready():
                    return True
                if self._gone:
                    if raise_if_gone:
                        raise SpawnerLost("the fork server is gone; create a new ForkServer")
                    return False
                remaining = None if deadline is None else deadline - time.monotonic()
                if self._reading:
                    if remaining is not None and remaining <= 0:
                        return False
                    self._cond.wait(remaining)
                    continue
                self._reading = True
                try:
                    self._cond.release()
                    try:
                        messages = self._read(remaining)
                    finally:
                        self._cond.acquire()
                    for message in messages:
                        self._dispatch(message)
                finally:
                    self._reading = False
                    self._cond.notify_all()
                if remaining is not None and remaining <= 0 and not ready():
                    return False

    def _read(self, timeout: float | None) -> list[dict[str, Any]]:
        sock = self._sock
        assert sock is not None
        if timeout is None or timeout > 0:
            # poll, not select: the harness may hold more than FD_SETSIZE fds.
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            if not poller.poll(None if timeout is None else max(1, int(timeout * 1000 + 0.999))):
                return []
        data = self._recv_nowait(sock)
        if data is None:
            return []
        if not data:
            return [{"op": "_eof"}]
        return self._frames.feed(data)

    @staticmethod
    def _recv_nowait(sock: socket.socket) -> bytes | None:
        try:
            return sock.recv(1 << 16, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def _dispatch(self, message: dict[str, Any]) -> None:
        op = message["op"]
        if op == "exit":
            worker = self._workers.pop(message["pid"], None)
            if worker is not None:
                worker._on_exit(Exit.from_status(message["status"]))
        elif op == "stopped":
            if (worker := self._workers.get(message["pid"])) is not None:
                worker._on_stopped(message["sig"])
        elif op == "continued":
            if (worker := self._workers.get(message["pid"])) is not None:
                worker._on_continued()
        elif op == "spawned":
            target = self._pending.pop(message["id"])
            worker = Worker(self, message["pid"], target)
            self._workers[worker.pid] = worker
            self._replies[message["id"]] = worker
        elif op == "failed":
            target = self._pending.pop(message["id"])
            self._replies[message["id"]] = (
                OSError(message["errno"], message["detail"], target)
                if "errno" in message
                else TargetError(target, message["detail"])
            )
        elif op == "ready":
            self._server_pid = message["pid"]
        elif op == "preload_failed":
            self._preload_error = PreloadError(message["module"], message["detail"])
        elif op in ("bye", "_eof"):
            self._on_gone()

    def _on_gone(self) -> None:
        self._gone = True
        for worker in self._workers.values():
            worker._on_lost("the fork server died (and killed it)")
        self._workers.clear()
        for rid in list(self._pending):
            self._pending.pop(rid)
            self._replies[rid] = SpawnerLost("the fork server went away before answering")
