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
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from .._errors import ConfigError, LeaseLostError
from ._base import Claim

if TYPE_CHECKING:
    from .._runtime import Runtime

_ACQUIRE = """
local owner = redis.call('HGET', KEYS[1], 'owner')
local expiry = tonumber(redis.call('HGET', KEYS[1], 'expiry') or '0')
local now = tonumber(ARGV[2])
if owner and expiry >= now then return -1 end
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'expiry', ARGV[3], 'token', token)
return token
"""

_RENEW = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'token')) ~= tonumber(ARGV[2]) then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'expiry')) < tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'expiry', ARGV[4])
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
    """Lease primitives on one Redis database, under a key prefix."""

    def __init__(self, url: str, prefix: str) -> None:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise ConfigError(
                "queue=redis needs the redis package: pip install 'stateful-agent-harness[redis]'"
            ) from exc
        self.prefix = prefix
        self.client: Any = redis.Redis.from_url(url)
        self._acquire = self.client.register_script(_ACQUIRE)
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)

    def _keys(self, run_id: str) -> list[str]:
        return [f"{self.prefix}lease:{run_id}", f"{self.prefix}fence:{run_id}"]

    def acquire(self, run_id: str, worker_id: str, now: float, ttl: float) -> int | None:
        token = int(self._acquire(keys=self._keys(run_id), args=[worker_id, now, now + ttl]))
        return None if token < 0 else token

    def renew(self, run_id: str, worker_id: str, token: int, now: float, ttl: float) -> bool:
        keys = self._keys(run_id)[:1]
        return bool(self._renew(keys=keys, args=[worker_id, token, now, now + ttl]))

    def release(self, run_id: str, worker_id: str, token: int) -> bool:
        return bool(self._release(keys=self._keys(run_id)[:1], args=[worker_id, token]))

    def drop_all(self) -> int:
        """Delete every key under the prefix (test isolation)."""
        keys = list(self.client.scan_iter(match=f"{self.prefix}*"))
        return int(self.client.delete(*keys)) if keys else 0

    def close(self) -> None:
        self.client.close()


def prefix_for(store_url: str, schema: str | None) -> str:
    tag = schema or hashlib.sha256(store_url.encode()).hexdigest()[:12]
    return f"rr:{tag}:"


class RedisCoordinator:
    """Claims runs with a Redis lease and records the lease in the store.

    The store's ``runnable`` query decides what may run (timers, waits,
    inbox); Redis decides who runs it. The store then refuses any commit whose
    fencing token is not the newest it has recorded.
    """

    def __init__(self, runtime: Runtime) -> None:
        cfg = runtime.config
        assert cfg.redis_url is not None
        self.runtime = runtime
        self.leases = RedisLeases(cfg.redis_url, prefix_for(cfg.store_url, cfg.schema))

    def claim(self, worker_id: str, run_id: str | None) -> Claim | None:
        rt = self.runtime
        store, now, ttl = rt.store, rt.clock.now(), rt.config.lease_seconds
        candidates = [run_id] if run_id else store.runnable(now)
        for rid in candidates:
            if run_id and rid not in store.runnable(now):
                return None
            token = self.leases.acquire(rid, worker_id, now, ttl)
            if token is None:
                continue
            if not store.record_lease(rid, worker_id, token, now + ttl):
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
