"""Store and lease-server URLs as they may appear in messages: without secrets."""

from __future__ import annotations

import re

__all__ = ["redact"]

_QUERY_SECRET = re.compile(r"(?i)([?&](?:password|sslpassword)=)[^&]*")


def redact(url: str) -> str:
    """``url`` without its password (in the user part or the query), fit for
    an error message."""
    url = _QUERY_SECRET.sub(r"\1***", url)
    head, at, tail = url.rpartition("@")
    if not at or "://" not in head:
        return url
    scheme, _, userinfo = head.partition("://")
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{tail}" if ":" in userinfo else url
