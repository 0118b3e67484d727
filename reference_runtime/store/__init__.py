"""Storage backends behind one contract (see :mod:`reference_runtime.store._base`).

:func:`open_store` turns a URL into a backend; backends are imported only when
asked for, so the Postgres driver stays an optional extra.
"""

from __future__ import annotations

from .._errors import ConfigError
from ._base import Claim, Commit, RetentionPolicy, Snapshot, Store
from ._urls import redact as _redact

__all__ = ["Claim", "Commit", "RetentionPolicy", "Snapshot", "Store", "open_store"]

_EXAMPLES = (
    "'sqlite:///var/lib/harness/runs.db' (absolute path), 'sqlite:runs.db' (relative "
    "path) or 'postgresql://user@localhost:5432/dbname'"
)


def open_store(
    url: str,
    *,
    schema: str | None = None,
    connection_name: str | None = None,
    read_only: bool = False,
    network_timeout: float | None = None,
) -> Store:
    """A store for ``url``; call ``setup()`` on it before first use.

    Accepted: ``sqlite:///abs/path.db``, ``sqlite:relative/path.db`` and
    ``postgresql://...`` (or ``postgres://...``). ``schema`` selects the
    Postgres schema (default ``public``); SQLite ignores it, a file being its
    own namespace. ``connection_name`` becomes the Postgres ``application_name``
    of every connection (SQLite has no sessions to name). ``read_only`` opens
    a store that refuses every write and never creates anything (for commands
    that only look). ``network_timeout`` (Postgres): seconds after which a
    connection whose server went silent is broken (default 5). Raises
    :class:`ConfigError` for anything else, or when the Postgres extra is not
    installed.
    """
    scheme, sep, rest = url.partition(":")
    scheme = scheme.lower()
    if scheme == "sqlite" and sep:
        from .sqlite import SqliteStore

        # One option rides on the URL: "?synchronous=NORMAL" trades power-loss
        # durability for speed; a process kill loses nothing either way (WAL).
        rest, _, query = rest.partition("?")
        options = dict(p.partition("=")[::2] for p in query.split("&") if p)
        unknown = set(options) - {"synchronous"}
        if unknown:
            raise ConfigError(
                f"SQLite URL {url!r} has unknown option(s) {', '.join(sorted(unknown))}; "
                "the only one is ?synchronous=FULL|NORMAL"
            )
        return SqliteStore(
            _sqlite_path(url.partition("?")[0], rest),
            synchronous=options.get("synchronous", "FULL"),
            read_only=read_only,
        )
    if scheme in ("postgresql", "postgres") and rest.startswith("//"):
        if "\x00" in url or not url.isprintable() or not _utf8(url):
            raise ConfigError(
                f"bad Postgres URL {_redact(url)!r}: it holds control characters or bytes "
                "that are not UTF-8"
            )
        try:
            from .postgres import PostgresStore
        except ImportError as exc:
            raise ConfigError(
                f"store URL {_redact(url)!r} needs the Postgres driver, which is not "
                f"installed ({exc}); install it with: "
                "pip install 'stateful-agent-harness[postgres]'"
            ) from exc
        from .postgres import NETWORK_TIMEOUT

        return PostgresStore(
            url,
            schema=schema or "public",
            application_name=connection_name,
            read_only=read_only,
            network_timeout=NETWORK_TIMEOUT if network_timeout is None else network_timeout,
        )
    raise ConfigError(
        f"unsupported store URL {_redact(url)!r}: expected a 'sqlite:' or 'postgresql://' "
        f"URL, for example {_EXAMPLES}"
    )


def _sqlite_path(url: str, rest: str) -> str:
    if rest.startswith("//"):
        # sqlite:///abs/path -> "/abs/path" (SQLAlchemy's four-slash form too);
        # anything between the slashes would be a host, which a file cannot have.
        host, slash, path = rest[2:].partition("/")
        if host or not slash or not path:
            raise ConfigError(
                f"bad SQLite URL {url!r}: 'sqlite://' must be followed by an absolute path "
                f"(three slashes in all), for example {_EXAMPLES}"
            )
        return "/" + path.lstrip("/")
    if not rest:
        raise ConfigError(f"bad SQLite URL {url!r}: it names no file; for example {_EXAMPLES}")
    if rest == ":memory:":
        raise ConfigError(
            f"bad SQLite URL {url!r}: an in-memory database cannot be shared by worker "
            f"processes; name a file instead, for example {_EXAMPLES}"
        )
    return rest


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
