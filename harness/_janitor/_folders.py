"""Scratch folders a run owns while it holds their lock file, the template
files built once per process inside one, and the sweep of the folders no
live process holds (the package's docstring says why a lock, never a pid)."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from .._signals import shielded
from ._processes import kill_recorded

#: scratch folders start with this
FOLDER_PREFIX = "harness-"
#: the lock file inside a scratch folder; the folder lives while it is locked
LOCK_NAME = ".harness-owner.lock"

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
