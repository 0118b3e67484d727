"""Cleaning up after harness processes that died without cleaning up.

A harness run removes what it creates -- scratch folders, Postgres schemas,
Redis keys -- in ``finally`` blocks. A SIGKILL of the harness itself (an
impatient CI job, the OOM killer) leaves no chance for that, so each new run
first sweeps what no live run owns (:func:`sweep`).

What the harness may sweep is what it recorded as its own *before* making it,
never what merely looks like its names: a database or a Redis it is given is
not dedicated to it, and a user's schema ``rr_2024_sales`` or key
``rr:rr_2024_sales:config`` is never the harness's, whatever its name says.
Whether the owner still lives is a lock it holds, never a pid: two CI
containers that share one database service or one ``$TMPDIR`` live in
different PID namespaces, where each other's pids look dead (or belong to
someone else). Every lock below is released by the kernel or the server when
its holder dies, however it dies:

- a scratch folder (:func:`scratch_dir`) holds a lock file, ``flock``-ed for
  as long as the folder is in use and recording the folder it was made for
  (device and inode: a copy of the folder, an unpacked artifact, is not it);
  the sweeper removes the folder only if it can take that lock itself and
  the record names this very folder -- and first kills the processes recorded
  in it (:func:`record_process`: pid, start time and PID namespace, so a
  reused pid is never killed), whose owner is dead since the lock was free.
  A folder without that lock file is never removed, whatever its name or age.
  Database files (SQLite stores, world and template files) live in such
  folders and go with them;
- a Postgres schema (:class:`SchemaLease`): a session-level advisory lock is
  taken first, on a connection of its own, then one transaction records the
  schema in the registry table ``harness_owned.schemas`` and creates it (so a
  row exists only for a schema the harness made; an existing schema of that
  name makes the transaction fail and nothing is recorded). The sweeper drops
  only schemas of that table whose lock it can take, and their rows with them;
- a Redis key prefix (:class:`RedisLease`): one script sets the prefix's
  ``alive`` key (a short TTL a daemon thread renews) and adds the prefix to
  the set ``harness:owned-prefixes``, before any key under it is written; the
  sweeper deletes the keys of a prefix of that set whose ``alive`` key has
  expired. Every key expires on its own too, so that nothing is left for
  ever if no sweep comes: the runtime's keys an hour past their last write,
  the set an hour past the last renewal of any lease;
- a netfilter rule (:mod:`harness._netfilter`) carries its owner's token in
  its comment and dies with its owner: a reaper process removes it when the
  owner's pipe closes; the sweep is the backstop.

What can and cannot make the sweep drop a user's object: a name collision
cannot (a schema is recorded only by the transaction that creates it, a
prefix only by the script that claims its unused ``alive`` key, a folder's
record names its inode), nor a copied folder, nor a record naming anything
but a name of the harness's own shape (``rr_``/``lg_``/``dbos_`` + ``lk_`` +
16 hex digits; ``public`` or ``*`` are ignored). A user who writes a row
into ``harness_owned.schemas`` naming a schema of that shape has chosen to.

A schema or key-prefix lease may serve several deployments of one process
in turn (:func:`give_pooled`, :func:`take_pooled`): emptied between them
(:meth:`SchemaLease.reset`, :meth:`RedisLease.reset`) instead of dropped and
made again, it stays recorded and locked all along, and is released at the
process's exit -- or swept, like any other, once the process is gone.

The first schema or key-prefix lease a process takes on a server sweeps
that server first, whatever the adapter. Schemas and keys of earlier
versions recorded nowhere are left alone (drop them by hand if you know they
are the harness's): the sweep cannot tell them from a user's.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any

from ._netfilter import sweep_rules
from ._signals import shielded

#: scratch folders, Postgres schemas and Redis key prefixes start with these
FOLDER_PREFIX = "harness-"
SCHEMA_PREFIX = "rr_"
#: the lock file inside a scratch folder; the folder lives while it is locked
LOCK_NAME = ".harness-owner.lock"
#: the folder, inside a scratch folder, of its owned processes' records
PROCS_NAME = ".harness-procs"
#: seconds a sweep waits for the processes it killed to die
KILL_WAIT = 5.0
#: seconds an ``alive`` key outlives its last renewal (renewed every sixth)
ALIVE_TTL = 30.0
#: seconds to wait for a server before giving up on it
CONNECT_TIMEOUT = 5
#: seconds a drop waits for a table lock before leaving the schema to a later
#: sweep (a dying owner's session may still hold one for a moment)
LOCK_TIMEOUT_MS = 10_000

#: the Postgres schema, and its table, where the schemas the harness made
#: are recorded (:class:`SchemaLease`)
REGISTRY_SCHEMA = "harness_owned"
REGISTRY = f"{REGISTRY_SCHEMA}.schemas"
#: the Redis set of the key prefixes the harness made (:class:`RedisLease`)
OWNED_PREFIXES = "harness:owned-prefixes"
#: milliseconds the set outlives the last lease that renewed it: like every
#: key the harness writes, it expires on its own (a record it loses so is
#: harmless: the keys it named expire too, see redis_queue.KEY_TTL_MS)
OWNED_PREFIXES_TTL_MS = 3_600_000

#: what this version names its schemas and key prefixes. Not a proof of
#: ownership (a record is): a filter a record must pass too, so that an
#: entry naming ``public`` or ``*`` is ignored whoever wrote it
_OWNED_SCHEMA = re.compile(r"^(?:rr|lg|dbos)_lk_[0-9a-f]{16}$")
_OWNED_PREFIX = re.compile(r"^rr:(?:rr|lg|dbos)_lk_[0-9a-f]{16}:$")


def tag() -> str:
    """``lk_<random>``: a fresh name part for a schema or key prefix (unique;
    who owns it is told by its lease, see :class:`SchemaLease`)."""
    return f"lk_{uuid.uuid4().hex[:16]}"


# -- scratch folders ---------------------------------------------------------------

#: lock file descriptors of this process's scratch folders
_held: dict[Path, int] = {}
_held_lock = threading.Lock()


def scratch_dir(kind: str = "run", root: Path | None = None) -> Path:
    """A fresh folder ``harness-<kind>-*`` under ``root`` (the temp folder),
    owned by this process until :func:`remove_scratch` or its death."""
    _forget_removed()
    base = root or Path(tempfile.gettempdir())
    # Shielded: an interruption between mkdtemp and the lock would leave a
    # folder no sweeper could ever claim.
    with shielded():
        path = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{kind}-", dir=base))
        # Locked under a private name, then renamed into place: a sweeper never
        # finds the lock file unlocked (until then the folder is lock-less,
        # which it leaves alone). The lock file records the folder it was made
        # for: a copy of the folder (an unpacked artifact) is another folder.
        pending = path / f"{LOCK_NAME}.{os.getpid()}"
        fd = os.open(pending, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, _identity(path))
        os.rename(pending, path / LOCK_NAME)
        with _held_lock:
            _held[path] = fd
    return path


def _identity(folder: Path) -> bytes:
    """What names ``folder`` itself, not its path: its device and inode."""
    st = os.lstat(folder)
    return json.dumps({"dev": st.st_dev, "ino": st.st_ino}).encode()


def _made_for(fd: int, folder: Path) -> bool:
    """Whether the lock file open as ``fd`` is a regular file that
    :func:`scratch_dir` made for ``folder`` (this very folder, not a copy)."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.pread(fd, 4096, 0) == _identity(folder)
    except OSError:
        return False


