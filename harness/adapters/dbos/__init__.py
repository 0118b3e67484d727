"""Point the harness at a DBOS application (the ``dbos`` extra).

    harness run --adapter harness.adapters.dbos:DBOSAdapter \\
        --adapter-opt app=examples.dbos_refund.careful:APP \\
        --adapter-opt database=postgres

An application is a :class:`DBOSApp` (its workflows module, workflows,
delivery, and the DBOS application version of each code version); its steps
reach the world through :func:`call`. See ``docs/adapters.md``. DBOS itself
is imported only when an environment is opened or a worker runs, so this
package imports without the extra.
"""

from __future__ import annotations

from ._adapter import DBOSAdapter, DBOSEnvironment
from ._app import DBOSApp, call, release

__all__ = ["DBOSAdapter", "DBOSApp", "DBOSEnvironment", "call", "release"]
