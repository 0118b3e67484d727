"""Routing: the URLs a worker connects through, and its proxies handed back."""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping
from contextvars import ContextVar

from ._choice import choose
from ._proxies import Route, current, server
from ._urls import upstream_of

#: the worker ids a network fault will act on, while a scenario runs
#: (:func:`routing_only`); None: every worker is routed
_TARGETS: ContextVar[frozenset[str] | None] = ContextVar("toxiproxy_targets", default=None)


@contextlib.contextmanager
def routing_only(worker_ids: Collection[str]) -> Iterator[None]:
    """For the block, :func:`route_worker` routes only ``worker_ids`` (the
    workers a network fault of the scenario will act on) and hands every
    other worker its URLs unchanged: a proxy nothing acts on costs the
    proxy server a copy of all of that worker's traffic, and changes
    nothing else. Outside such a block every worker is routed."""
    token = _TARGETS.set(frozenset(worker_ids))
    try:
        yield
    finally:
        _TARGETS.reset(token)


def route_worker(scope: object, worker_id: str, services: Mapping[str, str]) -> dict[str, str]:
    """The URLs worker ``worker_id`` of environment ``scope`` should use for
    ``services`` (name -> URL): through proxies of its own when the network
    faults run on Toxiproxy, else the same URLs. Raises
    :class:`ToxiproxyError` when the Toxiproxy backend is chosen and its
    server cannot be reached."""
    targets = _TARGETS.get()
    if targets is not None and worker_id not in targets:
        return dict(services)  # no fault will act on its proxies
    if choose().backend != "toxiproxy":
        return dict(services)
    if not any(upstream_of(url) for url in services.values()):
        return dict(services)  # nothing to route (a SQLite file): no server started for it
    return server().route(scope, worker_id, services)


def release_routes(scope: object) -> None:
    """Delete the proxies :func:`route_worker` made for ``scope``."""
    s = current()
    if s is not None:
        s.release(scope)


def routes_of(scope: object, worker_id: str) -> dict[str, Route]:
    """The proxies worker ``worker_id`` of ``scope`` connects through, by service."""
    s = current()
    return s.routes_of(scope, worker_id) if s is not None else {}