def remove_scratch(path: Path) -> None:
    """Remove a folder made by :func:`scratch_dir` and give up its lock.

    The lock file goes last, and the whole removal is shielded from an
    interruption: a folder cut halfway would otherwise be left without its
    lock file, which no sweeper claims."""
    with shielded():
        kill_recorded(path)  # a folder's processes do not outlive it
        with contextlib.suppress(OSError):
            for child in list(path.iterdir()):
                if child.name == LOCK_NAME:
                    continue
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        shutil.rmtree(path, ignore_errors=True)
        with _held_lock:
            fd = _held.pop(path, None)
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def scratch(kind: str) -> Iterator[Path]:
    """:func:`scratch_dir` for the length of a ``with`` block."""
    path = scratch_dir(kind)
    try:
        yield path
    finally:
        remove_scratch(path)


#: built template files of this process: name -> (pid, file)
_templates: dict[str, tuple[int, Path]] = {}
_templates_lock = threading.Lock()
_template_folder: list[tuple[int, Path]] = []


def copy_template(name: str, build: Callable[[Path], None], dest: Path) -> None:
    """Copy the file ``build(path)`` makes to ``dest``, building it once per process.

    For files every environment starts with, built the same way each time (a
    database file with its schema): made once in a scratch folder of this
    process (removed at exit, swept if the process dies), then copied. ``name``
    must say everything the file depends on. ``build`` must leave a closed,
    self-contained file: no ``-wal``/``-journal`` beside it (checked)."""
    pid = os.getpid()
    with _templates_lock:
        got = _templates.get(name)
        if got is None or got[0] != pid:
            if not _template_folder or _template_folder[0][0] != pid:
                _template_folder[:] = [(pid, scratch_dir("templates"))]
                atexit.register(_remove_templates, pid)
            folder = _template_folder[0][1]
            path = folder / hashlib.sha256(name.encode()).hexdigest()[:16] / "template"
            path.parent.mkdir()
            build(path)
            leftovers = [p.name for p in path.parent.iterdir() if p != path]
            if leftovers or not path.is_file():
                raise RuntimeError(
                    f"template {name!r}: building it left {leftovers or 'no file'} beside the "
                    "file; a template must be one closed, self-contained file"
                )
            got = _templates[name] = (pid, path)
    shutil.copyfile(got[1], dest)


