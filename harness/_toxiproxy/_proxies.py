"""This process's Toxiproxy server, its proxies and its keeper."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from ._choice import ENV_BIN, ENV_URL, server_source
from ._keeper import KEEPER
from ._urls import rewrite, upstream_of

#: every proxy this harness makes is named ``sah-<token>-...``
NAME_PREFIX = "sah-"
#: seconds a started server has to answer its API
START_WAIT = 20.0
#: seconds an API call may take
API_TIMEOUT = 10.0


class ToxiproxyError(RuntimeError):
    """The Toxiproxy server refused or did not answer (the outside world)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Route:
    """One worker's proxy in front of one store."""

    service: str
    name: str
    #: where the worker connects: the proxy's ``host:port``
    listen: str
    #: the store's ``host:port``
    upstream: str

    @property
    def listen_port(self) -> int:
        return int(self.listen.rpartition(":")[2])

    @property
    def upstream_addr(self) -> tuple[str, int]:
        host, _, port = self.upstream.rpartition(":")
        return host.strip("[]"), int(port)


@dataclass
class _Scope:
    """The proxies of one environment, by worker id (the newest per id)."""

    by_worker: dict[str, dict[str, Route]] = field(default_factory=dict)
    all: list[Route] = field(default_factory=list)


class Server:
    """This process's Toxiproxy server (its own or the user's), its proxies
    and its keeper. One per process (:func:`server`); thread-safe."""

    def __init__(self) -> None:
        source = server_source()
        if isinstance(source, str):
            raise ToxiproxyError(source)
        self.token = secrets.token_hex(6)
        self.prefix = f"{NAME_PREFIX}{self.token}-"
        self.pid = os.getpid()
        #: the server's pid when this process started it (None: the user's)
        self.server_pid: int | None = None
        self.owned = source[0] == "bin"
        read, self._pipe = os.pipe()
        self._log: str | None = None
        try:
            if self.owned:
                port = _free_port()
                fd, self._log = tempfile.mkstemp(prefix="harness-toxiproxy-", suffix=".log")
                os.close(fd)
                self.api = f"http://127.0.0.1:{port}"
                argv = ["server", source[1], "127.0.0.1", str(port), self._log]
            else:
                self.api = source[1].rstrip("/")
                if "://" not in self.api:
                    self.api = f"http://{self.api}"
                argv = ["proxies", self.api, self.prefix]
            self.keeper = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", KEEPER, *argv],
                stdin=read,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,  # a Ctrl-C to the harness's group never reaches it
            )
        except BaseException:
            os.close(self._pipe)
            raise
        finally:
            os.close(read)
        assert self.keeper.stdout is not None
        if self.owned:
            line = self.keeper.stdout.readline().strip()
            self.server_pid = int(line) if line.isdigit() else None
        self.keeper.stdout.close()
        self._mutex = threading.Lock()
        self._scopes: dict[int, _Scope] = {}
        #: proxies no environment uses any more, by store, untouched by any
        #: fault: the next worker to that store takes one (a proxy costs an
        #: API call to make and one to delete; a run starts hundreds of workers)
        self._spare: dict[str, list[Route]] = {}
        #: proxies a fault acted on: deleted when released, never reused
        self._touched: set[str] = set()
        self._seq = 0
        self._client: Any = None
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    # -- the API -----------------------------------------------------------------

    def _api(self) -> Any:
        """An ``httpx.Client`` of this server's API, every call bounded by
        :data:`API_TIMEOUT` (one per process: a forked child makes its own).
        No connection is kept open between calls: a loopback connect costs
        less than a socket left behind when the server goes away."""
        if self._client is None or self._client[0] != os.getpid():
            import httpx

            client = httpx.Client(
                base_url=self.api,
                timeout=API_TIMEOUT,
                limits=httpx.Limits(max_keepalive_connections=0),
            )
            self._client = (os.getpid(), client)
        return self._client[1]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_WAIT
        said = ""
        while time.monotonic() < deadline:
            if self.owned and self.keeper.poll() is not None:
                said = f"its keeper exited {self.keeper.returncode}"
                break
            try:
                self._api().get("/version").raise_for_status()
                return
            except Exception as exc:  # httpx's errors: not answering yet
                said = f"{type(exc).__name__}: {exc}"
            time.sleep(0.05)
        log = ""
        if self._log:
            with contextlib.suppress(OSError), open(self._log, errors="replace") as fh:
                log = fh.read()[-2000:]
        raise ToxiproxyError(
            f"the Toxiproxy server at {self.api} did not answer within {START_WAIT:.0f} s "
            f"({said or 'no answer'}){': ' + log if log else ''}; check {ENV_URL} or {ENV_BIN}"
        )

    def _call(self, what: str, method: str, path: str, body: Any = None) -> Any:
        """One API call: its JSON answer (None for none), or ToxiproxyError."""
        try:
            answer = self._api().request(method, path, json=body)
            answer.raise_for_status()
            return answer.json() if answer.content else None
        except Exception as exc:  # httpx's errors, a refusal, an answer not JSON
            raise ToxiproxyError(
                f"Toxiproxy at {self.api} refused to {what}: {type(exc).__name__}: {exc}"
            ) from exc

    @staticmethod
    def _path(*names: str) -> str:
        return "/proxies/" + "/toxics/".join(quote(n, safe="") for n in names)

    def create(self, service: str, upstream: str, label: str) -> Route:
        with self._mutex:
            self._seq += 1
            name = f"{self.prefix}{self._seq}-{label}-{service}"[:120]
        body = {"name": name, "listen": "127.0.0.1:0", "upstream": upstream, "enabled": True}
        made = self._call("create a proxy", "POST", "/proxies", body)
        return Route(service, name, str(made["listen"]), upstream)

    def destroy(self, route: Route) -> None:
        with contextlib.suppress(ToxiproxyError):
            self._call("delete a proxy", "DELETE", self._path(route.name))

    def add_toxic(
        self, route: Route, name: str, kind: str, stream: str, attributes: Mapping[str, Any]
    ) -> None:
        body = {
            "name": name,
            "type": kind,
            "stream": stream,
            "toxicity": 1.0,
            "attributes": dict(attributes),
        }
        self._call(f"add a {kind} toxic", "POST", self._path(route.name) + "/toxics", body)

    def remove_toxic(self, route: Route, name: str) -> None:
        with contextlib.suppress(ToxiproxyError):
            self._call("remove a toxic", "DELETE", self._path(route.name, name))

    def set_enabled(self, route: Route, enabled: bool) -> None:
        what = "enable a proxy" if enabled else "disable a proxy"
        self._call(what, "POST", self._path(route.name), {"enabled": enabled})

    def proxy_names(self) -> list[str]:
        """The names of this process's proxies on the server."""
        got = self._call("list its proxies", "GET", "/proxies") or {}
        return sorted(n for n in got if str(n).startswith(self.prefix))

    # -- routing -----------------------------------------------------------------

    def route(self, scope: object, worker_id: str, services: Mapping[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        made: dict[str, Route] = {}
        label = "".join(c if c.isalnum() or c in "-_" else "_" for c in worker_id)[:40]
        for service, url in services.items():
            upstream = upstream_of(url)
            if upstream is None:
                out[service] = url  # a Unix socket or no server: not routable
                continue
            with self._mutex:
                spare = self._spare.get(upstream)
                route = spare.pop() if spare else None
            if route is None or route.service != service:
                route = self.create(service, upstream, label)
            made[service] = route
            out[service] = rewrite(url, route.listen)
        with self._mutex:
            sc = self._scopes.setdefault(id(scope), _Scope())
            sc.by_worker[worker_id] = made
            sc.all.extend(made.values())
        return out

    def routes_of(self, scope: object, worker_id: str) -> dict[str, Route]:
        with self._mutex:
            sc = self._scopes.get(id(scope))
            return dict(sc.by_worker.get(worker_id, {})) if sc else {}

    def touch(self, route: Route) -> None:
        """Mark ``route`` as acted on by a fault: deleted, never reused."""
        with self._mutex:
            self._touched.add(route.name)

    def release(self, scope: object) -> None:
        """The proxies of ``scope`` (its workers are gone): kept for reuse
        unless a fault acted on them, which are deleted."""
        with self._mutex:
            sc = self._scopes.pop(id(scope), None)
            routes = sc.all if sc else []
            doomed = [r for r in routes if r.name in self._touched]
            for route in routes:
                if route.name not in self._touched:
                    self._spare.setdefault(route.upstream, []).append(route)
            self._touched.difference_update(r.name for r in doomed)
        for route in doomed:
            self.destroy(route)

    # -- lifecycle ---------------------------------------------------------------

    def close(self, wait: float = 10.0) -> None:
        """Delete every proxy, end the keeper (which ends an owned server)."""
        if os.getpid() != self.pid:
            return
        with self._mutex:
            scopes, self._scopes = list(self._scopes.values()), {}
            spare, self._spare = [r for rs in self._spare.values() for r in rs], {}
        for route in [*spare, *(r for sc in scopes for r in sc.all)]:
            self.destroy(route)
        if self._client is not None and self._client[0] == os.getpid():
            self._client[1].close()
        self._client = None
        if self._pipe >= 0:
            os.close(self._pipe)
            self._pipe = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.keeper.wait(wait)

    def _forget(self) -> None:
        """In a forked child: let go of the keeper's pipe (only the owner holds it)."""
        if self._pipe >= 0:
            with contextlib.suppress(OSError):
                os.close(self._pipe)
            self._pipe = -1


_server: Server | None = None
_server_mutex = threading.Lock()


def server() -> Server:
    """This process's :class:`Server` (started on first use; its proxies are
    removed and an owned server stopped at exit, or by its keeper if the
    process dies). Raises :class:`ToxiproxyError` when none can be had."""
    global _server
    with _server_mutex:
        if _server is None or _server.pid != os.getpid():
            _server = Server()
            atexit.register(_server.close)
        return _server


def current() -> Server | None:
    """This process's server if one was started, else None."""
    s = _server
    return s if s is not None and s.pid == os.getpid() else None


def _after_fork_in_child() -> None:
    global _server, _server_mutex
    if _server is not None:
        _server._forget()
    _server = None
    _server_mutex = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
