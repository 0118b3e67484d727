"""The store conformance suite: one contract, every backend runs it.

:class:`store.conformance.StoreConformance` holds every promise of
:class:`reference_runtime.store.Store` as test methods that take a ``store``
fixture (a set-up, empty store). A backend runs the whole suite with a test
module of two parts, as ``test_sqlite.py`` and ``test_postgres.py`` do::

    import pytest
    from reference_runtime.store import Store
    from .conformance import StoreConformance

    @pytest.fixture
    def store(tmp_path) -> Iterator[Store]:
        backend = MyStore(...)   # a fresh, empty store
        backend.setup()
        yield backend
        backend.close()

    class TestMyStore(StoreConformance):
        '''The store contract against MyStore.'''

The tests that start child processes reopen the store with ``open_store``
from ``spec_of(store)`` (``store.url`` or ``store.path``, and ``store.schema``),
so a new backend is also given a URL scheme in :func:`open_store`.
"""

import pytest

# The contract lives in plain modules, not test files: have pytest rewrite
# their asserts too, so a failure shows the values compared.
pytest.register_assert_rewrite(
    *(f"{__name__}.{part}" for part in ("contract_leases", "contract_memory", "contract_runs"))
)
