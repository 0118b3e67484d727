"""Reading the report folders of a search's shards, for ``harness merge``.

Report folders are data anyone may have written (CI artifacts): each is
loaded and validated like ``harness report`` does (:func:`load_report`), the
shards must be of one search (:func:`load_shards`), the paths a report names
must stay inside its folder, only regular files are copied, and a ledger
(``scenarios.jsonl``) that is not of the ledger's shape is refused -- all
before the merge writes anything (:class:`MergeError`, exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from .._artifacts import loads_json, read_artifact, size_limit
from .._errors import UsageError
from ._folder import RUN_FILES
from ._schema import Report
from ._store import load_report
from ._write import LEDGER, WORKER_LOG

_SAME = (
    "merge only the shards of one search: the same --adapter, --adapter-opt, --seed, "
    "--profile and --max-examples, each with its own --shard K/N"
)


class MergeError(UsageError):
    """The folders cannot be merged (exit code 2); the message says why."""


def _name(r: Report) -> str:
    assert r.shard is not None
    return f"shard {r.shard.k}/{r.shard.n} ({r.folder})"


def _identity(r: Report) -> dict[str, Any]:
    """What must be equal in every shard of one search."""
    assert r.shard is not None
    return {
        "adapter": r.adapter.spec,
        "adapter options": dict(sorted(r.adapter.options.items())),
        "adapter configuration": r.adapter.description,
        "capabilities": sorted(r.adapter.capabilities),
        "seed": r.seed,
        "profile": r.profile,
        "fault families": sorted(r.families),
        "shard count N": r.shard.n,
        "whole plan (scenarios)": r.shard.plan,
    }


def load_shards(folders: Sequence[Path], out: Path, *, partial: bool = False) -> list[Report]:
    """The shard reports in ``folders``, checked to be one search's, by K.
    Raises :class:`MergeError` (or :class:`~harness.RunFolderError`) saying
    what is wrong and how to fix it."""
    if not folders:
        raise MergeError(
            "name the shard report folders to merge: harness merge DIR... --report-dir OUT"
        )
    out_real = out.resolve()
    reports: list[Report] = []
    seen: dict[Path, Path] = {}
    for folder in folders:
        real = folder.resolve()
        if real == out_real:
            raise MergeError(
                f"{folder} is both a shard to merge and the --report-dir: the merge would "
                "overwrite it; give the merged report a folder of its own"
            )
        if real in seen:
            raise MergeError(f"{folder} is named twice (as {seen[real]}); name each shard once")
        seen[real] = folder
        r = load_report(folder)
        if r.merged is not None:
            raise MergeError(
                f"{folder} holds a merged report, not a shard's: merge the shards' own "
                "folders (harness run --shard K/N --report-dir DIR)"
            )
        if r.shard is None:
            raise MergeError(
                f"{folder} holds a report of a whole search, not of a shard (its report.json "
                "has no shard): merge the folders of runs made with --shard K/N"
            )
        reports.append(r)
    first = reports[0]
    want = _identity(first)
    for r in reports[1:]:
        have = _identity(r)
        for key, value in want.items():
            if have[key] != value:
                raise MergeError(
                    f"{_name(r)} and {_name(first)} are not shards of one search: {key} "
                    f"{have[key]!r} differs from {value!r}; {_SAME}"
                )
    by_k: dict[int, Report] = {}
    for r in reports:
        assert r.shard is not None
        if r.shard.k in by_k:
            raise MergeError(
                f"shard {r.shard.k}/{r.shard.n} is given twice ({by_k[r.shard.k].folder} and "
                f"{r.folder}); name each shard's folder once"
            )
        by_k[r.shard.k] = r
    n = want["shard count N"]
    missing = [k for k in range(1, n + 1) if k not in by_k]
    if missing and not partial:
        raise MergeError(
            f"shard(s) {', '.join(f'{k}/{n}' for k in missing)} missing: {len(by_k)} of the "
            f"{n} shards given; add their report folders, or pass --partial to merge these "
            "anyway (the merged verdict is then inconclusive)"
        )
    return [by_k[k] for k in sorted(by_k)]


def _checked_dir(root: Path, rel: str) -> Path | None:
    """``root/rel`` when it is a real folder inside ``root`` (no link on the way)."""
    path = root
    for part in PurePosixPath(rel).parts:
        if part == ".":
            continue
        path = path / part
        if path.is_symlink() or not path.is_dir():
            return None
    return path if root.resolve() in [path.resolve(), *path.resolve().parents] else None


def _copy_example(root: Path, rel: str, dest: str, files: dict[str, bytes | Path]) -> None:
    """The kept files of the scenario at ``root/rel`` (plain files only), to ``dest``."""
    src = _checked_dir(root, rel)
    if src is None:
        return
    for name in (*RUN_FILES, WORKER_LOG):
        path = src / name
        if path.is_file() and not path.is_symlink():
            # refused now, before the merge writes anything, not halfway
            if path.stat().st_size > size_limit():
                raise MergeError(
                    f"{path} is {path.stat().st_size} bytes, more than the {size_limit()} "
                    "bytes the harness copies from one file (raise HARNESS_MAX_ARTIFACT_BYTES "
                    "if it is genuine)"
                )
            files[f"{dest}{name}"] = path


def _in_plan_order(lines: Sequence[bytes]) -> bytes:
    """The shards' ledger lines, those of the plan (``phase`` ``search``,
    with its ``index``) in the plan's order, then the rest as they come."""

    def key(line: bytes) -> tuple[int, int]:
        entry = json.loads(line)
        index = entry.get("index")
        if entry.get("phase") == "search" and isinstance(index, int):
            return 0, index
        return 1, 0

    ordered = sorted((key(line), i, line) for i, line in enumerate(lines))
    return b"".join(line for _, _, line in ordered)


