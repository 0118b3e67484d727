"""SQLAlchemy's compiled statements, shared by forked workers' engines.

A runtime built on SQLAlchemy Core (DBOS's system database) makes a new
engine in every process, and an engine starts with an empty compiled cache:
each worker compiles every statement it runs once more, for a worker that
lives a fraction of a second the bulk of its client CPU. SQLAlchemy keys a
compiled statement by the statement's cache key *and the dialect object*,
so two engines never share one, even when their dialects would compile the
same SQL. :class:`CompiledCache` is a ``compiled_cache`` (the engine's
``execution_options``) that files an entry under the first dialect seen
with the same fingerprint instead: filled in a fork server (a warm call that
runs the runtime once), it serves every forked worker's new engine.
"""

from __future__ import annotations

from typing import Any

#: an attribute value that is a setting (compared by value)
_PLAIN = (str, bytes, int, float, bool, type(None))


def _plain(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(isinstance(item, _PLAIN) for item in value)
    return isinstance(value, _PLAIN)


def _settings(obj: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, v) for k, v in vars(obj).items() if _plain(v)))


def dialect_fingerprint(dialect: Any) -> tuple[Any, ...]:
    """What the SQL a dialect compiles can depend on: its class, every plain
    setting among its attributes (paramstyle, server version, flags its
    ``initialize()`` set...), and for each other attribute (its identifier
    preparer, type compiler, DB-API module...) its type and plain settings.
    Two dialects with equal fingerprints compile a statement alike."""
    helpers = []
    for name, value in sorted(vars(dialect).items(), key=lambda item: item[0]):
        if not _plain(value):
            own = _settings(value) if hasattr(value, "__dict__") else ()
            helpers.append((name, type(value), own))
    return (type(dialect), _settings(dialect), tuple(helpers))


class CompiledCache:
    """A SQLAlchemy ``compiled_cache`` that engines with equivalent dialects
    share: pass it as ``create_engine(..., execution_options={"compiled_cache":
    cache})`` (a runtime's engine keywords), in a fork server and in every
    worker it forks.

    SQLAlchemy looks a statement up by ``(dialect, cache key, ...)``; this
    cache files it under the *canonical* dialect of the first one's
    :func:`dialect_fingerprint` instead, so a worker's new engine finds what
    the fork server's engine compiled, as long as its dialect is the same
    class with the same settings. A dialect whose fingerprint differs (other
    driver options, another server version), or that is not initialized yet
    (no ``server_version_info``), keeps entries of its own, as its engine's
    own cache would. An entry is the very object SQLAlchemy compiled for an
    equivalent dialect: the SQL and the parameter processing are what the
    worker's engine would have compiled itself. At most ``size`` entries are
    kept (past that, a new statement is compiled and not kept)."""

    def __init__(self, size: int = 1000) -> None:
        self.size = size
        self._entries: dict[Any, Any] = {}
        #: fingerprint -> the first dialect seen with it
        self._canonical: dict[Any, Any] = {}
        #: dialect -> its canonical dialect
        self._seen: dict[Any, Any] = {}

    def _key(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        dialect = key[0]
        canonical = self._seen.get(dialect)
        if canonical is None:
            if getattr(dialect, "server_version_info", None) is None:
                return key  # not initialized: its settings may still change
            fingerprint = dialect_fingerprint(dialect)
            canonical = self._seen[dialect] = self._canonical.setdefault(fingerprint, dialect)
        return (canonical, *key[1:])

    def get(self, key: tuple[Any, ...], default: Any = None) -> Any:
        return self._entries.get(self._key(key), default)

    def __setitem__(self, key: tuple[Any, ...], value: Any) -> None:
        if len(self._entries) < self.size:
            self._entries[self._key(key)] = value

    def __len__(self) -> int:
        return len(self._entries)
