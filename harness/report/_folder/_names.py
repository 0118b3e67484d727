"""The names a report folder holds: the marker, the files the harness
writes and may replace, its temporary names; and the refusal of a folder."""

from __future__ import annotations

import os
import re
import secrets
import stat
import sys
from pathlib import Path, PurePosixPath

from ..._errors import UsageError

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


def warn(text: str) -> None:
    """A warning for the user, on standard error."""
    print(f"harness: warning: {text}", file=sys.stderr, flush=True)
