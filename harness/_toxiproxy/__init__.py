"""The Toxiproxy backend of network faults: a proxy of its own per worker and store.

Where the server comes from, in order (:func:`choose`):

1. ``HARNESS_TOXIPROXY_URL`` -- a server the user runs (a release binary,
   the ``ghcr.io/shopify/toxiproxy`` image, testcontainers);
2. ``HARNESS_TOXIPROXY_BIN``, else ``toxiproxy-server`` on ``PATH`` -- the
   harness starts one per process on a free loopback port;
3. else the kernel backend (:mod:`harness._netfilter`: root and iptables);
4. else the family is not tested, with both reasons.

``HARNESS_NETWORK_BACKEND`` (``auto``, ``toxiproxy``, ``kernel``; the
command line's ``--network-backend``) overrides the order.

**Routing.** An environment asks for a worker's routed URLs before it starts
the worker (:func:`route_worker`, the contract's hook): each store URL
(Postgres, Redis) gets a proxy of that worker's own on a loopback port, and
the worker connects through it -- every connection it opens, its pool's new
ones included. A fault on one worker's proxy touches no other worker and
none of the harness's own connections. :func:`release_routes` hands an
environment's proxies back when it closes: kept for the next workers to the
same store, unless a fault acted on them (those are deleted). Without the
Toxiproxy backend the URLs come back unchanged; while a scenario runs,
only the workers one of its network faults acts on are routed
(:func:`routing_only`), the others connect directly.

**Ownership.** A server the harness starts runs under a *keeper*: a small
process (standard library only, ``python -I -S``) in a session of its own
that ignores SIGINT, SIGHUP and SIGTERM, starts the server with a
parent-death signal tied to itself, and reads a pipe whose write end only
the harness holds. When the pipe closes -- the harness ended, however it
died, SIGKILL included -- the keeper kills the server and exits; should the
keeper itself be killed, the server gets its death signal. On a user's
server the keeper deletes this process's proxies instead (every name starts
with ``sah-<token>-``). At a normal exit the harness closes the pipe and
waits for the keeper.

The package's modules: ``_choice`` (which backend), ``_proxies`` (the server,
its proxies), ``_keeper``, ``_urls``, ``_routing`` (the contract's hooks).
"""

from __future__ import annotations

from ._choice import (
    ENV_BACKEND,
    ENV_BIN,
    ENV_URL,
    MODES,
    PROGRAM,
    Backend,
    Choice,
    choose,
    server_source,
)
from ._keeper import KEEPER
from ._proxies import (
    API_TIMEOUT,
    NAME_PREFIX,
    START_WAIT,
    Route,
    Server,
    ToxiproxyError,
    current,
    server,
)
from ._proxies import _free_port as _free_port
from ._routing import release_routes, route_worker, routes_of, routing_only
from ._urls import DEFAULT_PORTS, rewrite, upstream_of

__all__ = [
    "API_TIMEOUT",
    "DEFAULT_PORTS",
    "ENV_BACKEND",
    "ENV_BIN",
    "ENV_URL",
    "KEEPER",
    "MODES",
    "NAME_PREFIX",
    "PROGRAM",
    "START_WAIT",
    "Backend",
    "Choice",
    "Route",
    "Server",
    "ToxiproxyError",
    "choose",
    "current",
    "release_routes",
    "rewrite",
    "route_worker",
    "routes_of",
    "routing_only",
    "server",
    "server_source",
    "upstream_of",
]
