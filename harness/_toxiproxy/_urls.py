"""Store URLs: the ``host:port`` one connects to, and the same URL through a proxy."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

#: the default ports of the services the harness routes
DEFAULT_PORTS = {"postgres": 5432, "postgresql": 5432, "redis": 6379, "rediss": 6379}
# -- URLs --------------------------------------------------------------------------


def upstream_of(url: str) -> str | None:
    """The ``host:port`` a Postgres or Redis URL connects to over TCP, or
    None (a Unix socket, a libpq ``key=value`` string, no host). A
    ``tcp://HOST:PORT`` URL names any other server (a Temporal server's
    gRPC address): routed the same way, its port required."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "tcp":  # any other server (a runtime's gRPC): its port is named
        try:
            port = parts.port
        except ValueError:
            return None
        host = parts.hostname
        if not host or port is None:
            return None
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if scheme not in DEFAULT_PORTS:
        return None
    if "host=" in parts.query or "hostaddr=" in parts.query or "port=" in parts.query:
        return None
    host = parts.hostname
    if not host or host.startswith("/") or "," in (parts.netloc.rpartition("@")[2]):
        return None
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError:
        return None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def rewrite(url: str, listen: str) -> str:
    """``url`` with its ``host:port`` replaced by ``listen`` (the proxy's)."""
    parts = urlsplit(url)
    userinfo, at, _ = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{listen}"))
