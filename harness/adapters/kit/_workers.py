"""The kit's workers: spawned from a shared fork server, routed, reaped on close."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...procs import Exit, SpawnerLost, _child
from .._contract import release_routes, route_worker
from .._workers import ForkServerWorker, shared_fork_server


class WorkerSet:
    """An environment's worker processes.

    :meth:`spawn` forks each worker from :func:`shared_fork_server` with
    ``preload`` (modules the fork server imports once, so a heavy framework
    is not imported per worker), with stdout and stderr appended to
    :attr:`log` (``workers.log`` in the workdir). Every handle is kept;
    :meth:`close` kills (SIGKILL) and reaps each one still running or
    stopped, so no worker outlives its environment.

    A worker's ``env`` is applied after the fork, long after the server
    imported the framework: one that reads its settings at import (Prefect
    does) never sees it. ``configure`` names the hooks
    (``"module:function"``, no arguments) each worker calls after its env
    is set and before its target -- the framework's own "read the settings
    again" -- so the app's code needs no such call.

    ``warm`` (``("module:function", args)`` pairs) are calls the fork server
    makes once before it forks (``ForkServer(warm=...)``): a worker module
    can build there what each worker would build the same way (an app's
    agent or compiled graph), keep it in a module global, and let every
    forked worker take it instead of building its own (a build in a forked
    worker pays a page fault for each page of the server it touches).
    ``prebuild`` names factories (``"module:attr.attr"``, called with no
    arguments) to call so, whose results a worker takes with
    :func:`prebuilt`.

    **Routing** (the ``network_faults`` capability): given ``environment``
    (the environment whose workers these are), :meth:`spawn` with
    ``services`` (the stores the worker connects to, name -> URL, as the
    adapter's ``network_services()`` names them) asks the harness for the
    worker's own URLs (the contract's ``route_worker``) and starts it with
    them: on the Toxiproxy backend each store is reached through a proxy of
    that worker's own -- every connection it opens, its pool's new ones
    too -- so a network fault reaches it and no other worker; else nothing
    changes. :meth:`close` hands the proxies back (``release_routes``)
    once the workers are gone. The adapter says it routes with
    ``routes_workers = True``.
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        preload: Sequence[str],
        *,
        spares: int = 2,
        configure: Sequence[str] = (),
        environment: object | None = None,
        warm: Sequence[tuple[str, Mapping[str, Any]]] = (),
        prebuild: Sequence[str] = (),
    ) -> None:
        self.preload = tuple(preload)
        #: calls the fork server makes once before it forks (see above)
        self.warm = (*warm, *((f"{__name__}:_build", {"factory": f}) for f in prebuild))
        self.spares = spares
        #: the hooks each worker calls once its env is set (see above)
        self.configure = tuple(configure)
        #: whose workers these are: the scope their routes are asked for in
        #: (the harness finds a worker's proxies by its environment and id)
        self.environment = environment
        #: where every worker's stdout and stderr go (appended)
        self.log = Path(workdir) / "workers.log"
        #: every worker spawned, in order
        self.workers: list[ForkServerWorker] = []

    def spawn(
        self,
        worker_id: str,
        target: str,
        args: Mapping[str, Any],
        *,
        env: Mapping[str, str] | None = None,
        services: Mapping[str, str] | None = None,
    ) -> ForkServerWorker:
        """Start ``target(args)`` (``"package.module:function"``, JSON-able
        ``args``) in a forked worker and return its handle. Raises what
        :meth:`harness.procs.ForkServer.spawn` raises (``TargetError`` for a
        target that cannot be imported).

        ``services`` (name -> URL): route the worker (see the class): each
        string in ``args`` (at any depth) and each value of ``env`` equal to
        one of these URLs is replaced by the worker's own (:meth:`route`); a
        URL embedded in a longer string is not. Needs ``environment``."""
        if services:
            routed = self.route(worker_id, services)
            swap = {url: routed[name] for name, url in services.items() if routed[name] != url}
            if swap:
                args = _swapped(args, swap)
                env = None if env is None else {k: swap.get(v, v) for k, v in env.items()}
        server = shared_fork_server(self.preload, spares=self.spares, warm=self.warm)
        proc = server.spawn(target, args=args, env=env, log=self.log, configure=self.configure)
        worker = ForkServerWorker(worker_id, proc)
        self.workers.append(worker)
        return worker

    def route(self, worker_id: str, services: Mapping[str, str]) -> dict[str, str]:
        """The URLs worker ``worker_id`` is to use for ``services`` (name ->
        URL): through proxies of its own on the Toxiproxy backend, else the
        same (:func:`harness.adapters.route_worker` for :attr:`environment`);
        handed back at :meth:`close`. For an adapter that passes them to its
        worker its own way; :meth:`spawn` with ``services`` calls it."""
        if self.environment is None:
            raise ValueError(
                "WorkerSet(environment=...) is needed to route workers: pass the environment "
                "whose workers these are (the harness finds a worker's proxies by it)"
            )
        return route_worker(self.environment, worker_id, services)

    def alive(self) -> list[ForkServerWorker]:
        """The workers that have not ended (running or stopped), as of now."""
        return [w for w in self.workers if _alive(w)]

    def close(self, timeout: float = 10.0) -> None:
        """SIGKILL every worker still running or stopped, then wait for each
        to end (``timeout`` seconds each; ``WorkerTimeout`` past it);
        idempotent."""
        doomed = self.alive()
        for worker in doomed:
            worker.proc.kill()  # a stopped process dies of SIGKILL too
        for worker in doomed:
            with contextlib.suppress(SpawnerLost):  # its server died: so did it
                worker.proc.wait(timeout)
        if self.environment is not None:
            release_routes(self.environment)  # no worker is left to use them


#: what the fork server's ``prebuild`` factories returned, by factory name
_BUILT: dict[str, Any] = {}


def _build(args: Mapping[str, Any]) -> None:
    """The warm call of ``WorkerSet(prebuild=...)``: call one factory, keep its result."""
    _BUILT[args["factory"]] = _child.resolve(args["factory"])()  # type: ignore[call-arg]


def prebuilt(factory: str) -> Any:
    """What ``factory()`` (``"module:attr.attr"``) returned in the fork
    server this worker was forked from (``WorkerSet(prebuild=...)``), or,
    if it was not prebuilt there, what it returns now."""
    if factory in _BUILT:
        return _BUILT[factory]
    return _child.resolve(factory)()  # type: ignore[call-arg]


def _swapped(value: Any, swap: Mapping[str, str]) -> Any:
    """``value`` (JSON-able) with each string equal to a key of ``swap`` replaced."""
    if isinstance(value, str):
        return swap.get(value, value)
    if isinstance(value, Mapping):
        return {k: _swapped(v, swap) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_swapped(v, swap) for v in value]
    return value


def _alive(worker: ForkServerWorker) -> bool:
    try:
        return not isinstance(worker.proc.poll(), Exit)
    except SpawnerLost:
        return False  # the fork server died, and its workers with it
