"""A worker process handle and the values it reports: :class:`Exit` and :class:`Stopped`.

A :class:`Worker` is owned by the spawner that started it. The owner is the
only one that reaps the process (a fork server does it in its own process),
so every status the handle reports comes from the owner, and a signal is
only sent while the worker is not known to have been reaped: a pid number
can be reused after the reap, and then a kill would hit a stranger.
"""

from __future__ import annotations

import signal as _signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from harness.procs._errors import SpawnerLost, WorkerTimeout

_SCHEMA_VERSION = 1


def _signal_name(signum: int) -> str:
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass(frozen=True)
class Exit:
    """How a worker ended: ``exited(code)`` or ``killed(signal)``, never both.

    Build with :meth:`exited`, :meth:`killed` or :meth:`from_status`.
    """

    code: int | None = None
    signal: int | None = None

    def __post_init__(self) -> None:
        if (self.code is None) == (self.signal is None):
            raise ValueError(f"an Exit has exactly one of code and signal, got {self!r}")

    @classmethod
    def exited(cls, code: int) -> Exit:
        """The worker called exit (or returned) with ``code``."""
        return cls(code=code)

    @classmethod
    def killed(cls, signum: int) -> Exit:
        """The worker was terminated by signal ``signum``."""
        return cls(signal=signum)

    @classmethod
    def from_status(cls, status: int) -> Exit:
        """From ``os.waitstatus_to_exitcode`` form: negative means killed by ``-status``."""
        return cls.killed(-status) if status < 0 else cls.exited(status)

    @property
    def was_killed(self) -> bool:
        """True if a signal ended the worker."""
        return self.signal is not None

    @property
    def ok(self) -> bool:
        """True if the worker exited with code 0."""
        return self.code == 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict with a type tag and schema version."""
        return {"type": "exit", "v": _SCHEMA_VERSION, "code": self.code, "signal": self.signal}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Exit:
        """Inverse of :meth:`to_json`."""
        if data.get("type") != "exit" or data.get("v") != _SCHEMA_VERSION:
            raise ValueError(f"not an Exit v{_SCHEMA_VERSION} record: {data!r}")
        return cls(code=data["code"], signal=data["signal"])

    def __str__(self) -> str:
        if self.signal is not None:
            return f"killed({_signal_name(self.signal)})"
        return f"exited({self.code})"


@dataclass(frozen=True)
class Stopped:
    """The worker is stopped (by SIGSTOP or another stop signal) and can be continued."""

    signal: int

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict with a type tag and schema version."""
        return {"type": "stopped", "v": _SCHEMA_VERSION, "signal": self.signal}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Stopped:
        """Inverse of :meth:`to_json`."""
        if data.get("type") != "stopped" or data.get("v") != _SCHEMA_VERSION:
            raise ValueError(f"not a Stopped v{_SCHEMA_VERSION} record: {data!r}")
        return cls(signal=data["signal"])

    def __str__(self) -> str:
        return f"stopped({_signal_name(self.signal)})"


class _Owner(Protocol):
    """What a Worker needs from its spawner. All state changes happen under ``_cond``."""

    _cond: threading.Condition

    def _signal(self, worker: Worker, signum: int) -> None: ...

    def _wait_until(self, ready: Callable[[], bool], deadline: float | None) -> bool: ...

    def _refresh(self) -> None: ...


class Worker:
    """Handle on one worker process started by a spawner.

    ``pid`` is the process id (also its process group id: signals go to the
    whole group, so a worker's own subprocesses are stopped and killed with
    it). Handles are safe to use from several threads.
    """

    def __init__(self, owner: _Owner, pid: int, target: str) -> None:
        self.pid = pid
        self.target = target
        self._owner = owner
        self._stopped: Stopped | None = None
        self._exit: Exit | None = None
        self._lost = False
        self._lost_reason = ""

    # Called by the owner, under its lock.
    def _on_stopped(self, signum: int) -> None:
        self._stopped = Stopped(signum)

    def _on_continued(self) -> None:
        self._stopped = None

    def _on_exit(self, exit: Exit) -> None:
        self._stopped = None
        self._exit = exit

    def _on_lost(self, reason: str) -> None:
        if self._exit is None:
            self._lost = True
            self._lost_reason = reason

    def _current(self) -> Exit | Stopped | None:
        if self._lost:
            raise SpawnerLost(
                f"the exit status of worker {self.pid} ({self.target}) is unknown: "
                f"{self._lost_reason}"
            )
        return self._exit or self._stopped

    def _describe(self) -> str:
        if self._lost:
            return "lost"
        return str(self._exit or self._stopped or "running")

    def poll(self) -> Exit | Stopped | None:
        """Return the state now: an :class:`Exit`, :class:`Stopped`, or None if running.

        Raises :class:`SpawnerLost` if the fork server died under the worker.
        """
        self._owner._refresh()
        with self._owner._cond:
            return self._current()

    @property
    def exit(self) -> Exit | None:
        """How the worker ended, if it is known to have ended (no refresh)."""
        return self._exit

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the worker's process group; no-op once it has ended.

        Delivery is asynchronous: use :meth:`wait` or :meth:`wait_stopped_or_exit`
        to observe the effect.
        """
        self._owner._signal(self, signum)

    def kill(self) -> None:
        """SIGKILL the worker (and its process group). Follow with :meth:`wait`."""
        self.signal(_signal.SIGKILL)

    def stop(self) -> None:
        """SIGSTOP the worker. Follow with :meth:`wait_stopped_or_exit` to be sure."""
        self.signal(_signal.SIGSTOP)

    def cont(self) -> None:
        """SIGCONT the worker, letting a stopped worker run again."""
        self.signal(_signal.SIGCONT)

    def wait(self, timeout: float | None = None) -> Exit:
        """Block until the worker has ended and return how; ``None`` waits forever.

        Raises :class:`WorkerTimeout` (the worker still runs, or is stopped) or
        :class:`SpawnerLost`.
        """

        def ready() -> bool:
            return self._exit is not None or self._lost

        if not self._owner._wait_until(ready, _deadline(timeout)):
            raise WorkerTimeout(self.pid, "exit", timeout or 0.0, self._describe())
        with self._owner._cond:
            state = self._current()
        assert isinstance(state, Exit)
        return state

    def wait_stopped_or_exit(self, timeout: float | None = None) -> Exit | Stopped:
        """Block until the worker is stopped or has ended, and return that state.

        This is the barrier for crash points: a worker that stops itself with
        SIGSTOP is reported :class:`Stopped` here and runs on after :meth:`cont`.
        Raises :class:`WorkerTimeout` or :class:`SpawnerLost`.
        """

        def ready() -> bool:
            return self._exit is not None or self._stopped is not None or self._lost

        if not self._owner._wait_until(ready, _deadline(timeout)):
            raise WorkerTimeout(self.pid, "stop or exit", timeout or 0.0, self._describe())
        with self._owner._cond:
            state = self._current()
        assert state is not None
        return state

    def __repr__(self) -> str:
        return f"<Worker pid={self.pid} target={self.target!r} {self._describe()}>"


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + max(0.0, timeout)