def _remove_templates(pid: int) -> None:
    """At exit: remove this process's template folder (not a forked parent's)."""
    if os.getpid() != pid:
        return
    with _templates_lock:
        folders = [f for p, f in _template_folder if p == pid]
        _template_folder.clear()
        _templates.clear()
    for folder in folders:
        remove_scratch(folder)


def _forget_removed() -> None:
    """Close the locks of folders someone removed with a plain ``rmtree``."""
    with _held_lock:
        gone = [p for p in _held if not p.exists()]
        fds = [_held.pop(p) for p in gone]
    for fd in fds:
        os.close(fd)


def _sweep_folder(folder: Path) -> bool:
    """Remove ``folder`` if no live process holds it; whether it did."""
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        # No lock file (or not a regular one): never made by scratch_dir,
        # whatever its name says.
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its owner is alive (here or in another namespace)
        if not _made_for(fd, folder):
            return False  # a lock file not made for this folder: not ours
        # Its owner is dead: so must be what it started. Then the folder goes,
        # removed while we hold the lock, so no one can take it over meanwhile.
        kill_recorded(folder)
        shutil.rmtree(folder, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def sweep_folders(root: Path | None = None) -> list[str]:
    """Remove the ``harness-*`` folders under ``root`` that no live run owns."""
    root = root or Path(tempfile.gettempdir())
    gone = []
    for child in root.glob(f"{FOLDER_PREFIX}*"):
        if child.is_dir() and not child.is_symlink() and _sweep_folder(child):
            gone.append(child.name)
    return gone


# -- processes owned by a scratch folder -------------------------------------------


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, from
    ``/proc/<pid>/stat``), or None if there is no such process. With the pid,
    it names one process for good: a reused pid has a later start."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from
    # the last ")". starttime is field 22, the 20th after it.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[19])


def _living_in(groups: set[int]) -> bool:
    """Whether a process of one of the process ``groups`` is alive (not a
    zombie no one reaped yet)."""
    pids = [name for name in os.listdir("/proc") if name.isdigit()]
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        state, _ppid, pgrp = stat[stat.rindex(b")") + 2 :].split()[:3]
        if int(pgrp) in groups and state != b"Z":
            return True
    return False


def record_process(folder: Path, pid: int, argv: list[str] | None = None) -> Path:
    """Record ``pid`` (a process group leader, as ``start_new_session``
    makes it) as owned by the scratch folder ``folder``: a sweeper that
    finds the folder's owner dead kills it and its group (:func:`kill_recorded`)."""
    start = process_start(pid)
    if start is None:
        raise ProcessLookupError(f"no process {pid} to record")
    records = folder / PROCS_NAME
    records.mkdir(exist_ok=True)
    body = {"pid": pid, "start": start, "pidns": _pid_namespace(), "argv": argv or []}
    tmp = records / f"{pid}.json.tmp"
    tmp.write_text(json.dumps(body), encoding="utf-8")
    final = records / f"{pid}.json"
    os.replace(tmp, final)
    return final


