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

import asyncio
import hashlib
import json
import os
import signal
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._chat import ModelSource
from ._client import Clock, WorldClient
from ._declare import Action, ServiceSpec
from ._errors import WorldUsageError
from ._model import Caller, Outcome
from ._openai_api import (
    chat_chunks,
    chat_completion,
    chat_conversation,
    chat_usage,
    response_events,
    response_item,
    response_object,
    responses_conversation,
    responses_usage,
    sse,
)
from ._proc import ancestry, is_gone, own_socket_fd, peer_pid
from ._services import SERVICES, Processed

try:
    import anyio.to_thread
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - the extra is in dev
    raise WorldUsageError(
        f"the world's HTTP face needs the http extra ({exc}): "
        "pip install 'stateful-agent-harness[http]'"
    ) from exc

#: The tenant of a request from a process no worker attributed.
UNATTRIBUTED = "(unattributed)"
#: The environment variable an adapter may give its app: the face's base URL.
ENV_WORLD_URL = "HARNESS_WORLD_URL"
#: How long the face waits for a killed caller to die, in seconds.
KILL_WAIT = 10.0
#: The media type of a streamed model reply (server-sent events).
SSE = "text/event-stream"

__all__ = ["ENV_WORLD_URL", "UNATTRIBUTED", "HttpFace"]


