"""Leases and fencing tokens held in Redis (``queue=redis``).

Redis grants leases; the relational store stays the source of truth for state
and checks the fencing token on every commit. A lease is a hash
``{prefix}lease:{run_id}`` with the owner, its expiry in the runtime's clock
(so a virtual clock drives leases exactly as it drives the store), and the
fencing token, which comes from ``INCR {prefix}fence:{run_id}`` inside the same
Lua script -- tokens only ever grow, even across Redis restarts of the lease
hash, because the counter is a separate key.

Why Lua and not ``SET NX PX``: ``PX`` expires in Redis's wall-clock time, which
a harness cannot pause or advance; a paused worker's lease must expire when the
*runtime's* clock says so.

Lost connections: the client carries a name (``CLIENT SETNAME``, from
``RuntimeConfig.connection_name``) so that one deployment's workers can be
found in ``CLIENT LIST``. A connection the server closed while it sat idle is
replaced by redis-py before the next command is sent; one lost while a command
was in flight raises :class:`~reference_runtime.StorageUnavailable`, and the
command is *not* retried here: a retried ``acquire`` whose first attempt ran
would find its own lease and strand it until expiry. The worker decides.

Lost replies: a command whose reply never comes (the network lost it, the
server is gone) fails after :data:`NETWORK_TIMEOUT` seconds (a socket
timeout, and keepalives on idle connections), not after the kernel's
fifteen minutes. Its outcome is then unknown: ``acquire`` and ``renew``
read the lease back on a fresh connection, and a lease that holds exactly
what they wrote is theirs -- never retried blindly.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from .._clock import Clock
from .._errors import ConfigError, LeaseLostError, StorageUnavailable
from ._base import Claim, Store
from ._urls import redact

#: Seconds to wait for the Redis server before calling it unreachable.
CONNECT_TIMEOUT = 5.0
#: Seconds to wait for a reply (or, on an idle connection, for keepalives)
#: before calling a connection lost.
NETWORK_TIMEOUT = 5.0

T = TypeVar("T")

#: Milliseconds every key lives past its last write (``PEXPIRE``): a worker
#: or a whole deployment killed without cleaning up leaves nothing in Redis
#: for longer. Wall-clock time, unlike leases (the runtime's clock, whose
#: leases last seconds to minutes): an hour is far longer than any lease.
KEY_TTL_MS = 3_600_000

# ARGV[4] is the store's fencing token for the run (a floor): a ``fence``
# counter that expired (or a Redis that lost it) restarts above it, never
# below, so the store never refuses every new token.
_ACQUIRE = """
local owner = redis.call('HGET', KEYS[1], 'owner')
local expiry = tonumber(redis.call('HGET', KEYS[1], 'expiry') or '0')
local now = tonumber(ARGV[2])
if owner and expiry >= now then return -1 end
local floor = tonumber(ARGV[4])
if tonumber(redis.call('GET', KEYS[2]) or '0') < floor then
  redis.call('SET', KEYS[2], floor)
end
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'expiry', ARGV[3], 'token', token)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return token
"""

_RENEW = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'token')) ~= tonumber(ARGV[2]) then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'expiry')) < tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'expiry', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 1
"""

