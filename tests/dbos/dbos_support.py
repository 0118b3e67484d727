"""Worker targets for the DBOS adapter tests (the fork server imports them:
pytest puts this folder on ``sys.path``, and the server takes the parent's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def compiles_of_a_worker(args: dict[str, Any]) -> int:
    """The adapter's worker, writing to ``args["out"]`` how many statements
    its fork server had compiled before the fork (``_app.CACHE``) and how
    many more this worker's engine compiled."""
    from harness.adapters.dbos import _app

    before = len(_app.CACHE)
    code = _app.worker_main(args)
    seen = {"warm": before, "compiled": len(_app.CACHE) - before}
    Path(args["out"]).write_text(json.dumps(seen))
    return code
