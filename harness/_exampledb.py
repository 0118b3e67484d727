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
fails. A value that is not a scenario (another tool's, a corrupt one), one
larger than :data:`MAX_VALUE_BYTES`, or one longer than a search's own
scenarios (:func:`replay_step_cap`) is skipped with a warning, and left
alone: a database is shared, and anyone who can write to it chooses what the
next run replays, but not for longer than its ``--budget``.

The database is data the harness does not trust: a folder's key folders and
entries are read only when they are real folders and regular files (no
symlink is followed, no FIFO opened), and a Redis key of another type than a
set is skipped. A database that cannot be used at all (a folder that cannot
be written, a Redis that does not answer) is refused before the run starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from pydantic import ValidationError

from ._errors import UsageError
from ._settings import Settings
from .model import Scenario
from .report import Report
from .report._write import LEDGER

#: how long Redis keeps a key no run has written (a weekly run keeps it)
EXPIRE = timedelta(days=30)
_REDIS = ("redis://", "rediss://", "unix://")
_PREFIX = b"harness-example:"

#: the largest entry read (a kept scenario's JSON is a few kilobytes)
MAX_VALUE_BYTES = 1_000_000

#: a generated episode has at most about this many steps (a crash chain with
#: its approvals, a zombie, a network episode: 3 to 8)
EPISODE_STEPS = 5
#: how many times longer than the search's own longest scenario a kept one
#: may be (shrunk ones are shorter; a targeted schedule is within it too)
STEP_FACTOR = 4

#: the largest ``scenarios.jsonl`` read (a line per scenario run)
MAX_LEDGER_BYTES = 256_000_000

Log = Callable[[str], None]


def replay_step_cap(settings: Settings) -> int:
    """The most steps a kept scenario may have to be replayed under
    ``settings``: :data:`STEP_FACTOR` times the longest scenario the
    profile's search generates (its runs, its episodes, a quiesce). One
    with more was not written by a search of this profile: replaying it
    could outlast the ``--budget`` many times over before the budget is
    next checked."""
    longest = settings.max_runs + EPISODE_STEPS * settings.max_episodes + 2
    return STEP_FACTOR * longest


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def open_example_db(where: str, log: Log | None = None) -> _Folder | _Redis:
    """The database ``where`` names: a ``redis://`` URL or a folder.
    Raises :class:`UsageError` (exit 2) when it cannot be used: a folder
    that cannot be created or written (``/proc/...``, a file), a Redis that
    does not answer."""
    fix = "give --example-db a folder (created if missing) or a redis://HOST:PORT/DB URL"
    say = log or _stderr
    if not where.strip():
        raise UsageError(f"--example-db is empty; {fix}")
    if where.startswith(_REDIS):
        try:
            import redis

            database = _redis_database()
        except ImportError as exc:
            raise UsageError(
                f"--example-db {where}: Redis needs the redis package "
                "(pip install 'stateful-agent-harness[redis]')"
            ) from exc
        try:
            # a Redis that accepts and never answers is bounded too
            client = redis.Redis.from_url(where, socket_connect_timeout=10, socket_timeout=30)
            client.ping()
        except (ValueError, redis.RedisError) as exc:
            raise UsageError(f"--example-db {where}: cannot reach Redis ({exc}); {fix}") from None
        return _Redis(where, say, database(client, expire_after=EXPIRE, key_prefix=_PREFIX))
    path = Path(where)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--example-db {where} is a file, not a folder; {fix}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        # Written to, not only asked (os.access says yes for root on a
        # read-only mount and for /proc): one empty file, made and removed.
        fd, probe = tempfile.mkstemp(dir=path, prefix=".harness-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(
            f"--example-db {where}: cannot write to this folder ({exc.strerror or exc}); {fix}"
        ) from None
    return _Folder(path, say)


class _Folder(DirectoryBasedExampleDatabase):
    """Hypothesis's folder database, reading what it does not trust safely:
    a key folder that is a symlink is neither read, written nor deleted
    from (it may point anywhere: the user's files); an entry is read only
    when it is a regular file (a FIFO would block the run for ever) no
    larger than :data:`MAX_VALUE_BYTES`."""

    def __init__(self, path: Path, log: Log) -> None:
        super().__init__(path)
        self._say = log
        self._warned: set[Path] = set()

    def _trusted(self, key: bytes) -> Path | None:
        """The key's folder, unless it is a symlink or not a folder (said once)."""
        folder = self._key_path(key)
        try:
            mode = os.lstat(folder).st_mode
        except OSError:
            return folder  # not made yet: save makes a real one
        if stat.S_ISDIR(mode):
            return folder
        if folder not in self._warned:
            self._warned.add(folder)
            kind = "a symlink" if stat.S_ISLNK(mode) else "not a folder"
            self._say(
                f"harness: example database {self.path}: {folder.name} is {kind}, not followed: "
                "its entries are skipped and nothing is written there (remove it to use this key)"
            )
        return None

    def fetch(self, key: bytes) -> Iterable[bytes]:
        folder = self._trusted(key)
        if folder is None or not folder.is_dir():
            return
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return
        for name in names:
            value = _read_regular(folder / name)
            if value is None:
                self._say(
                    f"harness: example database {self.path}: skipped {folder.name}/{name} "
                    f"(not a regular file, or larger than {MAX_VALUE_BYTES} bytes)"
                )
                continue
            yield value

    def save(self, key: bytes, value: bytes) -> None:
        if self._trusted(key) is not None and self._trusted(self._metakeys_name) is not None:
            super().save(key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        if self._trusted(key) is not None:
            super().delete(key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        if self._trusted(src) is not None and self._trusted(dest) is not None:
            super().move(src, dest, value)


def _read_regular(path: Path, limit: int = MAX_VALUE_BYTES) -> bytes | None:
    """``path``'s bytes if it is a regular file (not followed if a link, not
    blocked on if a FIFO) of at most ``limit`` bytes; else None."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = f.read(limit + 1)
    return data if len(data) <= limit else None


def _redis_database() -> Callable[..., ExampleDatabase]:
    from hypothesis.extra.redis import RedisExampleDatabase

    return RedisExampleDatabase


class _Redis:
    """Hypothesis's Redis database, for a Redis that others write to: a key
    of another type than a set (``WRONGTYPE``) or an entry larger than
    :data:`MAX_VALUE_BYTES` is skipped with a warning; a Redis that stops
    answering is a usage error (exit 2), not a traceback."""

    def __init__(self, where: str, log: Log, db: ExampleDatabase) -> None:
        self.where = where
        self._say = log
        self._db = db

    @contextlib.contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        import redis

        try:
            yield
        except redis.ResponseError as exc:  # WRONGTYPE: a key another tool wrote
            self._say(
                f"harness: example database {self.where}: could not {what} "
                f"({' '.join(str(exc).split())}); skipped"
            )
        except redis.RedisError as exc:
            raise UsageError(
                f"--example-db {self.where}: Redis failed while the harness could {what} "
                f"({type(exc).__name__}: {' '.join(str(exc).split())}); check that it is up"
            ) from None

    def fetch(self, key: bytes) -> Iterable[bytes]:
        values: list[bytes] = []
        with self._calling("read the kept examples"):
            values = list(self._db.fetch(key))
        kept = [v for v in values if len(v) <= MAX_VALUE_BYTES]
        if len(kept) < len(values):
            self._say(
                f"harness: example database {self.where}: skipped {len(values) - len(kept)} "
                f"entries larger than {MAX_VALUE_BYTES} bytes"
            )
        return kept

    def save(self, key: bytes, value: bytes) -> None:
        with self._calling("keep an example"):
            self._db.save(key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        with self._calling("drop an example"):
            self._db.delete(key, value)


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
    """One adapter's entries in one example database (``db``: the one
    ``where`` names, opened already)."""

    def __init__(
        self,
        where: str,
        spec: str,
        options: Mapping[str, str],
        *,
        db: Any = None,
        log: Log | None = None,
    ) -> None:
        self.where = where
        self.say = log or _stderr
        self.db = db if db is not None else open_example_db(where, self.say)
        self.key = example_key(spec, options)

    def saved(self, max_steps: int | None = None) -> list[Scenario]:
        """The kept scenarios, in the order of their JSON (every run and
        job plans them alike, whatever order the database returns). One
        with more than ``max_steps`` steps is skipped, with a warning."""
        found: dict[bytes, Scenario] = {}
        junk = 0
        for value in sorted(self.db.fetch(self.key)):
            try:
                scenario = Scenario.model_validate_json(value)
            except (ValidationError, ValueError, RecursionError):
                junk += 1
                continue
            if max_steps is not None and len(scenario.steps) > max_steps:
                self.say(
                    f"harness: example database {self.where}: skipped a kept scenario of "
                    f"{len(scenario.steps)} steps ({scenario.name!r}): more than {max_steps}, "
                    "the most a search of this profile replays (4 times its longest scenario)"
                )
                continue
            found.setdefault(_value(scenario), scenario)
        if junk:
            self.say(
                f"harness: example database {self.where}: skipped {junk} entries that are not "
                "harness scenarios (left as they are)"
            )
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
            data = _read_regular(path)
            try:
                scenario = None if data is None else Scenario.model_validate_json(data)
            except (ValidationError, ValueError, RecursionError):
                scenario = None
            if scenario is None:
                self.say(
                    f"harness: example database {self.where}: {path} is not a readable "
                    "scenario (missing, not a regular file, too large or not a scenario): "
                    "not kept"
                )
                continue
            self.db.save(self.key, _value(scenario))
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
    data = _read_regular(folder / LEDGER, MAX_LEDGER_BYTES)
    if data is None:
        return set()
    ok: set[str] = set()
    bad: set[str] = set()
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        (bad if entry.get("failed") else ok).add(entry["id"])
    return ok - bad
