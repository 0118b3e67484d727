"""Redis key prefixes the harness owns (:class:`RedisLease`): an ``alive``
key a daemon thread renews, set by the script that records the prefix in
the set :data:`OWNED_PREFIXES`; and the sweep that deletes the keys of the
recorded prefixes whose ``alive`` key expired (:func:`sweep_redis`)."""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from typing import Any

from ._servers import _OWNED_PREFIX, CONNECT_TIMEOUT, _sweep_first

#: seconds an ``alive`` key outlives its last renewal (renewed every sixth)
ALIVE_TTL = 30.0

#: the Redis set of the key prefixes the harness made (:class:`RedisLease`)
OWNED_PREFIXES = "harness:owned-prefixes"
#: milliseconds the set outlives the last lease that renewed it: like every
#: key the harness writes, it expires on its own (a record it loses so is
#: harmless: the keys it named expire too, see redis_queue.KEY_TTL_MS)
OWNED_PREFIXES_TTL_MS = 3_600_000

#: the key under a prefix that says its owner is alive
ALIVE = "alive"

#: set the ``alive`` key unless it exists, and record the prefix, at once
_CLAIM = """
local kind = redis.call('TYPE', KEYS[2]).ok
if kind ~= 'set' and kind ~= 'none' then return -1 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('SADD', KEYS[2], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return 1
end
return 0
"""


def _delete_under(client: Any, prefix: str) -> int:
    """Delete every key under ``prefix`` (a name of :data:`_OWNED_PREFIX`'s
    shape: no glob characters to escape)."""
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    return int(client.delete(*keys)) if keys else 0


class RedisLease:
    """This process owns the Redis keys under ``prefix`` while the lease is held.

    Take it before writing any key there: one script sets ``<prefix>alive``
    (unless it exists: then the prefix is someone else's and
    :class:`RuntimeError` says so) with a TTL of :data:`ALIVE_TTL`, renewed
    from a daemon thread, and adds ``prefix`` to :data:`OWNED_PREFIXES`. A
    sweeper deletes a recorded prefix's keys only once its ``alive`` key is
    gone. :meth:`release` deletes the prefix's keys, its record and the
    ``alive`` key, in that order.
    """

    def __init__(self, url: str, prefix: str, ttl: float | None = None) -> None:
        import redis

        if not _OWNED_PREFIX.match(prefix):
            raise ValueError(f"key prefix {prefix!r} is not one the harness makes (see tag())")
        _sweep_first("redis", url, sweep_redis)
        self.prefix = prefix
        self.key = f"{prefix}{ALIVE}"
        self._ttl_ms = int((ttl if ttl is not None else ALIVE_TTL) * 1000)
        self._client: Any = redis.Redis.from_url(
            url, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=CONNECT_TIMEOUT
        )
        self._token = f"{os.getpid()}:{uuid.uuid4().hex}"
        self._stop = threading.Event()
        try:
            claimed = self._client.eval(
                _CLAIM,
                2,
                self.key,
                OWNED_PREFIXES,
                self._token,
                self._ttl_ms,
                prefix,
                OWNED_PREFIXES_TTL_MS,
            )
            if claimed == -1:
                raise RuntimeError(
                    f"the Redis key {OWNED_PREFIXES!r} is not a set the harness made; the "
                    "harness records its key prefixes there: rename or delete that key"
                )
            if not claimed:
                raise RuntimeError(f"key prefix {prefix!r} is already owned by another process")
        except BaseException:
            self._client.close()
            raise
        self._thread = threading.Thread(
            target=self._renew, name=f"harness-alive:{prefix}", daemon=True
        )
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self._ttl_ms / 6000):
            # A failed renewal is retried at the next tick; if the server stays
            # away past the TTL, so do the keys a sweeper could delete.
            with contextlib.suppress(Exception):
                pipe = self._client.pipeline(transaction=False)
                pipe.set(self.key, self._token, px=self._ttl_ms)
                pipe.pexpire(OWNED_PREFIXES, OWNED_PREFIXES_TTL_MS)
                pipe.execute()

    def reset(self, *, sessions: str | None = None) -> bool:
        """Empty the prefix for its next user; whether it did. First ends the
        client connections called ``sessions`` (the former user's workers, as
        :meth:`SchemaLease.reset` does), then deletes every key under the
        prefix but the ``alive`` key, which keeps the prefix recorded as ours."""
        try:
            if sessions:
                for c in self._client.client_list():
                    if c.get("name") == sessions:
                        self._client.execute_command("CLIENT", "KILL", "ID", c["id"])
            keys = [
                k
                for k in self._client.scan_iter(match=f"{self.prefix}*", count=1000)
                if k != self.key.encode()
            ]
            if keys:
                self._client.delete(*keys)
        except Exception:
            return False
        return True

    def release(self) -> None:
        """Stop renewing; delete the prefix's keys, its record, then the
        ``alive`` key (what fails is the next sweep's, or expires)."""
        self._stop.set()
        self._thread.join()
        try:
            with contextlib.suppress(Exception):
                _delete_under(self._client, self.prefix)
                self._client.srem(OWNED_PREFIXES, self.prefix)
                self._client.delete(self.key)
        finally:
            self._client.close()


def sweep_redis(url: str) -> int:
    """Delete the keys of the prefixes recorded in :data:`OWNED_PREFIXES`
    whose owner is gone (and their records); returns how many keys."""
    import redis

    client: Any = redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT)
    try:
        try:
            recorded = client.smembers(OWNED_PREFIXES)
        except redis.ResponseError:
            return 0  # not a set: not a record the harness wrote
        dead = []
        for raw in recorded:
            prefix = raw.decode(errors="replace")
            if not _OWNED_PREFIX.match(prefix):
                continue  # not a prefix the harness makes: a record it did not write
            if not client.exists(f"{prefix}{ALIVE}"):
                dead.append(prefix)
        if not dead:
            return 0
        # One pass over the keyspace, however many prefixes are dead (every
        # prefix of that shape starts with "rr:").
        doomed, wanted = [], set(dead)
        for key in client.scan_iter(match="rr:*", count=1000):
            parts = key.decode(errors="replace").split(":", 2)
            if len(parts) == 3 and f"rr:{parts[1]}:" in wanted:
                doomed.append(key)
        deleted = int(client.delete(*doomed)) if doomed else 0
        client.srem(OWNED_PREFIXES, *dead)
        return deleted
    finally:
        client.close()
