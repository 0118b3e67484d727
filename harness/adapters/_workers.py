"""Workers from a fork server, as an adapter hands them to the harness.

Most adapters start workers the same way: a :class:`~harness.procs.ForkServer`
per preload set, kept for the whole harness process, and a handle that maps
the process layer's :class:`~harness.procs.Exit` / :class:`~harness.procs.Stopped`
onto the contract's :class:`WorkerExit`. These two pieces are that way.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..procs import ForkServer, Stopped, Worker
from ._contract import WorkerExit

_lock = threading.Lock()
_servers: dict[tuple[tuple[str, ...], int, str], ForkServer] = {}


def shared_fork_server(
    preload: Sequence[str],
    *,
    spares: int = 2,
    warm: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> ForkServer:
    """One started fork server per (preload set, spares, warm calls), for the
    whole harness process: forking from it costs a fork, not an interpreter
    start. ``warm``: ``ForkServer(warm=...)``, calls made once in the server
    before it forks."""
    key = (tuple(preload), spares, json.dumps([[t, dict(a)] for t, a in warm], sort_keys=True))
    with _lock:
        server = _servers.get(key)
        if server is None:
            server = ForkServer(preload=list(preload), spares=spares, warm=warm).start()
            _servers[key] = server
        return server


class ForkServerWorker:
    """A :class:`~harness.adapters.WorkerHandle` over a :class:`~harness.procs.Worker`."""

    def __init__(self, worker_id: str, proc: Worker) -> None:
        self.worker_id = worker_id
        self.proc = proc
        self.pid = proc.pid

    def wait(self, timeout: float) -> WorkerExit:
        got = self.proc.wait_stopped_or_exit(timeout)
        if isinstance(got, Stopped):
            return WorkerExit(stopped=True)
        if got.signal is not None:
            return WorkerExit(signal=got.signal)
        return WorkerExit(code=got.code)

    def kill(self) -> None:
        state = self.proc.poll()  # refreshed: never signal what has ended
        if state is None or isinstance(state, Stopped):
            self.proc.kill()

    def cont(self) -> None:
        self.proc.cont()
