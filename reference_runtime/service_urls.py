"""Where the external services (Postgres, Redis) for tests and demos live.

Resolution order for each service:

1. the environment: ``HARNESS_POSTGRES_URL`` / ``HARNESS_REDIS_URL``;
2. a throwaway container, if the ``testcontainers`` package is importable and
   a Docker engine answers (started once per process, stopped at exit);
3. otherwise :class:`ServiceUnavailable`, whose message says which variable
   to set.

:func:`services_required` tells a test suite whether a missing service is a
skip (laptop) or a failure (CI sets ``HARNESS_REQUIRE_SERVICES=1``).
"""

from __future__ import annotations

import atexit
import importlib
import os
import threading
from collections.abc import Callable
from typing import Any

from ._errors import RuntimeFault

__all__ = ["ServiceUnavailable", "postgres_url", "redis_url", "services_required"]

ENV_POSTGRES = "HARNESS_POSTGRES_URL"
ENV_REDIS = "HARNESS_REDIS_URL"
ENV_REQUIRE = "HARNESS_REQUIRE_SERVICES"

POSTGRES_IMAGE = "postgres:16-alpine"
REDIS_IMAGE = "redis:7-alpine"


class ServiceUnavailable(RuntimeFault):
    """No URL is configured for a service and none could be started.

    The outside world's fault, not the code's: ``reason`` says what was tried
    and which environment variable to set.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


_lock = threading.Lock()
# Per process: a forked child must not reuse (or stop) its parent's container.
_started: dict[tuple[int, str], str] = {}


def postgres_url() -> str:
    """A PostgreSQL URL (``postgresql://...``); see the module docstring."""
    return _resolve("Postgres", ENV_POSTGRES, _start_postgres)


def redis_url() -> str:
    """A Redis URL (``redis://host:port/0``); see the module docstring."""
    return _resolve("Redis", ENV_REDIS, _start_redis)


def services_required() -> bool:
    """True when ``HARNESS_REQUIRE_SERVICES`` is ``1`` (or ``true``/``yes``): a
    missing service must then fail the tests instead of skipping them."""
    return os.environ.get(ENV_REQUIRE, "").strip().lower() in ("1", "true", "yes")


def _resolve(service: str, env: str, start: Callable[[], str]) -> str:
    url = os.environ.get(env, "").strip()
    if url:
        return url
    key = (os.getpid(), service)
    with _lock:
        if key in _started:
            return _started[key]
        why = _docker_unavailable()
        if why:
            raise ServiceUnavailable(
                f"no {service} available: {env} is not set and {why}. "
                f"Set {env} to the URL of a running {service} server."
            )
        try:
            url = start()
        except Exception as exc:  # the Docker engine or the image registry failed
            raise ServiceUnavailable(
                f"no {service} available: {env} is not set and starting a container "
                f"failed ({type(exc).__name__}: {exc}). Set {env} to the URL of a running "
                f"{service} server."
            ) from exc
        _started[key] = url
        return url


def _docker_unavailable() -> str | None:
    """Why no container can be started here, or None if one can."""
    try:
        importlib.import_module("testcontainers")
        docker: Any = importlib.import_module("docker")
    except ImportError:
        return "the 'testcontainers' package is not installed (pip install '.[docker]')"
    try:
        # A short timeout: no engine must mean a quick skip, not a hang.
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        return f"no Docker engine is reachable ({type(exc).__name__})"
    return None


def _stop_at_exit(container: Any) -> None:
    pid = os.getpid()

    def stop() -> None:
        if os.getpid() == pid:  # only the process that started it
            container.stop()

    atexit.register(stop)


def _start_postgres() -> str:
    module: Any = importlib.import_module("testcontainers.postgres")
    container = module.PostgresContainer(POSTGRES_IMAGE)
    container.start()
    _stop_at_exit(container)
    url: str = container.get_connection_url(driver=None)
    return url


def _start_redis() -> str:
    module: Any = importlib.import_module("testcontainers.redis")
    container = module.RedisContainer(REDIS_IMAGE)
    container.start()
    _stop_at_exit(container)
    host = container.get_container_host_ip()
    port = container.get_exposed_port(6379)
    return f"redis://{host}:{port}/0"
