"""The store conformance suite against PostgreSQL (a schema of its own per test)."""

from __future__ import annotations

import pytest

from reference_runtime.store import Store

from .conformance import StoreConformance

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(postgres_store: Store) -> Store:
    return postgres_store


class TestPostgresStore(StoreConformance):
    """The store contract against :class:`~reference_runtime.store.postgres.PostgresStore`."""
