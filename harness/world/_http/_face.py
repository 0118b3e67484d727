"""The HTTP face itself: :class:`HttpFace` runs the world's ASGI app under
uvicorn in a thread, started by :meth:`HttpFace.start` and stopped by
:meth:`HttpFace.close`."""

from __future__ import annotations

import os
import socket
import threading
import time

import uvicorn

from .._chat import ModelSource
from .._client import Clock, WorldClient
from .._errors import WorldUsageError
from ._app import _app


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