class HttpFace:
    """A world's services served over HTTP on ``127.0.0.1`` (see the module
    docstring). ``with World(path).create().serve_http() as face:`` gives
    :attr:`url`; :meth:`close` stops the server and closes its connections.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        clock: Clock | None = None,
        *,
        model: ModelSource | None = None,
    ) -> None:
        self._client = WorldClient(path, clock=clock)
        self._model = model
        self._clock: Clock = clock if clock is not None else time.time
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:41234`` (after :meth:`start`)."""
        if not self._port:
            raise WorldUsageError("the HTTP face is not started: call start() first")
        return f"http://127.0.0.1:{self._port}"

    def start(self, timeout: float = 30.0) -> HttpFace:
        """Serve, on a free loopback port; returns once it accepts connections."""
        if self._server is not None:
            return self
        self._client.spec("payments")  # know the world's declared services before routing
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            _app(self._client, self._model, self._clock),
            log_level="warning",
            access_log=False,
            lifespan="off",
            loop="asyncio",
            timeout_graceful_shutdown=1,
        )
        server = self._server = uvicorn.Server(config)

        def serve() -> None:
            try:
                server.run(sockets=[sock])
            finally:
                self._client.close()  # this process's connections to the world

        self._thread = threading.Thread(target=serve, name="harness-world-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.close()
                raise WorldUsageError(
                    f"the world's HTTP face did not start within {timeout} s; see the log"
                )
            time.sleep(0.002)
        return self

    def close(self, *, wait: bool = True) -> None:
        """Stop serving (connections still open are closed) and close the
        world's connections. uvicorn takes about 0.2 s to stop; ``wait=False``
        returns at once and lets it stop in the background (for a deployment
        whose callers are all dead already)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.should_exit = True
            server.force_exit = True
        if thread is not None and wait:
            thread.join(timeout=10.0)
        if thread is None:
            self._client.close()

    def __enter__(self) -> HttpFace:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- the ASGI app ----------------------------------------------------------------


def _error(status: int, kind: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status, headers=headers)


class _NoReply(Response):
    """What a caller that lost sight of its request gets: the connection is
    closed before any byte of a reply, and, for a kill, its process dies
    first. Never a status line: an app cannot tell "applied" from this."""

    def __init__(self, kill: int | None = None) -> None:
        super().__init__()
        self._kill = kill

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._kill is not None:
            os.kill(self._kill, signal.SIGKILL)
            deadline = time.monotonic() + KILL_WAIT
            while not is_gone(self._kill) and time.monotonic() < deadline:
                await asyncio.sleep(0.001)
        if not _hang_up(scope) and self._kill is None:
            # The connection's socket was not found here: the next best thing
            # to no reply is a reply cut off before its body, which the
            # server then closes. The client raises all the same.
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", b"1")]})  # fmt: skip
            return
        await _until_gone(receive)


class _CutReply(Response):
    """A reply cut off halfway (a ``cut_stream`` model fault): the status
    line, the headers and the first half of the body (of the events, for a
    stream), then the connection closed. The client raises mid-read (e.g.
    ``httpx.RemoteProtocolError``: an incomplete body)."""

    def __init__(self, pieces: list[bytes], media_type: str, streamed: bool) -> None:
        super().__init__()
        self._pieces, self._media, self._streamed = pieces, media_type, streamed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        whole = b"".join(self._pieces)
        if self._streamed:
            head = b"".join(self._pieces[: max(1, len(self._pieces) // 2)])
            headers = [(b"content-type", self._media.encode())]
        else:
            head = whole[: max(1, len(whole) // 2)]
            headers = [(b"content-type", self._media.encode()),
                       (b"content-length", str(len(whole)).encode())]  # fmt: skip
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": head, "more_body": True})
        if _hang_up(scope):
            await _until_gone(receive)
        # else: the server closes the connection when this returns with
        # more_body promised (the client reads an incomplete body either way)


def _hang_up(scope: Scope) -> bool:
    """Shut the connection of ``scope`` down from this side (what is
    already sent still reaches the client); False if its socket is not
    found in this process."""
    server, client = _ends(scope)
    fd = None if server is None or client is None else own_socket_fd(server, client)
    if fd is None:
        return False
    dup = socket.socket(fileno=os.dup(fd))
    try:
        dup.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # the caller already closed it (a killed caller)
    finally:
        dup.close()
    return True


async def _until_gone(receive: Receive) -> None:
    """Wait for the server to see the connection closed (then send nothing)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _ends(scope: Scope) -> tuple[tuple[str, int] | None, tuple[str, int] | None]:
    server, client = scope.get("server"), scope.get("client")
    s = None if not server else (str(server[0]), int(server[1]))
    c = None if not client else (str(client[0]), int(client[1]))
    return s, c


class _Caller:
    """Who sent a request: the process found from its socket, and the run it
    was attributed to."""

    def __init__(self, pid: int | None, who: Caller) -> None:
        self.pid, self.who = pid, who

    @property
    def cannot_kill(self) -> str | None:
        """Why a kill fault cannot kill this caller, if it cannot."""
        if self.pid is None:
            return (
                "the world could not find which process sent it from its connection "
                "(/proc/net/tcp and /proc/PID/fd: a loopback connection from a process of "
                "this user)"
            )
        if self.pid in ancestry(os.getpid()):
            return (
                f"it came from process {self.pid}, which serves the world (or started it): "
                "make calls that a fault may kill from a worker process"
            )
        return None


def _find_caller(client: WorldClient, scope: Scope) -> _Caller:
    server, peer = _ends(scope)
    # The processes that attributed themselves are the likeliest callers:
    # looking at their few sockets first spares a search of every process.
    pid = None if server is None or peer is None else peer_pid(peer, server, client.callers())
    if pid is not None:
        for each in ancestry(pid):
            who = client.attributed(each)
            if who is not None:
                return _Caller(pid, who)
    return _Caller(pid, Caller(tenant=UNATTRIBUTED))


async def _body(request: Request) -> dict[str, Any]:
    if request.method in ("GET", "DELETE"):
        return dict(request.query_params)
    raw = await request.body()
    if not raw.strip():
        return {}
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        return dict(urllib.parse.parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise WorldUsageError(f"the request body is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise WorldUsageError(f"the request body must be a JSON object; got {type(data).__name__}")
    return data


def _key(spec_place: Any, request: Request, body: Mapping[str, Any]) -> str | None:
    if spec_place is None:
        return None
    if spec_place.header:
        return request.headers.get(spec_place.header)
    value = body.get(spec_place.field)
    if value is not None and not isinstance(value, str):
        raise WorldUsageError(f"the key field {spec_place.field!r} must be a string; got {value!r}")
    return value


def _answer(action: Action, outcome: Outcome, done: Processed, caller: _Caller) -> Response:
    if done.stop and caller.pid:
        # Held before the response reaches it (it reads it once continued).
        os.kill(caller.pid, signal.SIGSTOP)
    if outcome in ("killed_before_apply", "killed_after_apply"):
        return _NoReply(kill=caller.pid)
    if outcome in ("unknown_applied", "unknown_not_applied"):
        return _NoReply()
    if outcome == "rejected":
        reason = done.error or "rejected"
        if reason.startswith("injected fault: unavailable"):
            return _error(503, "unavailable", reason, **{"Retry-After": "0"})
        if reason.startswith("idempotency key"):
            return _error(422, "idempotency_key_reused", reason)
        return _error(400, "rejected", reason)
    assert done.response is not None
    headers = {"Idempotent-Replayed": "true"} if done.deduplicated else {}
    return JSONResponse(done.response.body, action.http_status, headers=headers)


def _action_endpoint(
    client: WorldClient, spec: ServiceSpec, action: Action
) -> Callable[[Request], Any]:
    def serve(request: Request, body: dict[str, Any]) -> Response:
        # One trip to a worker thread per request: on a loaded machine each
        # hop between threads waits for a core.
        try:
            keys = (
                _key(spec.idempotency_key, request, body),
                _key(spec.business_key, request, body),
            )
        except WorldUsageError as exc:
            return _error(400, "bad_request", str(exc))
        caller = _find_caller(client, request.scope)
        try:
            req = client.request(spec.name, action.name, body, *keys, caller.who)
        except WorldUsageError as exc:
            return _error(400, "bad_request", str(exc))
        try:
            outcome, done = client.perform(req, pid=caller.pid or 0, cannot_kill=caller.cannot_kill)
        except WorldUsageError as exc:
            return _error(500, "harness", str(exc))
        return _answer(action, outcome, done, caller)

    async def endpoint(request: Request) -> Response:
        try:
            body = await _body(request)
        except WorldUsageError as exc:
            return _error(400, "bad_request", str(exc))
        return await anyio.to_thread.run_sync(serve, request, body)

    return endpoint


def _lookup_endpoint(client: WorldClient, spec: ServiceSpec) -> Callable[[Request], Any]:
    lookup = spec.lookup
    assert lookup is not None

    async def endpoint(request: Request) -> Response:
        key = request.path_params["key"]
        caller = await anyio.to_thread.run_sync(_find_caller, client, request.scope)
        by_key = lookup.by == "key"
        outcome, done = await anyio.to_thread.run_sync(
            lambda: client.perform_lookup(
                spec.name,
                idempotency_key=key if by_key else None,
                business_key=None if by_key else key,
                tenant=caller.who.tenant,
                pid=caller.pid or 0,
            )
        )
        if outcome == "applied":
            if done.response is None:
                return _error(404, "not_found", f"no {spec.name} request has {lookup.by} {key!r}")
            return JSONResponse(done.response.body, 200)
        if outcome == "unknown_not_applied":
            return _NoReply()
        return _error(400, "rejected", done.error or "rejected")

    return endpoint


def _model_endpoint(
    client: WorldClient, script: ModelSource, clock: Clock, api: str
) -> Callable[[Request], Any]:
    """``POST /v1/chat/completions`` (``api`` ``chat``) or ``POST
    /v1/responses`` (``responses``): the script's reply, whole or streamed,
    in that API's shape (:mod:`._openai_api`), the call recorded first; a
    model fault armed for the call is served instead (``harness.world._chat``)."""

    async def endpoint(request: Request) -> Response:
        try:
            body = await _body(request)
            if api == "chat":
                conversation = chat_conversation(body)
            else:
                conversation = responses_conversation(body)
        except WorldUsageError as exc:
            return _error(400, "invalid_request_error", str(exc))
        try:
            # In a thread: a recorder waits there for the real model.
            step, message = await anyio.to_thread.run_sync(script.reply, conversation, body)
        except WorldUsageError as exc:
            return _error(400, "invalid_request_error", str(exc))
        caller = await anyio.to_thread.run_sync(_find_caller, client, request.scope)
        model = str(body.get("model") or "scripted")
        served = await anyio.to_thread.run_sync(
            lambda: client.record_model_call(
                caller.who,
                pid=caller.pid or 0,
                model=model,
                step=step,
                request=body,
                reply=message,
                conversation=conversation,
            )
        )
        if served.fault == "rate_limited":
            return _error(429, "rate_limit_exceeded", "Rate limit reached (injected by the "
                          "harness's model fault)", **RETRY_AFTER)  # fmt: skip
        if served.fault == "server_error":
            return _error(500, "server_error", "The server had an error while processing your "
                          "request (injected by the harness's model fault)")  # fmt: skip
        if served.fault == "timeout":
            return _NoReply()
        # The response's id: the conversation's, as the world hashed it to
        # record the call, and the how-manieth reply to it this is.
        digest = served.conversation_hash
        if served.answered:
            digest = hashlib.sha256(f"{digest}:{served.answered}".encode()).hexdigest()
        message = served.reply
        created, stream = int(clock()), bool(body.get("stream"))
        if api == "chat":
            ident = f"chatcmpl-{digest[:24]}"
            usage = chat_usage(served.prompt_tokens, served.completion_tokens)
            if not stream:
                whole = chat_completion(ident, created, model, message, usage)
                return _serve(whole, served.fault)
            options = body.get("stream_options")
            wanted = isinstance(options, dict) and bool(options.get("include_usage"))
            chunks = chat_chunks(ident, created, model, message, usage if wanted else None)
            return _stream(sse(chunks, named=False, done=True), served.fault)
        ident = digest[:24]
        used = responses_usage(served.prompt_tokens, served.completion_tokens)
        if not stream:
            item = response_item(ident, message)
            return _serve(response_object(ident, created, model, body, [item], used), served.fault)
        events = response_events(ident, created, model, body, message, used)
        return _stream(sse(events, named=True, done=False), served.fault)

    return endpoint


#: what a rate-limited model call is told to wait: the OpenAI client reads
#: ``retry-after-ms`` first (10 ms: a retry costs no test time)
RETRY_AFTER = {"retry-after": "1", "retry-after-ms": "10"}


def _serve(reply: Mapping[str, Any], fault: str | None) -> Response:
    if fault == "cut_stream":
        return _CutReply([bytes(JSONResponse(reply).body)], "application/json", streamed=False)
    return JSONResponse(reply)


def _stream(events: Iterator[bytes], fault: str | None) -> Response:
    if fault == "cut_stream":
        return _CutReply(list(events), SSE, streamed=True)
    return StreamingResponse(events, media_type=SSE)


def _app(client: WorldClient, model: ModelSource | None, clock: Clock) -> Starlette:
    routes = []
    if model is not None:
        for path, api in (("/v1/chat/completions", "chat"), ("/v1/responses", "responses")):
            routes.append(Route(path, _model_endpoint(client, model, clock, api), methods=["POST"]))
    for spec in SERVICES.values():
        for action in spec.endpoints:
            routes.append(
                Route(action.path, _action_endpoint(client, spec, action), methods=[action.method])
            )
        if spec.lookup is not None:
            routes.append(
                Route(
                    spec.lookup.path, _lookup_endpoint(client, spec), methods=[spec.lookup.method]
                )
            )
    known = ", ".join(f"{a.method} {a.path}" for spec in SERVICES.values() for a in spec.endpoints)

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(
            404,
            "no_such_action",
            f"no action answers {request.method} {request.url.path}; the world's services "
            f"answer {known} (harness list services)",
        )

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