#: the fields of a ``scenarios.jsonl`` line a merge relies on, and their types
_LEDGER_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "name": (str,),
    "phase": (str,),
    "n": (int,),
    "index": (int,),
    "faults": (list,),
    "failed": (list,),
    "history": (str, type(None)),
}


def _ledger_problem(entry: Any) -> str | None:
    """What is wrong with one ledger line (parsed), or None."""
    if not isinstance(entry, dict):
        return "not a JSON object"
    for key, types in _LEDGER_FIELDS.items():
        if key not in entry:
            continue
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, types):
            return f"{key} is {type(value).__name__}, not {' or '.join(t.__name__ for t in types)}"
        if isinstance(value, int) and value < 0:
            return f"{key} is negative ({value})"
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            return f"{key} is not a list of names"
    if entry.get("phase", "search") not in ("search", "shrink"):
        return f"phase is {entry['phase']!r}, not search or shrink"
    return None


def _ledger(r: Report) -> list[bytes]:
    """The shard's ``scenarios.jsonl`` lines, each marked with its shard
    (none if the folder has no such file). A ledger that is not a regular
    file, too large, or not JSON lines of the ledger's shape is refused
    (:class:`MergeError`): before the merge writes anything."""
    assert r.shard is not None and r.folder is not None
    path = r.folder / LEDGER
    fix = "merge the folders harness run --shard K/N wrote, unmodified"
    try:
        data = read_artifact(path, inside=r.folder, error=MergeError, fix=fix)
    except FileNotFoundError:
        return []
    lines = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = loads_json(line)
        except (ValueError, UnicodeDecodeError) as exc:
            raise MergeError(f"{path}:{n} is not JSON ({exc}); {fix}") from None
        problem = _ledger_problem(entry)
        if problem is not None:
            raise MergeError(f"{path}:{n} is not a scenarios.jsonl line: {problem}; {fix}")
        entry["shard"] = r.shard.k
        lines.append(json.dumps(entry, sort_keys=True, allow_nan=False).encode("ascii") + b"\n")
    return lines
