"""An adapter for ``test_jobs.py``: the reference adapter, refused in the
job processes of ``--jobs N`` alone (the harness process, job 1, takes it)."""

from __future__ import annotations

import sys
from typing import Any

from harness.adapters._loading import load_adapter


def refused_in_jobs(**options: str) -> Any:
    main = getattr(sys.modules["__main__"], "__spec__", None)
    if main is not None and main.name == "harness._job":
        raise RuntimeError("this adapter refuses to load in a job process (a test of --jobs N)")
    return load_adapter("reference", options)