def _kill(record: dict[str, Any]) -> int | None:
    """SIGKILL the recorded process and its process group, if it is still
    the process recorded; the group to wait for, or None."""
    pid, start = int(record["pid"]), int(record["start"])
    if record.get("pidns") != _pid_namespace():
        # Another PID namespace's pid names another process here. Its
        # parent-death signal killed it; nothing more can be done from here.
        return None
    now = process_start(pid)
    if now is not None and now != start:
        return None  # the pid was reused: not ours (and so neither is its group)
    if now is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    # Its group outlives it (a server's own children): while a group has a
    # member, Linux reuses neither its number as a pid nor as a group id.
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        return None if now is None else pid
    return pid


def kill_recorded(folder: Path) -> list[int]:
    """Kill every process recorded in ``folder`` (:func:`record_process`)
    that is still the process recorded, with its process group; wait up to
    :data:`KILL_WAIT` seconds for them to die, drop the records, and return
    the process groups killed."""
    records = folder / PROCS_NAME
    try:
        files = sorted(records.glob("*.json"))
    except OSError:
        return []
    groups: set[int] = set()
    for path in files:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        group = _kill(record)
        if group is not None:
            groups.add(group)
        path.unlink(missing_ok=True)
    deadline = time.monotonic() + KILL_WAIT
    while groups and time.monotonic() < deadline and _living_in(groups):
        time.sleep(0.02)
    return sorted(groups)


# -- Postgres schemas ---------------------------------------------------------------


def _advisory_key(schema: str) -> int:
    """The advisory lock (a signed 64-bit key) that stands for ``schema``."""
    digest = hashlib.blake2b(f"harness-owner:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _try_lock(conn: Any, key: int) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    return bool(row and row[0])


def _registry_exists(conn: Any) -> bool:
    row = conn.execute("SELECT to_regclass(%s)", (REGISTRY,)).fetchone()
    return bool(row and row[0])


#: the transaction-level advisory lock under which the registry is made
_REGISTRY_LOCK = _advisory_key(REGISTRY)


def _ensure_registry(conn: Any) -> None:
    """Make the registry table if it is not there (concurrent makers wait
    for one another: ``IF NOT EXISTS`` alone races on the catalog)."""
    if _registry_exists(conn):
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_REGISTRY_LOCK,))
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{REGISTRY_SCHEMA}"')
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {REGISTRY} (name text PRIMARY KEY, "
            "created timestamptz NOT NULL DEFAULT now())"
        )


def _drop_recorded(conn: Any, name: str) -> bool:
    """Drop the recorded schema ``name`` and its row, in one transaction;
    whether it did (False: a lock it waited for past :data:`LOCK_TIMEOUT_MS`,
    or the server refused; the row stays for a later sweep)."""
    import psycopg

    try:
        with conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            conn.execute(f"DELETE FROM {REGISTRY} WHERE name = %s", (name,))
    except psycopg.Error:
        return False
    return True


#: (kind, url) already swept by this process's first lease there
_swept: set[tuple[str, str]] = set()
_swept_lock = threading.Lock()


def _sweep_first(kind: str, url: str, sweep_one: Callable[[str], object]) -> None:
    """Sweep ``url`` before this process's first lease there: whatever the
    adapter (the reference runtime, LangGraph, DBOS), a run killed before
    is cleaned up after by the next run that uses the same server. A sweep
    that fails is left for the next (the lease itself says what is wrong)."""
    with _swept_lock:
        if (kind, url) in _swept:
            return
        _swept.add((kind, url))
    with contextlib.suppress(Exception):
        sweep_one(url)


