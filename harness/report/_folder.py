"""The report folder: the part of the user's disk the harness owns, and how.

A ``--report-dir`` may be any folder someone names, including ``.``. The
harness writes there only when the folder is new or empty (it then becomes
the harness's, with a marker file) or already carries the marker of an
earlier harness run; a folder holding anything else is refused before the
run starts. The marker, :data:`MARKER`, lists every file the harness wrote
there; those are the only files it will ever replace or delete. A user's
file beside them (``notes.md``, ``failures/a.md``) is never touched.

Every file is written under a temporary name in its own folder and renamed
into place (``os.replace``), with ``report.json`` last: a run killed while
writing leaves the previous finished report complete, never a half file.
The temporary names are listed in the marker before they are created, so a
later run removes what an interrupted one left behind.

Paths read from a marker are data from a folder anyone may have written (a
CI artifact): each must be a plain relative path inside the folder, and the
harness only ever removes regular files through them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from .._errors import UsageError

__all__ = ["MARKER", "ReportFolderError", "claim_report_folder", "keep_file"]

#: The marker file of a folder the harness owns (a JSON object).
MARKER = ".harness-report"
#: The marker's format; a newer one is refused (upgrade the harness).
MARKER_VERSION = 1
#: Files that keep an otherwise empty folder in version control: a folder
#: holding only these counts as empty (they are never touched)
PLACEHOLDERS = frozenset({".gitkeep", ".keep", ".gitignore"})
#: Files a run writes at the top of its folder (before the renderings).
RUN_FILES = ("history.jsonl", "oracle.jsonl", "scenario.json", "results.json")
#: The renderings, in the order they are written: ``report.json`` last.
RENDERINGS = ("report.html", "junit.xml", "summary.md", "report.json")

_FIX = "pick an empty or new folder for --report-dir, or a folder an earlier harness run wrote"


class ReportFolderError(UsageError):
    """The report folder cannot be used: it is not the harness's to write
    (not empty and no marker), it is a file or lies under one, or a file the
    harness would write is in the way. Nothing was written or deleted."""


def claim_report_folder(path: str | os.PathLike[str]) -> None:
    """Make ``path`` a report folder the harness owns, or refuse it.

    A missing folder is created, an empty one is taken; either gets the
    marker. A folder that already has the marker is accepted again. Raises
    :class:`ReportFolderError` (exit code 2), having changed nothing, when
    the folder holds files and no marker, is a file or lies under one,
    cannot be written, or holds something of the user's where the harness
    writes (``report.html`` a directory, ``summary.md`` not written by the
    harness). Call it before the run: a refusal after the run loses the run.
    """
    _Owned.claim(Path(path))


def _refuse(folder: Path, what: str, fix: str = _FIX) -> ReportFolderError:
    return ReportFolderError(f"report folder {folder}: {what}; {fix}")


def _temporary(rel: str) -> str:
    p = PurePosixPath(rel)
    return str(p.with_name(f".{p.name}.harness-tmp"))


class _Owned:
    """A claimed folder and the files its marker lists (relative POSIX paths)."""

    def __init__(self, folder: Path, files: Iterable[str]) -> None:
        self.folder = folder
        self.files: set[str] = set(files)

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
            others = sorted(p.name for p in folder.iterdir() if p.name not in PLACEHOLDERS)
            if others:
                shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
                raise _refuse(
                    folder,
                    f"it is not empty ({shown}) and no harness run wrote it (no {MARKER} "
                    "marker): the harness deletes and replaces only files it wrote itself",
                    _FIX + " (delete an older harness's report folder, or name a new one)",
                )
            owned = cls(folder, ())
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
        try:
            if path.is_symlink() or not path.is_file():
                raise ValueError(f"{MARKER} is not a regular file")
            raw = json.loads(path.read_bytes().decode("utf-8"))
            version, files = raw["version"], raw["files"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise _refuse(
                folder,
                f"its {MARKER} marker is unreadable ({exc})",
                "delete the folder or pick another for --report-dir",
            ) from exc
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise _refuse(folder, f"its {MARKER} marker has version {version!r}")
        if version > MARKER_VERSION:
            raise _refuse(
                folder,
                f"a newer harness wrote it (marker version {version}, this harness "
                f"knows up to {MARKER_VERSION})",
                "upgrade stateful-agent-harness, or pick another folder",
            )
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise _refuse(folder, f"its {MARKER} marker does not list file names")
        for rel in files:
            p = PurePosixPath(rel)
            if p.is_absolute() or not p.parts or ".." in p.parts or rel != str(p) or "\\" in rel:
                raise _refuse(
                    folder,
                    f"its {MARKER} marker lists {rel!r}, which is not a path inside it",
                    "delete the folder or pick another for --report-dir",
                )
        return cls(folder, files)

    @classmethod
    def open(cls, folder: Path, *, adopt: Iterable[str] = ()) -> _Owned:
        """The folder's marker; a folder without one is claimed, unless it is
        a run folder an older harness wrote (``report.json`` but no marker):
        then the existing files among ``adopt`` are taken as the harness's."""
        if not (folder / MARKER).exists() and (folder / "report.json").is_file():
            owned = cls(folder, (n for n in adopt if _is_plain_file(folder / n)))
            owned.check(adopt)
            owned.save()
            return owned
        return cls.claim(folder)

    # -- checking and writing ---------------------------------------------

    def check(self, names: Iterable[str]) -> None:
        """Refuse (before anything is written) when one of ``names`` is in
        the way: a directory, or a file the marker does not list."""
        for rel in names:
            target = self.folder / rel
            if target.is_symlink() or target.exists():
                if target.is_dir() and not target.is_symlink():
                    raise _refuse(
                        self.folder,
                        f"{rel} is a directory where the harness writes a file",
                        f"move {target} away, or pick another folder for --report-dir",
                    )
                if rel not in self.files:
                    raise _refuse(
                        self.folder,
                        f"{rel} is there and the harness did not write it (the {MARKER} "
                        "marker does not list it)",
                        f"move {target} away, or pick another folder for --report-dir",
                    )
            for parent in PurePosixPath(rel).parents:
                p = self.folder / parent
                if str(parent) != "." and (p.is_symlink() or (p.exists() and not p.is_dir())):
                    raise _refuse(self.folder, f"{parent} is not a folder the harness can use")

    def save(self) -> None:
        """Write the marker (atomically, like every other file)."""
        text = json.dumps({"version": MARKER_VERSION, "files": sorted(self.files)}, indent=2)
        _put(self.folder / MARKER, (text + "\n").encode("ascii"))

    def write(self, files: Mapping[str, bytes | Path]) -> None:
        """Write ``files`` (relative path -> bytes, or a file to copy), in
        order, each through a temporary name. The marker lists each file
        and its temporary name before either exists."""
        self.check(files)
        self.files |= set(files) | {_temporary(rel) for rel in files}
        self.save()
        for rel, data in files.items():
            target = self.folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, Path):
                data = data.read_bytes()
            _put(target, data, self.folder / _temporary(rel))
        self.files -= {_temporary(rel) for rel in files}

    def keep_only(self, keep: Iterable[str]) -> None:
        """Remove every file the marker lists that is not in ``keep`` (what an
        earlier run wrote and this one did not), then save the marker."""
        keep = set(keep)
        root = self.folder.resolve()
        for rel in sorted(self.files - keep):
            target = self.folder / rel
            # Only plain files inside the folder: never follow a link out.
            if _is_plain_file(target) and root in target.resolve().parents:
                target.unlink()
            for parent in PurePosixPath(rel).parents:
                if str(parent) == ".":
                    break
                try:
                    (self.folder / parent).rmdir()  # only if now empty
                except OSError:
                    break
        self.files &= keep
        self.save()


def _is_plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _put(target: Path, data: bytes, tmp: Path | None = None) -> None:
    """Write ``data`` to ``tmp`` (beside ``target``), flush it to disk, and
    rename it over ``target``: readers see the old file or the new one."""
    tmp = tmp or target.with_name(f".{target.name}.harness-tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _refuse(
            target.parent,
            f"{target.name} cannot be written ({exc.strerror or exc})",
            "check the folder's permissions and free space, or pick another folder",
        ) from exc


def keep_file(folder: str | os.PathLike[str], name: str, data: bytes) -> Path:
    """Write one more file into the report folder ``folder`` (claimed first
    if need be), listed in its marker like the rest: say, the adapter's
    traceback after an adapter error. The next run's report replaces it."""
    owned = _Owned.claim(Path(folder))
    owned.write({name: data})
    owned.save()
    return Path(folder) / name
