"""The reference runtime behind the adapter contract.

Workers are forked from a preloading :class:`~harness.procs.ForkServer`
(shared by every environment of one adapter), so a kill-and-restart costs a
fork. Each environment is a :class:`~._deployment.Deployment`: its own store
(SQLite file or Postgres schema), Redis prefix, world, virtual clock and keys.

This module holds the adapter (its options, the services it reaches);
``_environment`` one environment, ``_tables`` what the runtime declares.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reference_runtime._bugs import BUGS, SeededBug
from reference_runtime._workflows import Registry
from reference_runtime.store._urls import redact

from ..._errors import AdapterLoadError
from ..._janitor import CONNECT_TIMEOUT, sweep
from .._contract import Capability, WorkflowSpec
from ._environment import ReferenceEnvironment
from ._tables import (
    DELIVERY,
    MAX_WAIT,
    NEEDS_APPROVAL,
    OPERATION_STATUS,
    RETRY_LIMIT,
    VOLATILE,
    WORKFLOWS,
    downgrade,
    normalize,
)

__all__ = [
    "DELIVERY",
    "MAX_WAIT",
    "NEEDS_APPROVAL",
    "NETWORK_TIMEOUT",
    "OPERATION_STATUS",
    "RETRY_LIMIT",
    "VOLATILE",
    "WORKFLOWS",
    "ReferenceAdapter",
    "ReferenceEnvironment",
    "downgrade",
    "normalize",
]


_swept: set[tuple[str | None, str | None]] = set()


def _reach(option: str, url: str) -> None:
    """Connect to the server ``url`` names once, or say which option is wrong.

    Every worker, observer and sweep would otherwise fail on its own, deep in
    a run, with the client library's traceback."""
    try:
        # A client library that is not installed is a missing extra, not a bad URL.
        if option == "postgres_url":
            import psycopg
        else:
            import redis
    except ImportError as exc:
        raise AdapterLoadError(
            f"{option} needs the {exc.name or 'client'} package, which is not installed "
            f"({exc}); install the extra: pip install 'stateful-agent-harness[postgres,redis]' "
            "(or pip install -e '.[postgres,redis]' in a clone)"
        ) from None
    try:
        if option == "postgres_url":
            psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT).close()
        else:
            client = redis.Redis.from_url(
                url, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=CONNECT_TIMEOUT
            )
            try:
                client.ping()
            finally:
                client.close()
    except Exception as exc:
        example = (
            "postgresql://user@127.0.0.1:5432/test"
            if option == "postgres_url"
            else "redis://127.0.0.1:6379/0"
        )
        raise AdapterLoadError(
            f"{option}={redact(url)!r}: cannot use it ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())}); check the URL (e.g. {example}) and that the "
            "server is up and reachable from here"
        ) from exc


def _sweep_once(postgres_url: str | None, redis_url: str | None) -> None:
    """Check that the servers answer, then drop schemas and keys of harness
    processes that were killed before they could clean up (once per process
    and service pair)."""
    key = (postgres_url, redis_url)
    if key in _swept or key == (None, None):
        return
    if postgres_url:
        _reach("postgres_url", postgres_url)
    if redis_url:
        _reach("redis_url", redis_url)
    _swept.add(key)
    sweep(postgres_url, redis_url)


#: seconds a deployment's connection to a silent Postgres or Redis peer
#: lives (the kernel acknowledges within milliseconds on loopback, however
#: loaded the machine: only a real network fault runs this out)
NETWORK_TIMEOUT = 2.0


