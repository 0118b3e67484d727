"""Leases that serve one deployment after another in one process
(:func:`give_pooled`, :func:`take_pooled`): emptied between users instead of
dropped and made again, kept recorded and locked all along, and released at
the process's exit."""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Hashable

from ._postgres import SchemaLease
from ._redis import RedisLease

#: idle leases of this process, emptied and ready: kind -> [(tag, leases)]
_pool: dict[Hashable, list[tuple[str, tuple[SchemaLease | RedisLease, ...]]]] = {}
_pool_lock = threading.Lock()
_pool_pid: list[int] = []
#: a forked child's inherited idle leases: kept referenced, never used nor
#: closed (closing a session the parent shares would end the parent's)
_inherited_pool: list[object] = []
#: idle leases kept per kind; one handed back beyond that is released
POOL_SIZE = 4


def _own_pool() -> None:
    """Under :data:`_pool_lock`: make the pool this process's own."""
    pid = os.getpid()
    if _pool_pid != [pid]:
        if _pool:
            _inherited_pool.append(dict(_pool))
            _pool.clear()
        _pool_pid[:] = [pid]
        atexit.register(_release_pool, pid)


def take_pooled(kind: Hashable) -> tuple[str, tuple[SchemaLease | RedisLease, ...]] | None:
    """Idle leases of ``kind`` (and the tag that names them) that
    :func:`give_pooled` kept in this process, or None: make new ones."""
    with _pool_lock:
        _own_pool()
        free = _pool.get(kind)
        return free.pop() if free else None


def give_pooled(kind: Hashable, tag: str, leases: tuple[SchemaLease | RedisLease, ...]) -> None:
    """Keep ``leases``, emptied by their user (``reset()`` returned True for
    each), for the next :func:`take_pooled` of ``kind`` in this process;
    past :data:`POOL_SIZE` idle ones, release them. ``kind`` must say all
    that a user of them depends on (the servers, what the schema holds)."""
    with _pool_lock:
        _own_pool()
        free = _pool.setdefault(kind, [])
        if len(free) < POOL_SIZE:
            free.append((tag, leases))
            return
    for lease in leases:
        lease.release()


def _release_pool(pid: int) -> None:
    """At exit: release this process's idle leases (drop what they hold)."""
    if os.getpid() != pid:
        return
    with _pool_lock:
        idle = [lease for free in _pool.values() for _, leases in free for lease in leases]
        _pool.clear()
    for lease in idle:
        with contextlib.suppress(Exception):
            lease.release()
