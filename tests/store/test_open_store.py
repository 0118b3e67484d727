"""``open_store``: which URLs name which backend, and how a bad one is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from reference_runtime._errors import (
    ConfigError,
)
from reference_runtime.store import open_store


def test_open_store_understands_sqlite_and_postgres_urls(tmp_path: Path) -> None:
    pytest.importorskip("psycopg", reason="the Postgres extra is not installed")
    from reference_runtime.store.postgres import PostgresStore
    from reference_runtime.store.sqlite import SqliteStore

    absolute = open_store(f"sqlite://{tmp_path}/a.db")
    assert isinstance(absolute, SqliteStore) and absolute.path == tmp_path / "a.db"
    four_slashes = open_store(f"sqlite:///{tmp_path}/a.db")
    assert isinstance(four_slashes, SqliteStore) and four_slashes.path == tmp_path / "a.db"
    relative = open_store("sqlite:data/b.db")
    assert isinstance(relative, SqliteStore) and str(relative.path) == "data/b.db"
    pg = open_store("postgresql://u@h:5432/db", schema="s1")
    assert isinstance(pg, PostgresStore) and pg.schema == "s1"  # no connection made yet


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("mysql://localhost/db", "unsupported"),
        ("runs.db", "unsupported"),
        ("sqlite://host/x.db", "absolute path"),
        ("sqlite:", "names no file"),
        ("sqlite::memory:", "in-memory"),
        ("postgresql://u:hunter2@h/db?x", "schema name"),
    ],
)
def test_open_store_rejects_a_bad_url_and_shows_a_good_one(url: str, why: str) -> None:
    schema = "bad-name" if url.startswith("postgresql") else None
    with pytest.raises(ConfigError, match=why) as err:
        open_store(url, schema=schema)
    assert "hunter2" not in str(err.value)
    if why != "schema name":
        assert "for example" in str(err.value) and "sqlite:///" in str(err.value)
