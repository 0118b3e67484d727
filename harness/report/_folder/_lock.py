"""One run at a time: the ``flock`` a run holds on its report folder from
its claim until its report is written (forgotten in a forked child)."""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ._names import (
    _CLOEXEC,
    _refuse,
)

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
