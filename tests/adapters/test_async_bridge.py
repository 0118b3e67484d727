"""The kit's asyncio bridge (issue 18): an asyncio runtime's client called
from the synchronous contract, on one background loop per process; a forked
child (a worker) gets a loop of its own."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.adapters.kit import AsyncBridge, run_async


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while line := await reader.readline():
        writer.write(line.upper())
        await writer.drain()
    writer.close()


async def _ask(port: int, text: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(text.encode() + b"\n")
    await writer.drain()
    answer = await reader.readline()
    writer.close()
    await writer.wait_closed()
    return answer.decode().strip()


@pytest.fixture
def bridge() -> Iterator[AsyncBridge]:
    b = AsyncBridge()
    yield b
    b.close()


def test_a_real_asyncio_server_and_client_through_the_bridge(bridge: AsyncBridge) -> None:
    async def serve() -> asyncio.base_events.Server:
        return await asyncio.start_server(_echo, "127.0.0.1", 0)

    server = bridge.run(serve())  # the server lives on the bridge's loop
    port = server.sockets[0].getsockname()[1]
    assert bridge.run(_ask(port, "refund"), timeout=30) == "REFUND"
    # Callers from several threads (an executor) share the one loop.
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda i: bridge.run(_ask(port, f"r{i}"), 30), range(8)))
    assert answers == [f"R{i}" for i in range(8)]
    thread = bridge._thread
    assert thread is not None and thread.is_alive()

    async def stop() -> None:
        server.close()
        await server.wait_closed()

    bridge.run(stop(), timeout=30)
    bridge.close()  # stops the loop, joins its thread
    assert not thread.is_alive()
    # Used again, it starts afresh.
    assert bridge.run(asyncio.sleep(0, "again"), timeout=30) == "again"
    assert bridge._thread is not None and bridge._thread is not thread


def test_errors_timeouts_and_misuse(bridge: AsyncBridge) -> None:
    async def boom() -> None:
        raise ValueError("the runtime refused the workflow")

    with pytest.raises(ValueError, match="refused the workflow"):
        bridge.run(boom())

    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        bridge.run(forever(), timeout=0.05)
    assert bridge.run(asyncio.to_thread(cancelled.wait, 30)), "the timed-out coroutine is cancelled"

    async def nested() -> None:
        bridge.run(asyncio.sleep(0))

    with pytest.raises(RuntimeError, match="from its own loop"):
        bridge.run(nested())


def test_a_forked_child_gets_a_fresh_loop(bridge: AsyncBridge) -> None:
    async def where() -> tuple[int, int, int]:
        return os.getpid(), threading.get_ident(), id(asyncio.get_running_loop())

    parent = bridge.run(where())
    default_parent = run_async(where())
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no loop thread was inherited
        try:
            os.close(read)
            seen = {"bridge": bridge.run(where()), "default": run_async(where())}
            bridge.close()
            os.write(write, json.dumps(seen).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        seen = json.loads(fh.read())
    assert os.waitpid(pid, 0)[1] == 0
    assert seen["bridge"][0] == pid and seen["default"][0] == pid
    assert seen["bridge"][1:] != list(parent[1:]), "the child runs a loop of its own"
    assert seen["default"][1:] != list(default_parent[1:])
    assert bridge.run(where()) == parent, "the parent's loop runs on"
