"""The reference adapter's options, as the command line gives them: text.

``--adapter reference --adapter-opt backend=postgres`` loads the entry point
``reference`` (``harness.adapters.reference:from_options``): the adapter
parses its own options, so the loader knows nothing of any adapter's.
"""

from __future__ import annotations

import math

from ..._errors import AdapterLoadError
from ._adapter import ReferenceAdapter

#: the options ``--adapter-opt`` may give the reference adapter
OPTIONS = frozenset(
    {"backend", "queue", "lease_seconds", "postgres_url", "redis_url", "bug", "network_timeout"}
)


def from_options(**opts: str) -> ReferenceAdapter:
    """The reference adapter ``--adapter-opt KEY=VALUE`` describes, each
    value checked: ``backend`` sqlite|postgres, ``queue`` store|redis,
    ``bug`` NAME[,NAME] (seeded bugs: ``harness list bugs``),
    ``lease_seconds``, ``postgres_url``, ``redis_url`` (default: the
    services the environment names), ``network_timeout``. Raises
    :class:`~harness.AdapterLoadError` (exit 2) naming the wrong value."""
    from reference_runtime import ConfigError, service_urls
    from reference_runtime._bugs import parse_bugs
    from reference_runtime._config import MIN_LEASE_SECONDS

    unknown = set(opts) - OPTIONS
    if unknown:
        raise AdapterLoadError(
            f"the reference adapter has no option {', '.join(sorted(unknown))}; "
            f"known options: {', '.join(sorted(OPTIONS))}"
        )
    backend = opts.get("backend", "sqlite")
    queue = opts.get("queue", "store")
    if backend not in ("sqlite", "postgres"):
        raise AdapterLoadError(f"backend={backend!r}: choose sqlite or postgres")
    if queue not in ("store", "redis"):
        raise AdapterLoadError(f"queue={queue!r}: choose store or redis")
    try:
        # bug=NAME or bug=NAME,NAME: seeded bugs of the reference runtime
        bugs = parse_bugs(opts.get("bug", ""))
    except ConfigError as exc:
        raise AdapterLoadError(f"bug={opts['bug']!r}: {exc}; harness list bugs") from exc
    try:
        pg = opts.get("postgres_url") or (
            service_urls.postgres_url() if backend == "postgres" else None
        )
        rd = opts.get("redis_url") or (service_urls.redis_url() if queue == "redis" else None)
    except service_urls.ServiceUnavailable as exc:
        raise AdapterLoadError(str(exc)) from exc
    try:
        lease = float(opts.get("lease_seconds", "30"))
    except ValueError as exc:
        raise AdapterLoadError(f"lease_seconds={opts['lease_seconds']!r} is not a number") from exc
    if not math.isfinite(lease) or not MIN_LEASE_SECONDS <= lease <= 86_400:
        raise AdapterLoadError(
            f"lease_seconds={opts['lease_seconds']!r} is out of range: a worker's lease must "
            f"be a finite number of seconds from {MIN_LEASE_SECONDS:g} to 86400 (the runtime "
            "starts an external call only with a second of lease left)"
        )
    extra: dict[str, float] = {}
    if "network_timeout" in opts:
        try:
            extra["network_timeout"] = float(opts["network_timeout"])
        except ValueError:
            extra["network_timeout"] = math.nan
        if not 0.5 <= extra["network_timeout"] <= 3_600:  # NaN too
            raise AdapterLoadError(
                f"network_timeout={opts['network_timeout']!r}: give the seconds after which a "
                "worker's connection to a silent Postgres or Redis server is broken, from 0.5 "
                "to 3600 (e.g. 5)"
            )
    return ReferenceAdapter(
        backend, queue, postgres_url=pg, redis_url=rd, lease_seconds=lease, bugs=bugs, **extra
    )
