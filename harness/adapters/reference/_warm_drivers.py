"""Warm the Redis client's and the host resolver's first use in the fork
server of the deployments that use a server (Postgres, Redis).

Preloaded after ``redis`` (see ``_spawning.OPTIONAL_PRELOAD``): every worker
of such a deployment opened a Redis connection whose driver info read
redis-py's own version from its installed metadata (``importlib.metadata``:
finding and parsing the package's ``METADATA`` file, cached per process by
``redis.utils.get_lib_version``), and resolved its servers' host names,
whose first use imports the ``idna`` codec (``encodings.idna``,
``stringprep``). Done once here, before the server forks, the workers
inherit both. It opens no connection and changes no result: a version
string and a codec, the same in every process.
"""

from __future__ import annotations

import contextlib
import encodings.idna  # noqa: F401 (socket.getaddrinfo's codec for host names)

with contextlib.suppress(Exception):  # another redis-py release may lack it
    from redis.utils import get_lib_version

    get_lib_version()