class SchemaLease:
    """This process owns the Postgres schema ``name`` while the lease is held.

    Making the lease makes the schema: the advisory lock first (on a
    connection of its own), then one transaction that records ``name`` in
    :data:`REGISTRY` and creates it. A schema of that name that already
    exists is someone else's: the transaction fails, nothing is recorded,
    and :class:`RuntimeError` says so. Code that then runs ``CREATE SCHEMA
    IF NOT EXISTS`` finds it made. :meth:`release` drops it and its record.
    A sweeper drops only recorded schemas whose lock it can take; the server
    frees the lock when this connection ends, even by SIGKILL.
    """

    def __init__(self, url: str, name: str) -> None:
        import psycopg

        if not _OWNED_SCHEMA.match(name):
            raise ValueError(f"schema {name!r} is not a name the harness makes (see tag())")
        _sweep_first("postgres", url, sweep_postgres)
        self.name = name
        self._conn: Any = psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT,
            application_name=f"harness-owner:{name}"[:63],
        )
        try:
            if not _try_lock(self._conn, _advisory_key(name)):
                raise RuntimeError(f"schema {name!r} is already owned by another harness process")
            _ensure_registry(self._conn)
            try:
                with self._conn.transaction():
                    self._conn.execute(f"INSERT INTO {REGISTRY} (name) VALUES (%s)", (name,))
                    self._conn.execute(f'CREATE SCHEMA "{name}"')
            except (psycopg.errors.DuplicateSchema, psycopg.errors.UniqueViolation) as exc:
                raise RuntimeError(
                    f"schema {name!r} already exists: it is not the harness's to use"
                ) from exc
            except psycopg.ProgrammingError as exc:
                raise RuntimeError(
                    f"could not record schema {name!r} in {REGISTRY} "
                    f"({' '.join(str(exc).split())}); the harness "
                    f"records the schemas it makes there: if {REGISTRY_SCHEMA!r} is a schema "
                    "of yours, rename it"
                ) from exc
        except BaseException:
            self._conn.close()
            raise

    def reset(self, *, keep: tuple[str, ...] = (), sessions: str | None = None) -> bool:
        """Empty the schema for its next user, as if it were new; whether it did.

        First ends the server sessions called ``sessions`` (the former user's
        workers: a statement one of them sent just before it died, held up
        in a proxy, must not land in the next user's data), then, in one
        transaction, deletes every row of the schema's tables but those of
        ``keep`` (a migrations table: the next user's setup then finds the
        tables made) and restarts its sequences. Rows are deleted, not
        truncated: on this machine a ``TRUNCATE`` of the reference store's
        ten tables took 400 ms (a new file per table and index), the
        ``DELETE`` of a scenario's rows 11 ms. False (a lock waited for past
        two seconds, a server error): :meth:`release` it instead."""
        import psycopg

        if self._conn.closed or not all(re.fullmatch(r"[a-z_][a-z0-9_]*", k) for k in keep):
            return False
        skip = "ARRAY[" + ",".join(f"'{k}'" for k in keep) + "]::text[]"
        # One round trip; the name is of the harness's shape (checked when
        # the lease was made), so quoting it with %I/%L is enough.
        block = f"""DO $reset$ DECLARE r record; BEGIN
            SET LOCAL lock_timeout = 2000;
            FOR r IN SELECT tablename FROM pg_tables
                     WHERE schemaname = '{self.name}' AND tablename <> ALL({skip}) LOOP
                EXECUTE format('DELETE FROM %I.%I', '{self.name}', r.tablename);
            END LOOP;
            FOR r IN SELECT sequencename, start_value FROM pg_sequences
                     WHERE schemaname = '{self.name}' LOOP
                PERFORM setval(format('%I.%I', '{self.name}', r.sequencename)::regclass,
                               r.start_value, false);
            END LOOP;
        END $reset$"""
        try:
            if sessions:
                self._conn.execute(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                    " WHERE application_name = %s AND pid <> pg_backend_pid()",
                    (sessions,),
                )
            with self._conn.transaction():
                self._conn.execute(block.encode())
        except psycopg.Error:
            return False
        return True

    def release(self) -> None:
        """Drop the schema and its record, and give the lock up (ending the
        session frees it). What cannot be dropped now is the next sweep's."""
        try:
            if not self._conn.closed:
                _drop_recorded(self._conn, self.name)
        finally:
            self._conn.close()


def sweep_postgres(url: str) -> list[str]:
    """Drop the schemas recorded in :data:`REGISTRY` that no live run owns
    (and their records); returns their names. Nothing else is looked at."""
    import psycopg

    gone = []
    with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
        if not _registry_exists(conn):
            return []
        try:
            rows = conn.execute(f"SELECT name::text FROM {REGISTRY} ORDER BY 1").fetchall()
        except psycopg.Error:
            return []  # a table of that name the harness did not make: not a record
        for (name,) in rows:
            if not _OWNED_SCHEMA.match(name):
                continue  # not a name the harness makes: a record it did not write
            key = _advisory_key(name)
            if not _try_lock(conn, key):
                continue  # a live run holds it
            try:
                if _drop_recorded(conn, name):
                    gone.append(name)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    return gone