_RELEASE = """
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and tonumber(redis.call('HGET', KEYS[1], 'token')) == tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""


class RedisLeases:
    """Lease primitives on one Redis database, under a key prefix.

    ``client_name`` names the connection (``CLIENT SETNAME``). A connection lost
    mid-command raises :class:`StorageUnavailable` (see module docstring).
    """

    def __init__(
        self,
        url: str,
        prefix: str,
        *,
        client_name: str | None = None,
        network_timeout: float = NETWORK_TIMEOUT,
        key_ttl_ms: int = KEY_TTL_MS,
    ) -> None:
        self.key_ttl_ms = key_ttl_ms
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise ConfigError(
                "queue=redis needs the redis package: pip install 'stateful-agent-harness[redis]'"
            ) from exc
        self.prefix = prefix
        self.client_name = client_name
        # No retries, whatever the redis-py version's default: see module docstring.
        self.url = redact(url)
        try:
            # A connect timeout: an unreachable server is reported in seconds,
            # not after the operating system gives up on the socket.
            self.client: Any = redis.Redis.from_url(
                url,
                client_name=client_name,
                retry=Retry(NoBackoff(), 0),
                socket_connect_timeout=CONNECT_TIMEOUT,
                socket_timeout=network_timeout,
                socket_keepalive=True,
                socket_keepalive_options=_keepalive(network_timeout),
            )
        except ValueError as exc:
            raise ConfigError(
                f"bad Redis URL {self.url!r} ({exc}); expected e.g. redis://localhost:6379/0"
            ) from exc
        self._lost: tuple[type[BaseException], ...] = (
            redis.ConnectionError,
            redis.TimeoutError,
        )
        self._acquire = self.client.register_script(_ACQUIRE)
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except self._lost as exc:
            raise StorageUnavailable(
                f"Redis at {self.url} (leases under {self.prefix!r})", exc
            ) from exc

    def _keys(self, run_id: str) -> list[str]:
        return [f"{self.prefix}lease:{run_id}", f"{self.prefix}fence:{run_id}"]

    def _written(self, run_id: str, worker_id: str, expiry: str) -> int | None:
        """After a command whose reply was lost: the lease's token if it holds
        exactly what that command wrote (this owner, this expiry), else None.
        Read on a fresh connection (redis-py drops the broken one)."""
        lease = self._call(lambda: self.client.hgetall(self._keys(run_id)[0]))
        fields = {k.decode(): v.decode() for k, v in lease.items()}
        if fields.get("owner") == worker_id and fields.get("expiry") == expiry:
            return int(fields["token"])
        return None

    def acquire(
        self, run_id: str, worker_id: str, now: float, ttl: float, floor: int = 0
    ) -> int | None:
        """A lease on ``run_id`` and its fencing token (greater than
        ``floor``), or None if another worker holds one."""
        keys = self._keys(run_id)
        args = [worker_id, str(now), str(now + ttl), str(floor), str(self.key_ttl_ms)]
        try:
            token = int(self._call(lambda: self._acquire(keys=keys, args=args)))
        except StorageUnavailable:
            # The lease may be ours, its reply lost: one we hold and do not
            # know of would strand the run until it expires.
            ours = self._written(run_id, worker_id, args[2])
            if ours is None:
                raise
            return ours
        return None if token < 0 else token

    def renew(self, run_id: str, worker_id: str, token: int, now: float, ttl: float) -> bool:
        keys = self._keys(run_id)
        args = [worker_id, str(token), str(now), str(now + ttl), str(self.key_ttl_ms)]
        try:
            return bool(self._call(lambda: self._renew(keys=keys, args=args)))
        except StorageUnavailable:
            if self._written(run_id, worker_id, args[3]) != token:
                raise
            return True

    def release(self, run_id: str, worker_id: str, token: int) -> bool:
        keys, args = self._keys(run_id)[:1], [worker_id, str(token)]
        return bool(self._call(lambda: self._release(keys=keys, args=args)))

    def drop_all(self) -> int:
        """Delete every key under the prefix (test isolation)."""
        keys = self._call(lambda: list(self.client.scan_iter(match=f"{self.prefix}*")))
        return int(self._call(lambda: self.client.delete(*keys))) if keys else 0

    def close(self) -> None:
        self.client.close()


def _keepalive(timeout: float) -> dict[int, int]:
    """TCP options that break a connection whose peer went silent within
    ``timeout`` seconds: unacknowledged data, or an idle connection's
    keepalive probes unanswered."""
    idle = max(1, round(timeout) - 3)
    options = {socket.TCP_KEEPIDLE: idle, socket.TCP_KEEPINTVL: 1, socket.TCP_KEEPCNT: 3}
    user_timeout = getattr(socket, "TCP_USER_TIMEOUT", None)
    if user_timeout is not None:
        options[user_timeout] = round(timeout * 1000)
    return options


def prefix_for(store_url: str, schema: str | None) -> str:
    tag = schema or hashlib.sha256(store_url.encode()).hexdigest()[:12]
    return f"rr:{tag}:"


class CoordinatedConfig(Protocol):
    """The part of a runtime's configuration a coordinator reads."""

    @property
    def store_url(self) -> str: ...

    @property
    def schema(self) -> str | None: ...

    @property
    def redis_url(self) -> str | None: ...

    @property
    def connection_name(self) -> str | None: ...

    @property
    def network_timeout(self) -> float | None: ...

    @property
    def lease_seconds(self) -> float: ...


class CoordinatedRuntime(Protocol):
    """What a coordinator needs of the runtime it grants leases for.

    Described here, structurally, so that the store package never imports the
    runtime module built on top of it (``Runtime`` satisfies it).
    """

    @property
    def config(self) -> CoordinatedConfig: ...

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...


class RedisCoordinator:
    """Claims runs with a Redis lease and records the lease in the store.

    The store's ``runnable`` query decides what may run (timers, waits,
    inbox); Redis decides who runs it. The store then refuses any commit whose
    fencing token is not the newest it has recorded.
    """

    def __init__(self, runtime: CoordinatedRuntime) -> None:
        cfg = runtime.config
        assert cfg.redis_url is not None
        self.runtime = runtime
        self.leases = RedisLeases(
            cfg.redis_url,
            prefix_for(cfg.store_url, cfg.schema),
            client_name=cfg.connection_name,
            network_timeout=cfg.network_timeout or NETWORK_TIMEOUT,
        )

    def claim(self, worker_id: str, run_id: str | None) -> Claim | None:
        rt = self.runtime
        store, now, ttl = rt.store, rt.clock.now(), rt.config.lease_seconds
        candidates = [run_id] if run_id else store.runnable(now)
        for rid in candidates:
            if run_id and rid not in store.runnable(now):
                return None
            current = store.get_run(rid)
            floor = current.fencing_token if current is not None else 0
            token = self.leases.acquire(rid, worker_id, now, ttl, floor)
            if token is None:
                continue
            try:
                recorded = store.record_lease(rid, worker_id, token, now + ttl)
            except StorageUnavailable:
                # Hand the Redis lease back rather than strand it until expiry.
                with contextlib.suppress(StorageUnavailable):
                    self.leases.release(rid, worker_id, token)
                raise
            if not recorded:
                self.leases.release(rid, worker_id, token)
                continue
            run = store.get_run(rid)
            assert run is not None
            return Claim(run=run, worker_id=worker_id, fencing_token=token, lease_expiry=now + ttl)
        return None

    def renew(self, claim: Claim, now: float, ttl: float) -> Claim:
        if not self.leases.renew(claim.run.run_id, claim.worker_id, claim.fencing_token, now, ttl):
            raise LeaseLostError(
                claim.run.run_id, claim.worker_id, claim.fencing_token, "Redis lease lost"
            )
        return self.runtime.store.renew_lease(claim, now, ttl)

    def release(self, claim: Claim) -> None:
        self.leases.release(claim.run.run_id, claim.worker_id, claim.fencing_token)
        self.runtime.store.release(claim)
