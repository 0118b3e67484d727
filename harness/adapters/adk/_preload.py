"""What the fork server imports for ADK workers: the modules one worker imported.

ADK imports most of itself lazily, on a runner's first ``run_async`` (about
650 modules: its flows, the model's HTTP client, SQLAlchemy's async dialect,
OpenTelemetry), so preloading ``google.adk`` alone leaves each worker seconds
of imports. ``modules.json`` is the list of modules a worker had imported by
the end of one run of ``examples/adk_refund``, captured by
``python benchmarks/adk_worker_start.py --capture``. A module this
installation lacks (another ADK release) is skipped: the worker imports what
it needs as before. Nothing here starts a thread or an event loop.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from pathlib import Path

#: the modules imported here, as listed (missing ones skipped)
MODULES: tuple[str, ...] = tuple(json.loads((Path(__file__).parent / "modules.json").read_text()))

for _name in MODULES:
    with contextlib.suppress(Exception):
        importlib.import_module(_name)