# -- Redis key prefixes -------------------------------------------------------------

#: the key under a prefix that says its owner is alive
ALIVE = "alive"

#: set the ``alive`` key unless it exists, and record the prefix, at once
_CLAIM = """
local kind = redis.call('TYPE', KEYS[2]).ok
if kind ~= 'set' and kind ~= 'none' then return -1 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('SADD', KEYS[2], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return 1
end
return 0
"""


def _delete_under(client: Any, prefix: str) -> int:
    """Delete every key under ``prefix`` (a name of :data:`_OWNED_PREFIX`'s
    shape: no glob characters to escape)."""
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    return int(client.delete(*keys)) if keys else 0


class RedisLease:
    """This process owns the Redis keys under ``prefix`` while the lease is held.

    Take it before writing any key there: one script sets ``<prefix>alive``
    (unless it exists: then the prefix is someone else's and
    :class:`RuntimeError` says so) with a TTL of :data:`ALIVE_TTL`, renewed
    from a daemon thread, and adds ``prefix`` to :data:`OWNED_PREFIXES`. A
    sweeper deletes a recorded prefix's keys only once its ``alive`` key is
    gone. :meth:`release` deletes the prefix's keys, its record and the
    ``alive`` key, in that order.
    """

    def __init__(self, url: str, prefix: str, ttl: float | None = None) -> None:
        import redis

        if not _OWNED_PREFIX.match(prefix):
            raise ValueError(f"key prefix {prefix!r} is not one the harness makes (see tag())")
        _sweep_first("redis", url, sweep_redis)
        self.prefix = prefix
        self.key = f"{prefix}{ALIVE}"
        self._ttl_ms = int((ttl if ttl is not None else ALIVE_TTL) * 1000)
        self._client: Any = redis.Redis.from_url(
            url, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=CONNECT_TIMEOUT
        )
        self._token = f"{os.getpid()}:{uuid.uuid4().hex}"
        self._stop = threading.Event()
        try:
            claimed = self._client.eval(
                _CLAIM,
                2,
                self.key,
                OWNED_PREFIXES,
                self._token,
                self._ttl_ms,
                prefix,
                OWNED_PREFIXES_TTL_MS,
            )
            if claimed == -1:
                raise RuntimeError(
                    f"the Redis key {OWNED_PREFIXES!r} is not a set the harness made; the "
                    "harness records its key prefixes there: rename or delete that key"
                )
            if not claimed:
                raise RuntimeError(f"key prefix {prefix!r} is already owned by another process")
        except BaseException:
            self._client.close()
            raise
        self._thread = threading.Thread(
            target=self._renew, name=f"harness-alive:{prefix}", daemon=True
        )
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self._ttl_ms / 6000):
            # A failed renewal is retried at the next tick; if the server stays
            # away past the TTL, so do the keys a sweeper could delete.
            with contextlib.suppress(Exception):
                pipe = self._client.pipeline(transaction=False)
                pipe.set(self.key, self._token, px=self._ttl_ms)
                pipe.pexpire(OWNED_PREFIXES, OWNED_PREFIXES_TTL_MS)
                pipe.execute()

    def reset(self, *, sessions: str | None = None) -> bool:
        """Empty the prefix for its next user; whether it did. First ends the
        client connections called ``sessions`` (the former user's workers, as
        :meth:`SchemaLease.reset` does), then deletes every key under the
        prefix but the ``alive`` key, which keeps the prefix recorded as ours."""
        try:
            if sessions:
                for c in self._client.client_list():
                    if c.get("name") == sessions:
                        self._client.execute_command("CLIENT", "KILL", "ID", c["id"])
            keys = [
                k
                for k in self._client.scan_iter(match=f"{self.prefix}*", count=1000)
                if k != self.key.encode()
            ]
            if keys:
                self._client.delete(*keys)
        except Exception:
            return False
        return True

    def release(self) -> None:
        """Stop renewing; delete the prefix's keys, its record, then the
        ``alive`` key (what fails is the next sweep's, or expires)."""
        self._stop.set()
        self._thread.join()
        try:
            with contextlib.suppress(Exception):
                _delete_under(self._client, self.prefix)
                self._client.srem(OWNED_PREFIXES, self.prefix)
                self._client.delete(self.key)
        finally:
            self._client.close()