class ReferenceAdapter:
    """The reference runtime: ``backend`` sqlite|postgres, ``queue`` store|redis.

    ``storage_faults`` is declared only where there is a server connection to
    cut: with the Postgres backend, the Redis queue, or both;
    ``network_faults`` with the Postgres backend. ``network_timeout``: the
    seconds after which a worker's Postgres or Redis connection whose peer went
    silent is broken (the runtime's ``network_timeout``): every lost
    acknowledgement and partition costs one, so the harness's deployments use
    :data:`NETWORK_TIMEOUT`, shorter than the runtime's 5 s default.
    """

    name = "reference"
    #: its workers' store connections go through proxies of their own when
    #: the network faults run on Toxiproxy (``route_worker``): a reply held
    #: back, fragmented or cut can reach them
    routes_workers = True
    #: a worker claims until nothing is claimable now (``run_until_idle``)
    drains = True
    capabilities: frozenset[Capability] = frozenset(
        {
            Capability.CRASH_POINTS,
            Capability.CLOCK,
            Capability.APPROVALS,
            Capability.MEMORY_INJECTION,
            Capability.VERSION_SWITCH,
            Capability.CONTEXT,
            Capability.CONCURRENT_WORKERS,
            Capability.CANCEL,
            Capability.DURABLE_STATE,
            Capability.OPERATIONS,
        }
    )

    def __init__(
        self,
        backend: str = "sqlite",
        queue: str = "store",
        *,
        postgres_url: str | None = None,
        redis_url: str | None = None,
        lease_seconds: float = 30.0,
        bugs: frozenset[str] = frozenset(),
        network_timeout: float = NETWORK_TIMEOUT,
    ) -> None:
        self.backend, self.queue = backend, queue
        self.network_timeout = network_timeout
        self.postgres_url, self.redis_url = postgres_url, redis_url
        self.lease_seconds = lease_seconds
        #: an older release's worker parks a run newer code touched (see
        #: ``Adapter.rolls_back``): rollback orders are tested
        self.rolls_back = True
        self.keeps_definitions = True  # a run stays on its definition (Adapter.keeps_definitions)
        #: seeded bugs switched on in every worker (``bug=NAME``; see ``harness list bugs``)
        self.bugs = frozenset(bugs)
        _sweep_once(
            postgres_url if backend == "postgres" else None, redis_url if queue == "redis" else None
        )
        if backend == "postgres" or queue == "redis":
            self.capabilities = self.capabilities | {Capability.STORAGE_FAULTS}
        if backend == "postgres":
            # Its workers name the Postgres connection they hold at a crash
            # point; the Redis queue's connections are not named (yet).
            self.capabilities = self.capabilities | {Capability.NETWORK_FAULTS}

    def workflows(self) -> list[WorkflowSpec]:
        return list(WORKFLOWS)

    def seeded_bugs(self) -> list[SeededBug]:
        """The reference runtime's seeded bugs (``bug=NAME``): the optional
        ``SeededBugs`` hook, which ``harness list bugs`` asks."""
        return list(BUGS.values())

    def network_services(self) -> dict[str, str]:
        """The servers a worker's connections go to, by service, the store
        of its transactions first (optional in the contract: which network
        faults the kernel backend can reach, see ``offered_network_kinds``)."""
        out: dict[str, str] = {}
        if self.backend == "postgres" and self.postgres_url:
            out["postgres"] = self.postgres_url
        if self.queue == "redis" and self.redis_url:
            out["redis"] = self.redis_url
        return out

    def migrated_input(
        self, workflow: str, input: dict[str, Any], code_version: int
    ) -> dict[str, Any]:
        """The input of a run that release ``code_version`` accepted, as today's
        code holds it after the upgrade (optional in the contract: the oracle
        of a run carried across a release). What the old release could not
        record is gone (a v1 refund has no currency, so it is in dollars)."""
        old = Registry(code_version).payload_version(workflow)
        return Registry().upgrade(workflow, downgrade(workflow, input, code_version), old)

    def open(self, workdir: Path, *, seed: int) -> ReferenceEnvironment:
        return ReferenceEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend": self.backend,
            "queue": self.queue,
            "lease_seconds": self.lease_seconds,
        }
        if self.bugs:
            out["bug"] = ",".join(sorted(self.bugs))
        if self.network_timeout != NETWORK_TIMEOUT:
            out["network_timeout"] = self.network_timeout
        return out
