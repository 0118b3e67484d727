"""LangGraph adapter tests: the refund example against real LangGraph.

Skipped without the ``langgraph`` extra. The repository root goes on
``sys.path`` (``examples`` lives there), and with it the fork servers' path.
Each test runs once on ``SqliteSaver`` and once on ``PostgresSaver`` on the
running Postgres (``HARNESS_POSTGRES_URL``; skipped without it, failed in CI).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph", reason="needs the langgraph extra")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for folder in (HERE, ROOT):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def checkpointer(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """(checkpointer, postgres_url) for each backend in turn."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return "postgres", url
    return "sqlite", None
