"""Routing: the URLs a worker connects through, and its proxies handed back."""

from __future__ import annotations

from collections.abc import Mapping

from ._choice import choose
from ._proxies import Route, current, server
from ._urls import upstream_of


def route_worker(scope: object, worker_id: str, services: Mapping[str, str]) -> dict[str, str]:
    """The URLs worker ``worker_id`` of environment ``scope`` should use for
    ``services`` (name -> URL): through proxies of its own when the network
    faults run on Toxiproxy, else the same URLs. Raises
    :class:`ToxiproxyError` when the Toxiproxy backend is chosen and its
    server cannot be reached."""
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
