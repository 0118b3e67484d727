"""The report folder: the part of the user's disk the harness owns, and how.

A ``--report-dir`` may be any folder someone names, including ``.``, and a
report folder may be a CI artifact anyone wrote. The harness writes there
only when the folder is new or empty (it then becomes the harness's, with a
marker file) or already carries the marker of an earlier harness run; a
folder holding anything else is refused before the run starts.

What the harness may replace: a file at one of its own fixed names
(:data:`OWN_NAMES`, at the top, under ``failures/N/`` or ``shards/K/``)
that the marker lists. What it may delete: only such a file whose content
is still what the harness wrote -- the marker, :data:`MARKER`, records the
SHA-256 and size of every file it wrote, and a file whose digest no longer
matches (or that an older marker lists without one) is kept and named in a
warning. Editing the marker cannot make the harness delete ``notes.md`` or
``src/app.py``: those are not its names.

Every file is written through a temporary file created exclusively, without
following links (``O_CREAT|O_EXCL|O_NOFOLLOW``, a random name beside the
target), flushed, and renamed into place (``os.replace``), with
``report.json`` last: a run killed while writing leaves the previous
finished report complete, never a half file. Folders on the way are opened
without following links. A path the harness is about to write that is a
symbolic link, a FIFO, a device or a folder is refused (exit 2), having
changed nothing. The temporary names are listed in the marker before they
are created, so a later run removes what an interrupted one left behind.

One run at a time: a run holds an exclusive lock (``flock``) on the folder
from its claim until its report is written; a second run given the same
folder meanwhile is refused (exit 2).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath
from typing import Any

from .._artifacts import loads_json, read_artifact
from .._errors import UsageError

__all__ = [
    "MARKER",
    "ReportFolderError",
    "claim_report_folder",
    "keep_file",
    "release_report_folder",
]

#: The marker file of a folder the harness owns (a JSON object).
MARKER = ".harness-report"
#: The marker's format: 2 records each file's digest; 1 (a plain list) is
#: still read, its entries unverifiable (replaced at the harness's names,
#: never deleted). A newer one is refused (upgrade the harness).
MARKER_VERSION = 2
#: Files that keep an otherwise empty folder in version control: a folder
#: holding only these counts as empty (they are never touched)
PLACEHOLDERS = frozenset({".gitkeep", ".keep", ".gitignore"})
#: Files a run writes at the top of its folder (before the renderings).
RUN_FILES = ("history.jsonl", "oracle.jsonl", "scenario.json", "results.json")
#: The renderings, in the order they are written: ``report.json`` last.
RENDERINGS = ("report.html", "junit.xml", "summary.md", "report.json")
#: Every name the harness writes a file under (at the top of a report
#: folder, in ``failures/N/``, ``shards/K/`` or ``shards/K/failures/N/``):
#: the only names it will ever delete.
OWN_NAMES = frozenset(
    {*RUN_FILES, *RENDERINGS, "scenarios.jsonl", "workers.log", "adapter-error.txt"}
)
_NUMBER = re.compile(r"[0-9]+")
#: a temporary name the harness made: ``.NAME.harness-tmp-<hex>``
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.harness-tmp-[0-9a-f]{16}")

_FIX = "pick an empty or new folder for --report-dir, or a folder an earlier harness run wrote"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class ReportFolderError(UsageError):
    """The report folder cannot be used: it is not the harness's to write
    (not empty and no marker), it is a file or lies under one, a file the
    harness would write is in the way (or is a link, a FIFO, a device), or
    another run is writing it. Nothing was written or deleted."""


def claim_report_folder(path: str | os.PathLike[str]) -> None:
    """Make ``path`` a report folder the harness owns, or refuse it.

    A missing folder is created, an empty one is taken; either gets the
    marker. A folder that already has the marker is accepted again. The
    folder stays locked until this process's report there is written (or
    :func:`release_report_folder`, or the process ends). Raises
    :class:`ReportFolderError` (exit code 2), having changed nothing, when
    the folder holds files and no marker, is a file or lies under one,
    cannot be written, is being written by another run, or holds something
    of the user's where the harness writes (``report.html`` a directory,
    ``summary.md`` not written by the harness, a link). Call it before the
    run: a refusal after the run loses the run.
    """
    _Owned.claim(Path(path))


def _refuse(folder: Path, what: str, fix: str = _FIX) -> ReportFolderError:
    return ReportFolderError(f"report folder {folder}: {what}; {fix}")


def is_own_path(rel: str) -> bool:
    """``rel`` names a file the harness writes: one of :data:`OWN_NAMES`, at
    the top or under ``failures/N/``, or anywhere under ``shards/K/`` (where
    ``harness merge`` copies a shard's files)."""
    parts = PurePosixPath(rel).parts
    if not parts or parts[-1] not in OWN_NAMES:
        return False
    folders = parts[:-1]
    if len(folders) >= 2 and folders[0] == "shards" and _NUMBER.fullmatch(folders[1]):
        return True
    return not folders or (
        len(folders) == 2 and folders[0] == "failures" and bool(_NUMBER.fullmatch(folders[1]))
    )


def _is_temporary(rel: str) -> bool:
    p = PurePosixPath(rel)
    m = _TEMPORARY.fullmatch(p.name)
    return m is not None and is_own_path(str(p.with_name(m["name"])))


def _temporary(rel: str) -> str:
    p = PurePosixPath(rel)
    return str(p.with_name(f".{p.name}.harness-tmp-{secrets.token_hex(8)}"))


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


#: the folders this process holds the lock of (real path -> the folder's fd)
_LOCKED: dict[str, int] = {}


def _lock(folder: Path) -> bool:
    """Hold an exclusive lock on the folder (``flock`` on the folder itself:
    no file of its own) until :func:`release_report_folder` or the end of
    this process. True: taken now; False: this process held it already."""
    key = os.path.realpath(folder)
    if key in _LOCKED:
        return False
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise _refuse(folder, f"it cannot be opened ({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            # a file system without flock (some network ones): the run goes
            # on unlocked rather than being refused for the file system's sake
            _LOCKED[key] = fd
            return True
        os.close(fd)
        raise _refuse(
            folder,
            "another harness run is writing it now (it holds the folder's lock)",
            "wait for that run to end, or give this one a --report-dir of its own",
        ) from None
    _LOCKED[key] = fd
    return True


def release_report_folder(path: str | os.PathLike[str]) -> None:
    """Let other runs write ``path`` again (the report of this process's
    run there is written). Not holding it: a no-op."""
    fd = _LOCKED.pop(os.path.realpath(path), None)
    if fd is not None:
        with suppress(OSError):
            os.close(fd)


@contextmanager
def locked(folder: Path) -> Iterator[None]:
    """For the block: the folder as locked as it was (by this process's run),
    or, if it was not, locked when claimed in the block and released after."""
    held = os.path.realpath(folder) in _LOCKED
    try:
        yield
    finally:
        if not held:
            release_report_folder(folder)


def _forget_locks() -> None:
    """In a forked child: it does not own its parent's run. Closing its copy
    of each descriptor leaves the parent's lock held (the lock is released
    when every copy is closed), and a child that outlives its parent does
    not keep the folder locked."""
    for fd in _LOCKED.values():
        with suppress(OSError):
            os.close(fd)
    _LOCKED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_locks)


@contextmanager
def _folder_fd(folder: Path, parent: PurePosixPath, *, create: bool) -> Iterator[int]:
    """A descriptor of ``folder/parent``, every folder under ``folder`` opened
    without following a link (and made, with ``create``)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        for part in parent.parts:
            if part in ("", "."):
                continue
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                sub = os.open(part, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refuse(
                        folder,
                        f"{parent} is not a folder the harness can use (a link or a file)",
                        f"move {folder / parent} away, or pick another folder for --report-dir",
                    ) from None
                raise
            os.close(fd)
            fd = sub
        yield fd
    finally:
        os.close(fd)


def _digest(data: bytes) -> dict[str, Any]:
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def warn(text: str) -> None:
    """A warning for the user, on standard error."""
    print(f"harness: warning: {text}", file=sys.stderr, flush=True)


class _Owned:
    """A claimed folder and the files its marker lists (relative POSIX paths),
    each with the digest the harness recorded (None: an older marker's entry
    or a temporary name, which cannot be verified)."""

    def __init__(self, folder: Path, files: Mapping[str, dict[str, Any] | None]) -> None:
        self.folder = folder
        self.files: dict[str, dict[str, Any] | None] = dict(files)

    # -- claiming ------------------------------------------------------------

    @classmethod
    def claim(cls, folder: Path) -> _Owned:
        for parent in [folder, *folder.parents]:
            if parent.exists() and not parent.is_dir():
                what = "is a file" if parent == folder else f"lies under {parent}, which is a file"
                raise _refuse(folder, f"it {what}, not a folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _refuse(folder, f"it cannot be created ({exc.strerror or exc})") from exc
        if (folder / MARKER).exists() or (folder / MARKER).is_symlink():
            owned = cls.read(folder)
        else:
            # A placeholder that keeps an empty folder in version control
            # (the project's own reports/.gitkeep) does not make it a user's.
            try:
                others = sorted(p.name for p in folder.iterdir() if p.name not in PLACEHOLDERS)
            except OSError as exc:
                raise _refuse(folder, f"it cannot be listed ({exc.strerror or exc})") from None
            if others:
                shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
                raise _refuse(
                    folder,
                    f"it is not empty ({shown}) and no harness run wrote it (no {MARKER} "
                    "marker): the harness deletes and replaces only files it wrote itself",
                    _FIX + " (delete an older harness's report folder, or name a new one)",
                )
            owned = cls(folder, {})
        _lock(folder)
        owned.check(RUN_FILES + RENDERINGS)
        failures = folder / "failures"
        if failures.is_symlink() or (failures.exists() and not failures.is_dir()):
            raise _refuse(folder, "failures is not a folder the harness can write into")
        if failures.is_dir():
            # other counterexamples go to failures/N/: refuse now, not after the run
            owned.check(
                str(p.relative_to(folder).as_posix())
                for p in failures.glob("*/*")
                if p.name in RUN_FILES
            )
        owned.save()  # proves the folder is writable, before the run
        return owned

    @classmethod
    def read(cls, folder: Path) -> _Owned:
        """The marker of ``folder``, checked: every path it lists stays inside."""
        path = folder / MARKER
        fix = "delete the folder or pick another for --report-dir"
        try:
            raw = loads_json(read_artifact(path, error=ReportFolderError, fix=fix))
            version, files = raw["version"], raw["files"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise _refuse(folder, f"its {MARKER} marker is unreadable ({exc})", fix) from None
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise _refuse(folder, f"its {MARKER} marker has version {version!r}")
        if version > MARKER_VERSION:
            raise _refuse(
                folder,
                f"a newer harness wrote it (marker version {version}, this harness "
                f"knows up to {MARKER_VERSION})",
                "upgrade stateful-agent-harness, or pick another folder",
            )
        entries: dict[str, dict[str, Any] | None] = {}
        if isinstance(files, list) and all(isinstance(f, str) for f in files):
            entries = dict.fromkeys(files)  # version 1: nothing to verify
        elif isinstance(files, dict) and all(e is None or _valid_digest(e) for e in files.values()):
            entries = {rel: (None if e is None else dict(e)) for rel, e in files.items()}
        else:
            raise _refuse(folder, f"its {MARKER} marker does not list file names", fix)
        for rel in entries:
            p = PurePosixPath(rel)
            if p.is_absolute() or not p.parts or ".." in p.parts or rel != str(p) or "\\" in rel:
                raise _refuse(
                    folder, f"its {MARKER} marker lists {rel!r}, which is not a path inside it", fix
                )
        return cls(folder, entries)

    @classmethod
    def open(cls, folder: Path, *, adopt: Iterable[str] = ()) -> _Owned:
        """The folder's marker; a folder without one is claimed, unless it is
        a run folder an older harness wrote (``report.json`` but no marker):
        then the existing files among ``adopt`` are taken as the harness's
        to replace (never to delete: their content cannot be verified)."""
        if not (folder / MARKER).exists() and (folder / "report.json").is_file():
            _lock(folder)
            owned = cls(folder, {n: None for n in adopt if _is_plain_file(folder / n)})
            owned.check(adopt)
            owned.save()
            return owned
        return cls.claim(folder)

    # -- checking and writing ---------------------------------------------

    def check(self, names: Iterable[str]) -> None:
        """Refuse (before anything is written) when one of ``names`` is in
        the way: a directory, a link, a FIFO or a device, or a file the
        marker does not list, or one not at a name the harness writes."""
        for rel in names:
            target = self.folder / rel
            for parent in reversed(PurePosixPath(rel).parents):
                p = self.folder / parent
                if str(parent) != "." and (p.is_symlink() or (p.exists() and not p.is_dir())):
                    raise _refuse(
                        self.folder,
                        f"{parent} is not a folder the harness can use (a link or a file)",
                        f"move {p} away, or pick another folder for --report-dir",
                    )
            try:
                mode = target.lstat().st_mode
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise _refuse(self.folder, f"{rel} cannot be examined ({exc.strerror})") from None
            if not stat.S_ISREG(mode):
                raise _refuse(
                    self.folder,
                    f"{rel} is {_kind(mode)} where the harness writes a file; it writes only "
                    "regular files and never through a link",
                    f"move {target} away, or pick another folder for --report-dir",
                )
            if rel not in self.files:
                raise _refuse(
                    self.folder,
                    f"{rel} is there and the harness did not write it (the {MARKER} "
                    "marker does not list it)",
                    f"move {target} away, or pick another folder for --report-dir",
                )

    def save(self) -> None:
        """Write the marker (atomically, like every other file)."""
        files = {rel: self.files[rel] for rel in sorted(self.files)}
        text = json.dumps({"version": MARKER_VERSION, "files": files}, indent=2, sort_keys=True)
        _put(self.folder, MARKER, (text + "\n").encode("ascii"), _temporary(MARKER))

    def write(self, files: Mapping[str, bytes | Path]) -> None:
        """Write ``files`` (relative path -> bytes, or a file to copy, read
        as an artifact: a regular file, size-capped), in order, each through
        a temporary name. The marker lists each file and its temporary name
        before either exists, and each file's digest once it is written."""
        self.check(files)
        temporary = {rel: _temporary(rel) for rel in files}
        for rel in files:
            self.files.setdefault(rel, None)
        self.files.update(dict.fromkeys(temporary.values()))
        self.save()
        for rel, data in files.items():
            if isinstance(data, Path):
                data = read_artifact(data, error=ReportFolderError)
            _put(self.folder, rel, data, temporary[rel])
            self.files[rel] = _digest(data)
            del self.files[temporary[rel]]

    def keep_only(self, keep: Iterable[str]) -> None:
        """Remove every file the marker lists that is not in ``keep`` (what an
        earlier run wrote and this one did not), then save the marker. Only
        a file at a name the harness writes whose content is still what it
        recorded is removed (and a temporary file it left); any other is
        kept, forgotten by the marker, and named in a warning."""
        keep = set(keep)
        kept: list[str] = []
        for rel in sorted(set(self.files) - keep):
            entry = self.files.pop(rel)
            removed = self._remove(rel, entry)
            if removed is None:
                continue  # already gone
            if not removed:
                kept.append(rel)
                continue
            for parent in PurePosixPath(rel).parents:
                if str(parent) == ".":
                    break
                try:
                    (self.folder / parent).rmdir()  # only if now empty
                except OSError:
                    break
        if kept:
            shown = ", ".join(kept[:10]) + (", ..." if len(kept) > 10 else "")
            warn(
                f"report folder {self.folder}: kept {shown}: the harness deletes only files "
                "it can show it wrote (its own names, content unchanged since)"
            )
        self.save()

    def _remove(self, rel: str, entry: dict[str, Any] | None) -> bool | None:
        """Delete ``rel`` if it is provably the harness's: True; kept: False;
        None: it is not there."""
        p = PurePosixPath(rel)
        temporary = entry is None and _is_temporary(rel)
        if not temporary and (entry is None or not is_own_path(rel)):
            return False if os.path.lexists(self.folder / rel) else None
        try:
            with _folder_fd(self.folder, p.parent, create=False) as dfd:
                try:
                    flags = os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC
                    fd = os.open(p.name, flags, dir_fd=dfd)
                except FileNotFoundError:
                    return None
                try:
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode):
                        return False
                    if not temporary:
                        assert entry is not None
                        if st.st_size != entry["size"] or _fd_sha256(fd) != entry["sha256"]:
                            return False
                finally:
                    os.close(fd)
                os.unlink(p.name, dir_fd=dfd)
                return True
        except FileNotFoundError:
            return None
        except (OSError, ReportFolderError):
            return False


