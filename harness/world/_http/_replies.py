"""How the face answers one request: its caller (found from the
connection), its body and idempotency key, the reply an outcome gets, and
the replies a fault makes (none, or cut)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from .._client import WorldClient
from .._declare import Action
from .._errors import WorldUsageError
from .._model import Caller, Outcome
from .._proc import ancestry, is_gone, own_socket_fd, peer_pid
from .._services import Processed
from ._names import KILL_WAIT, UNATTRIBUTED


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
