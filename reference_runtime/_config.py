"""Configuration of a deployment.

One :class:`RuntimeConfig` (frozen) describes a deployment; it round-trips
through environment variables (``RR_*``) so a supervisor can hand it to worker
processes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ._bugs import parse_bugs
from ._clock import Clock, FileClock, SystemClock
from ._errors import ConfigError
from ._workflows import CURRENT_CODE_VERSION

#: an external call is started only with at least this many seconds of lease left
LEASE_MARGIN = 1.0
#: the shortest lease that leaves a worker time to call out after the margin:
#: with less, every attempt to call gives up and the run never moves on
MIN_LEASE_SECONDS = 2 * LEASE_MARGIN


def _parse_keys(spec: str) -> dict[str, bytes]:
    keys: dict[str, bytes] = {}
    for term in filter(None, (t.strip() for t in spec.split(","))):
        tenant, sep, hexkey = term.partition("=")
        try:
            if not sep:
                raise ValueError("missing '='")
            if not tenant:
                raise ValueError("the tenant name is empty")
            key = bytes.fromhex(hexkey)
            # An empty key would make every HMAC computable by anyone: a
            # forger could sign approvals for this tenant.
            if not key:
                raise ValueError("the key is empty")
            keys[tenant] = key
        except ValueError as exc:
            raise ConfigError(
                f"bad tenant key {term!r} ({exc}); expected TENANT=HEXKEY, e.g. acme=00ff10"
            ) from exc
    return keys


_CONNECTION_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,63}")


@dataclass(frozen=True)
class RuntimeConfig:
    """Everything a worker needs to know. ``from_env``/``to_env`` round-trip it."""

    store_url: str
    schema: str | None = None
    services: str | None = None
    services_arg: str | None = None
    clock: str = "system"  # or "file:/path/to/clock"
    artifact_dir: str | None = None
    queue: str = "store"  # or "redis"
    redis_url: str | None = None
    code_version: int = CURRENT_CODE_VERSION
    lease_seconds: float = 30.0
    max_attempts: int = 5
    retry_backoff: float = 1.0
    tenant_keys: Mapping[str, bytes] = field(default_factory=dict)
    #: names this process's storage sessions: the Postgres ``application_name``
    #: and the Redis client name, so an operator can find (and end) them
    connection_name: str | None = None
    #: seeded bugs to switch on (names from :data:`reference_runtime._bugs.BUGS`);
    #: empty in any real deployment
    bugs: frozenset[str] = frozenset()
    #: seconds after which a Postgres or Redis connection whose peer went
    #: silent (a lost acknowledgement, a partition) is broken; ``None``: the
    #: store's own default (5 s). Lower fails over sooner after a network fault.
    network_timeout: float | None = None

    def __post_init__(self) -> None:
        # Validated (and normalized from any iterable) here, once: deeper code
        # only asks ``name in bugs``, so a misspelt name must never get there.
        object.__setattr__(self, "bugs", parse_bugs(self.bugs))
        if self.queue not in ("store", "redis"):
            raise ConfigError(f"queue must be 'store' or 'redis', got {self.queue!r}")
        if self.queue == "redis" and not self.redis_url:
            raise ConfigError("queue='redis' needs redis_url (or RR_REDIS_URL)")
        if not (self.clock == "system" or self.clock.startswith("file:")) or self.clock == "file:":
            raise ConfigError(f"clock must be 'system' or 'file:PATH', got {self.clock!r}")
        if not self.lease_seconds >= MIN_LEASE_SECONDS:  # NaN too
            raise ConfigError(
                f"lease_seconds must be at least {MIN_LEASE_SECONDS:g}, got {self.lease_seconds}: "
                f"an external call needs {LEASE_MARGIN:g} s of lease left when it starts, so a "
                "shorter lease never lets a worker call out"
            )
        if self.network_timeout is not None and not 0 < self.network_timeout < float("inf"):
            raise ConfigError(
                f"network_timeout must be a positive number of seconds, got "
                f"{self.network_timeout!r}: e.g. 5 (or leave it unset for the default)"
            )
        if self.connection_name is not None and not _CONNECTION_NAME.fullmatch(
            self.connection_name
        ):
            # Redis refuses spaces in a client name; Postgres truncates at 63.
            raise ConfigError(
                f"connection_name {self.connection_name!r} is not usable as a Postgres "
                "application_name and a Redis client name: use 1-63 letters, digits or "
                "'_.:-', e.g. 'rr-worker-prod'"
            )

    _ENV = {
        "store_url": "RR_STORE",
        "schema": "RR_SCHEMA",
        "services": "RR_SERVICES",
        "services_arg": "RR_SERVICES_ARG",
        "clock": "RR_CLOCK",
        "artifact_dir": "RR_ARTIFACTS",
        "queue": "RR_QUEUE",
        "redis_url": "RR_REDIS_URL",
        "code_version": "RR_CODE_VERSION",
        "lease_seconds": "RR_LEASE_SECONDS",
        "max_attempts": "RR_MAX_ATTEMPTS",
        "retry_backoff": "RR_RETRY_BACKOFF",
        "connection_name": "RR_CONNECTION_NAME",
        "network_timeout": "RR_NETWORK_TIMEOUT",
    }

    def to_env(self) -> dict[str, str]:
        env = {
            var: str(getattr(self, name))
            for name, var in self._ENV.items()
            if getattr(self, name) is not None
        }
        env["RR_TENANT_KEYS"] = ",".join(f"{t}={k.hex()}" for t, k in self.tenant_keys.items())
        env["RR_BUGS"] = ",".join(sorted(self.bugs))
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RuntimeConfig:
        env = os.environ if env is None else env
        if not env.get("RR_STORE", "").strip():
            # Empty counts as unset: `RR_STORE= cmd` and `--store ''` used to
            # get past this check and fail later with a TypeError.
            state = "is empty" if "RR_STORE" in env else "is not set"
            raise ConfigError(
                f"RR_STORE {state}: name the store with --store or RR_STORE, "
                "e.g. RR_STORE=sqlite:///tmp/agent.db"
            )
        kwargs: dict[str, Any] = {}
        types = {
            "code_version": int,
            "lease_seconds": float,
            "max_attempts": int,
            "retry_backoff": float,
            "network_timeout": float,
        }
        for name, var in cls._ENV.items():
            if var in env and env[var] != "":
                try:
                    kwargs[name] = types.get(name, str)(env[var])
                except ValueError as exc:
                    raise ConfigError(f"{var}={env[var]!r} is not a valid {name}") from exc
        kwargs["tenant_keys"] = _parse_keys(env.get("RR_TENANT_KEYS", ""))
        kwargs["bugs"] = parse_bugs(env.get("RR_BUGS", ""))
        return cls(**kwargs)

    def with_(self, **changes: Any) -> RuntimeConfig:
        return replace(self, **changes)


def open_clock(spec: str) -> Clock:
    if spec == "system":
        return SystemClock()
    return FileClock(spec.removeprefix("file:"))
