"""``--example-db PATH|redis://...``: what one run found, replayed first by the next.

Backed by Hypothesis's own example databases: a folder
(:class:`hypothesis.database.DirectoryBasedExampleDatabase`, safe for
several processes at once, easy to keep as a CI cache or artifact) or the
Redis a team already runs (:class:`hypothesis.extra.redis.RedisExampleDatabase`,
shared by every machine, entries expiring after :data:`EXPIRE` unused).

What is kept is each counterexample's scenario (its JSON, whole), under a
key of the adapter (its spec and options): scenarios replay exactly, where
Hypothesis's choice sequences would replay only under the same strategies
and universe. A search with a database runs its kept scenarios first, as
regressions (before ``--scenario`` files and the plan, whatever the seed),
then keeps every counterexample it reports; a kept scenario that ran and
failed nothing is dropped, as Hypothesis drops an example that no longer
fails. A value that is not a scenario (another tool's, a corrupt one) is
skipped, and left alone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from pydantic import ValidationError

from ._errors import UsageError
from .model import Scenario
from .report import Report
from .report._write import LEDGER

#: how long Redis keeps a key no run has written (a weekly run keeps it)
EXPIRE = timedelta(days=30)
_REDIS = ("redis://", "rediss://", "unix://")


def open_example_db(where: str) -> ExampleDatabase:
    """The database ``where`` names: a ``redis://`` URL or a folder.
    Raises :class:`UsageError` (exit 2) when it cannot be used."""
    fix = "give --example-db a folder (created if missing) or a redis://HOST:PORT/DB URL"
    if not where.strip():
        raise UsageError(f"--example-db is empty; {fix}")
    if where.startswith(_REDIS):
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError as exc:
            raise UsageError(
                f"--example-db {where}: Redis needs the redis package "
                "(pip install 'stateful-agent-harness[redis]')"
            ) from exc
        try:
            client = redis.Redis.from_url(where, socket_connect_timeout=10)
            client.ping()
        except (ValueError, redis.RedisError) as exc:
            raise UsageError(f"--example-db {where}: cannot reach Redis ({exc}); {fix}") from None
        return RedisExampleDatabase(client, expire_after=EXPIRE, key_prefix=b"harness-example:")
    path = Path(where)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--example-db {where} is a file, not a folder; {fix}")
    return DirectoryBasedExampleDatabase(path)


def example_key(spec: str, options: Mapping[str, str]) -> bytes:
    """The key an adapter's scenarios are kept under: its spec and options."""
    text = json.dumps({"adapter": spec, "options": dict(sorted(options.items()))})
    return b"harness:" + hashlib.sha256(text.encode()).hexdigest().encode()


def _value(scenario: Scenario) -> bytes:
    return scenario.model_dump_json().encode()


def _ledger_id(value: bytes) -> str:
    """The id ``scenarios.jsonl`` gives the scenario kept as ``value``."""
    return hashlib.sha256(value).hexdigest()[:16]


class ExampleDb:
    """One adapter's entries in one example database."""

    def __init__(self, where: str, spec: str, options: Mapping[str, str]) -> None:
        self.where = where
        self.db = open_example_db(where)
        self.key = example_key(spec, options)

    def saved(self) -> list[Scenario]:
        """The kept scenarios, in the order of their JSON (every run and
        job plans them alike, whatever order the database returns)."""
        found: dict[bytes, Scenario] = {}
        for value in sorted(self.db.fetch(self.key)):
            try:
                scenario = Scenario.model_validate_json(value)
            except (ValidationError, ValueError):
                continue
            found.setdefault(_value(scenario), scenario)
        return list(found.values())

    def keep(self, report: Report, replayed: list[Scenario]) -> tuple[int, int]:
        """After a finished run written to ``report.folder``: keep every
        counterexample's scenario, drop each ``replayed`` one that ran and
        failed nothing. Returns (kept, dropped)."""
        folder = report.folder
        assert folder is not None
        where = [] if report.counterexample is None else [folder]
        where += [folder / o.folder for o in report.other_failures if o.folder]
        kept = 0
        for place in where:
            path = place / "scenario.json"
            if path.is_file() and not path.is_symlink():
                self.db.save(self.key, _value(Scenario.model_validate_json(path.read_bytes())))
                kept += 1
        passed = _passed(folder)
        dropped = 0
        for scenario in replayed:
            value = _value(scenario)
            if _ledger_id(value) in passed:
                self.db.delete(self.key, value)
                dropped += 1
        return kept, dropped


def _passed(folder: Path) -> set[str]:
    """Ids of the scenarios ``scenarios.jsonl`` says ran in the plan and
    failed nothing (and never failed, if one ran twice)."""
    path = folder / LEDGER
    if not path.is_file():
        return set()
    ok: set[str] = set()
    bad: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        (bad if entry.get("failed") else ok).add(entry.get("id"))
    return ok - bad
