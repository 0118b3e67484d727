"""Writing a file into a report folder: folders opened without following
links, a temporary file created exclusively, flushed and renamed into place;
and the digests the marker records."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath
from typing import Any

from ._names import (
    _CLOEXEC,
    _NOFOLLOW,
    _kind,
    _refuse,
)


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
