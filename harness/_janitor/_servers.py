"""What the Postgres and Redis leases share: the names the harness gives
what it owns on a server (:func:`tag`), the shapes a record must have to be
swept, how long to wait for a server, and the sweep of a server before this
process's first lease there (:func:`_sweep_first`)."""

from __future__ import annotations

import contextlib
import re
import threading
import uuid
from collections.abc import Callable

#: Postgres schemas and Redis key prefixes start with this
SCHEMA_PREFIX = "rr_"
#: seconds to wait for a server before giving up on it
CONNECT_TIMEOUT = 5

#: what this version names its schemas and key prefixes. Not a proof of
#: ownership (a record is): a filter a record must pass too, so that an
#: entry naming ``public`` or ``*`` is ignored whoever wrote it
_OWNED_SCHEMA = re.compile(r"^(?:rr|lg|dbos)_lk_[0-9a-f]{16}$")
_OWNED_PREFIX = re.compile(r"^rr:(?:rr|lg|dbos)_lk_[0-9a-f]{16}:$")


def tag() -> str:
    """``lk_<random>``: a fresh name part for a schema or key prefix (unique;
    who owns it is told by its lease, see :class:`SchemaLease`)."""
    return f"lk_{uuid.uuid4().hex[:16]}"


#: (kind, url) already swept by this process's first lease there
_swept: set[tuple[str, str]] = set()
_swept_lock = threading.Lock()


def _sweep_first(kind: str, url: str, sweep_one: Callable[[str], object]) -> None:
    """Sweep ``url`` before this process's first lease there: whatever the
    adapter (the reference runtime, LangGraph, DBOS), a run killed before
    is cleaned up after by the next run that uses the same server. A sweep
    that fails is left for the next (the lease itself says what is wrong)."""
    with _swept_lock:
        if (kind, url) in _swept:
            return
        _swept.add((kind, url))
    with contextlib.suppress(Exception):
        sweep_one(url)
