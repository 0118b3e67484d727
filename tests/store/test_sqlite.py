"""The store conformance suite against SQLite (a fresh file per test)."""

from __future__ import annotations

import pytest

from reference_runtime.store import Store

from .conformance import StoreConformance


@pytest.fixture
def store(sqlite_store: Store) -> Store:
    return sqlite_store


class TestSqliteStore(StoreConformance):
    """The store contract against :class:`~reference_runtime.store.sqlite.SqliteStore`."""
