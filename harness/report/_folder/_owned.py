"""What the harness owns in a report folder (:class:`_Owned`: the marker,
what it may replace and delete), claiming a folder and keeping one more file
in it."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ..._artifacts import loads_json, read_artifact
from ._files import _digest, _fd_sha256, _folder_fd, _is_plain_file, _put, _valid_digest
from ._lock import _lock, release_report_folder
from ._names import (
    _CLOEXEC,
    _FIX,
    _NOFOLLOW,
    MARKER,
    MARKER_VERSION,
    PLACEHOLDERS,
    RENDERINGS,
    RUN_FILES,
    ReportFolderError,
    _is_temporary,
    _kind,
    _refuse,
    _temporary,
    is_own_path,
    warn,
)


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
