"""Asyncio runtimes: one background event loop per process, fork-safe."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


#: every bridge of this process, so a forked child can forget their loops
_bridges: weakref.WeakSet[AsyncBridge] = weakref.WeakSet()


class AsyncBridge:
    """An asyncio event loop in a background thread, for an adapter whose
    runtime has an asyncio client (Temporal's, say) behind the contract's
    synchronous methods: ``bridge.run(client.start_workflow(...))``.

    The loop and its thread start at the first :meth:`run` and live until
    :meth:`close` (the loop's tasks are cancelled, the thread joined); a
    later :meth:`run` starts a new one. Fork-safe: a child forked while the
    loop runs (a worker from the fork server, which forks a process holding
    this object) does not inherit a thread, so it forgets the parent's loop
    and starts its own at its first :meth:`run`. What was made on the
    parent's loop -- a connected client, a connection -- belongs to that
    loop: make it again in the child (keep it per ``os.getpid()``).
    """

    def __init__(self, name: str = "harness-async") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        _bridges.add(self)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started if need be), to schedule callbacks on."""
        with self._lock:
            if self._loop is None:
                self._start()
            assert self._loop is not None
            return self._loop

    def _start(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=serve, name=self.name, daemon=True)
        thread.start()
        ready.wait()
        self._loop, self._thread = loop, thread

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and return its result (or raise what it
        raises). Past ``timeout`` seconds the coroutine is cancelled and
        ``TimeoutError`` raised. Never call it from a coroutine on this
        loop (it would wait on itself): that is a ``RuntimeError``."""
        loop = self.loop
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("AsyncBridge.run() called from its own loop: await instead")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the coroutine did not finish within {timeout:g} s") from None
        finally:
            future.cancel()  # done: a no-op; else (timeout, interruption) it stops it

    def close(self) -> None:
        """Cancel the loop's tasks, stop the loop, join its thread; idempotent."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return

        async def drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.shutdown_asyncgens()

        if thread is threading.current_thread():
            raise RuntimeError("AsyncBridge.close() called from its own loop")
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(drain(), loop).result(10.0)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def _forget(self) -> None:
        """In a forked child: the parent's loop has no thread here."""
        self._lock = threading.Lock()
        self._loop = self._thread = None


def _after_fork_in_child() -> None:
    for bridge in list(_bridges):
        bridge._forget()


os.register_at_fork(after_in_child=_after_fork_in_child)

_default: AsyncBridge | None = None
_default_lock = threading.Lock()


def run_async(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """:meth:`AsyncBridge.run` on this process's default bridge (one per
    process, started at first use, a daemon thread: nothing to close)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = AsyncBridge("harness-run-async")
        bridge = _default
    return bridge.run(coro, timeout)
