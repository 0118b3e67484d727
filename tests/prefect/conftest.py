"""Prefect adapter tests: the refund flows against a real Prefect server.

Each module is skipped, with the reason, when prefect (the ``prefect``
extra) is not installed (``prefect_support.PREFECT``). One Prefect server
serves the session (:func:`prefect_api`): one an adapter starts (about
18 s), or, with ``HARNESS_PREFECT_URL`` set, one you run yourself
(``prefect server start``), which no test starts or stops. Nothing leaves
loopback unless that URL does. The repository root goes on ``sys.path``
(``examples`` lives there), and with it the fork servers' path.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for folder in (HERE, ROOT):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[str]:
    """The API URL of the session's Prefect server (on each xdist worker
    that asks; the tests that ask share one: tests/conftest.py):
    ``HARNESS_PREFECT_URL`` if set, else the server of an adapter started
    here, which must be gone, folder and all, once that adapter closes."""
    given = os.environ.get("HARNESS_PREFECT_URL", "").strip()
    if given:
        yield given
        return
    from prefect_support import owner

    first = owner()
    try:
        first.setup()
        yield first.api
    finally:
        first.close()
    folder = first.folder
    assert folder is not None
    assert all(p.poll() is not None for p in folder.processes), "the server outlived close"
    assert not folder.path.exists(), "its folder outlived close"


@pytest.fixture
def prefect(prefect_api: str) -> Iterator[Any]:
    """The test's adapters on the session's server (``prefect_support.Adapters``)."""
    from prefect_support import Adapters

    made = Adapters(prefect_api)
    try:
        yield made
    finally:
        made.close()