def _valid_digest(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and set(entry) == {"sha256", "size"}
        and isinstance(entry["sha256"], str)
        and re.fullmatch("[0-9a-f]{64}", entry["sha256"]) is not None
        and isinstance(entry["size"], int)
        and not isinstance(entry["size"], bool)
        and entry["size"] >= 0
    )


def _fd_sha256(fd: int) -> str:
    h = hashlib.sha256()
    while chunk := os.read(fd, 1 << 20):
        h.update(chunk)
    return h.hexdigest()


def _is_plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _put(folder: Path, rel: str, data: bytes, tmp: str) -> None:
    """Write ``data`` to ``folder/tmp`` (created exclusively, beside the
    target, never through a link), flush it to disk, and rename it over
    ``folder/rel``: readers see the old file or the new one. A target that
    is a link, a FIFO, a device or a folder is refused, untouched."""
    p, t = PurePosixPath(rel), PurePosixPath(tmp)
    try:
        with _folder_fd(folder, p.parent, create=True) as dfd:
            try:
                mode = os.stat(p.name, dir_fd=dfd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                mode = None
            if mode is not None and not stat.S_ISREG(mode):
                raise _refuse(
                    folder,
                    f"{rel} is {_kind(mode)} where the harness writes a file; it writes only "
                    "regular files and never through a link",
                    f"move {folder / rel} away, or pick another folder for --report-dir",
                )
            fd = os.open(
                t.name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
                0o666,
                dir_fd=dfd,
            )
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(t.name, p.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with suppress(OSError):
                    os.unlink(t.name, dir_fd=dfd)
                raise
    except OSError as exc:
        raise _refuse(
            folder,
            f"{rel} cannot be written ({exc.strerror or exc})",
            "check the folder's permissions and free space, or pick another folder",
        ) from exc


def keep_file(folder: str | os.PathLike[str], name: str, data: bytes) -> Path:
    """Write one more file into the report folder ``folder`` (claimed first
    if need be), listed in its marker like the rest: say, the adapter's
    traceback after an adapter error. The next run's report replaces it.
    The run is over: the folder's lock is released."""
    try:
        owned = _Owned.claim(Path(folder))
        owned.write({name: data})
        owned.save()
    finally:
        release_report_folder(folder)
    return Path(folder) / name
