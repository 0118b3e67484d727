"""Reading artifacts: files anyone may have written (a CI artifact, a shard's
report folder, a scenario file someone sent).

Every reader of such a file goes through :func:`read_artifact`: it opens
regular files only (a FIFO would block forever, ``/dev/zero`` never ends, a
directory is not a file), never follows a link at the last step of a path
inside a folder the harness was handed (``report.json -> ~/.ssh/id_rsa``),
and refuses a file larger than :func:`size_limit` before reading it. JSON
is parsed by :func:`loads_json`, which refuses what RFC 8259 does not allow
(``NaN``, ``Infinity``) and nesting too deep to be a harness file. Each
refusal is a :class:`~harness.UsageError` (exit code 2) that names the path,
says why, and how to fix it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from ._errors import UsageError

__all__ = ["ArtifactError", "loads_json", "read_artifact", "size_limit"]

#: the environment variable that sets :func:`size_limit` (bytes)
LIMIT_ENV = "HARNESS_MAX_ARTIFACT_BYTES"
#: the default cap on one artifact file: far above any report a run writes
DEFAULT_LIMIT = 512 * 1024 * 1024


class ArtifactError(UsageError):
    """An artifact file cannot be read safely (exit code 2): not a regular
    file, a link where none may be, too large, or not strict JSON."""


def size_limit() -> int:
    """The largest artifact file read, in bytes: :data:`DEFAULT_LIMIT`, or
    ``$HARNESS_MAX_ARTIFACT_BYTES`` when that is a positive integer."""
    raw = os.environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return DEFAULT_LIMIT
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise UsageError(
            f"{LIMIT_ENV}={raw!r} is not a positive number of bytes; unset it or say, "
            f"{LIMIT_ENV}={DEFAULT_LIMIT}"
        )
    return value


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def read_artifact(
    path: str | os.PathLike[str],
    *,
    inside: str | os.PathLike[str] | None = None,
    follow: bool = False,
    limit: int | None = None,
    error: type[UsageError] = ArtifactError,
    fix: str = "",
) -> bytes:
    """The bytes of the regular file ``path``, read without blocking and
    without following a link at its last step (``follow=True``: a path the
    user named on the command line, which may be a link they made).

    ``inside``: the folder the file must stay in (after resolving every
    link on the way). Raises ``error`` (a :class:`UsageError`, exit 2)
    naming ``path`` when it is a FIFO, a device, a folder, a link, outside
    ``inside``, or larger than ``limit`` (default :func:`size_limit`);
    :class:`FileNotFoundError` when it does not exist, which callers turn
    into their own message. ``fix`` ends every refusal."""
    path = Path(path)
    cap = size_limit() if limit is None else limit
    tail = f"; {fix}" if fix else ""
    if inside is not None:
        root = os.path.realpath(inside)
        real = os.path.realpath(path)
        if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
            raise error(f"{path} leads outside {inside} (to {real}): not read{tail}")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise FileNotFoundError(errno.ENOENT, "no such file", str(path)) from None
        if exc.errno == errno.ELOOP and not follow:
            raise error(
                f"{path} is a symbolic link; the harness reads only regular files inside a "
                f"folder it is given{tail}"
            ) from None
        raise error(f"{path} cannot be read ({exc.strerror or exc}){tail}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path} is {_kind(st.st_mode)}, not a regular file: not read{tail}")
        if st.st_size > cap:
            raise error(_too_large(path, st.st_size, cap, tail))
        chunks: list[bytes] = []
        got = 0
        while True:
            chunk = os.read(fd, min(1 << 20, cap + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if got > cap:  # it grew while read
                raise error(_too_large(path, got, cap, tail))
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"{path} cannot be read ({exc.strerror or exc}){tail}") from None
    finally:
        os.close(fd)


def _too_large(path: Path, size: int, cap: int, tail: str) -> str:
    return (
        f"{path} is {size} bytes, more than the {cap} bytes the harness reads from one "
        f"file (raise {LIMIT_ENV} if it is genuine){tail}"
    )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (RFC 8259 allows finite numbers only)")


def loads_json(data: bytes | str) -> Any:
    """``data`` parsed as strict JSON: ``NaN``/``Infinity`` and numbers that
    overflow to infinity are refused (:class:`ValueError`), as is nesting
    too deep to parse (:class:`ValueError` too, never a RecursionError)."""
    try:
        return json.loads(data, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("it is nested too deeply to be a harness file") from None


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:40]} is too large for a finite number")
    return value
