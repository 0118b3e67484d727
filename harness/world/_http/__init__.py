"""The world over HTTP: a deployment's services on a loopback port.

An app whose tools call their providers with an HTTP client is tested as it
is: point its base URL (an environment variable the app already reads) at
:attr:`HttpFace.url`, and each declared action answers at its method and
path (``harness list services``). The semantics are :class:`WorldClient`'s,
because every request goes through its :meth:`~WorldClient.perform` in the
same world file: effects are counted in the world's store, an idempotency key
is read where the service declares it (the built-in payments service: the
``Idempotency-Key`` header, as a payment provider's), lookups answer at the
declared path, and every world fault fires:

=======================  ====================================================
outcome                  what the caller gets
=======================  ====================================================
applied                  the action's ``http_status``, the reply body
deduplicated             the same, and ``Idempotent-Replayed: true``
``reject``               400 ``{"error": {"type": "rejected", ...}}``
``unavailable``          503, ``Retry-After: 0`` (type ``unavailable``)
key reused               422 (type ``idempotency_key_reused``)
timeouts                 no reply: the connection is closed (the client
                         raises, e.g. ``httpx.RemoteProtocolError``)
``slow``                 the reply, ``delay`` seconds late
``kill_*``               the caller's process is SIGKILLed, no reply
lookup, none found       404 (type ``not_found``)
=======================  ====================================================

Which process called is found from the connection (:mod:`._proc`), never
asked of the app: it is recorded as the request's ``pid``, and it is the
process a ``kill_*`` fault kills. The run it calls for is what
:meth:`WorldClient.attribute` recorded for that process or the nearest of its
ancestors (a worker attributes itself before it runs the app); a request
from a process nobody attributed is recorded under the tenant
:data:`UNATTRIBUTED`. A kill fault whose caller cannot be found, or is the
serving process itself, answers 500 and records nothing.

The server is uvicorn (an ASGI server) running a Starlette app in a thread
of the process that owns the world, started by :meth:`HttpFace.start` and
stopped by :meth:`HttpFace.close`. It needs the ``http`` extra
(``pip install 'stateful-agent-harness[http]'``); nothing else in the world
imports it.
"""

from __future__ import annotations

from .._errors import WorldUsageError

# The http extra, checked once for every module of the face.
try:
    import anyio.to_thread  # noqa: F401
    import uvicorn  # noqa: F401
    from starlette.applications import Starlette  # noqa: F401
    from starlette.requests import Request  # noqa: F401
    from starlette.responses import JSONResponse, Response, StreamingResponse  # noqa: F401
    from starlette.routing import Route  # noqa: F401
    from starlette.types import Receive, Scope, Send  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is in dev
    raise WorldUsageError(
        f"the world's HTTP face needs the http extra ({exc}): "
        "pip install 'stateful-agent-harness[http]'"
    ) from exc

from ._face import HttpFace
from ._names import ENV_WORLD_URL, UNATTRIBUTED

__all__ = ["ENV_WORLD_URL", "UNATTRIBUTED", "HttpFace"]