def sweep_redis(url: str) -> int:
    """Delete the keys of the prefixes recorded in :data:`OWNED_PREFIXES`
    whose owner is gone (and their records); returns how many keys."""
    import redis

    client: Any = redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT)
    try:
        try:
            recorded = client.smembers(OWNED_PREFIXES)
        except redis.ResponseError:
            return 0  # not a set: not a record the harness wrote
        dead = []
        for raw in recorded:
            prefix = raw.decode(errors="replace")
            if not _OWNED_PREFIX.match(prefix):
                continue  # not a prefix the harness makes: a record it did not write
            if not client.exists(f"{prefix}{ALIVE}"):
                dead.append(prefix)
        if not dead:
            return 0
        # One pass over the keyspace, however many prefixes are dead (every
        # prefix of that shape starts with "rr:").
        doomed, wanted = [], set(dead)
        for key in client.scan_iter(match="rr:*", count=1000):
            parts = key.decode(errors="replace").split(":", 2)
            if len(parts) == 3 and f"rr:{parts[1]}:" in wanted:
                doomed.append(key)
        deleted = int(client.delete(*doomed)) if doomed else 0
        client.srem(OWNED_PREFIXES, *dead)
        return deleted
    finally:
        client.close()


# -- leases serving one deployment after another --------------------------------------

#: idle leases of this process, emptied and ready: kind -> [(tag, leases)]
_pool: dict[Hashable, list[tuple[str, tuple[SchemaLease | RedisLease, ...]]]] = {}
_pool_lock = threading.Lock()
_pool_pid: list[int] = []
#: a forked child's inherited idle leases: kept referenced, never used nor
#: closed (closing a session the parent shares would end the parent's)
_inherited_pool: list[object] = []
#: idle leases kept per kind; one handed back beyond that is released
POOL_SIZE = 4


def _own_pool() -> None:
    """Under :data:`_pool_lock`: make the pool this process's own."""
    pid = os.getpid()
    if _pool_pid != [pid]:
        if _pool:
            _inherited_pool.append(dict(_pool))
            _pool.clear()
        _pool_pid[:] = [pid]
        atexit.register(_release_pool, pid)


def take_pooled(kind: Hashable) -> tuple[str, tuple[SchemaLease | RedisLease, ...]] | None:
    """Idle leases of ``kind`` (and the tag that names them) that
    :func:`give_pooled` kept in this process, or None: make new ones."""
    with _pool_lock:
        _own_pool()
        free = _pool.get(kind)
        return free.pop() if free else None


def give_pooled(kind: Hashable, tag: str, leases: tuple[SchemaLease | RedisLease, ...]) -> None:
    """Keep ``leases``, emptied by their user (``reset()`` returned True for
    each), for the next :func:`take_pooled` of ``kind`` in this process;
    past :data:`POOL_SIZE` idle ones, release them. ``kind`` must say all
    that a user of them depends on (the servers, what the schema holds)."""
    with _pool_lock:
        _own_pool()
        free = _pool.setdefault(kind, [])
        if len(free) < POOL_SIZE:
            free.append((tag, leases))
            return
    for lease in leases:
        lease.release()


def _release_pool(pid: int) -> None:
    """At exit: release this process's idle leases (drop what they hold)."""
    if os.getpid() != pid:
        return
    with _pool_lock:
        idle = [lease for free in _pool.values() for _, leases in free for lease in leases]
        _pool.clear()
    for lease in idle:
        with contextlib.suppress(Exception):
            lease.release()


def sweep(postgres_url: str | None = None, redis_url: str | None = None) -> dict[str, object]:
    """Sweep everything that harness processes killed before left behind."""
    report: dict[str, object] = {"folders": sweep_folders()}
    # After the folders: a dead run's processes are killed first. Rules
    # carry their owner's lock (harness._netfilter), not a server's.
    report["netfilter"] = sweep_rules()
    if postgres_url:
        report["schemas"] = sweep_postgres(postgres_url)
    if redis_url:
        report["redis_keys"] = sweep_redis(redis_url)
    return report
