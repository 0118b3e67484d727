"""Writing every format of a report into its run folder.

The folder is one the harness owns (:mod:`._folder`): files go through a
temporary name and a rename, ``report.json`` last, and only files the
harness wrote there are ever replaced or removed.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..model import Verdict
from ..outcome import Example, Outcome
from ._build import other_failures
from ._folder import RENDERINGS, _Owned, locked, release_report_folder
from ._html import render_html
from ._junit import render_junit
from ._markdown import render_markdown
from ._schema import Report
from ._start import once_per_report


def write_reports(report: Report, folder: Path) -> dict[str, Path]:
    """Write ``report.json``, ``report.html``, ``junit.xml`` and ``summary.md``
    into ``folder`` (where the run's histories are kept); returns their paths
    by name. The same report and folder always give the same bytes.

    ``folder`` must be one the harness owns (see
    :func:`~harness.report.claim_report_folder`); a run folder an older
    harness wrote (``report.json``, no marker) is adopted, its four
    renderings being the only files replaced. Raises
    :class:`~harness.report.ReportFolderError` before writing anything when
    the folder is not the harness's or a rendering's place is taken.
    """
    with locked(folder):
        owned = _Owned.open(folder, adopt=RENDERINGS)
        texts = _renderings(report, folder)
        owned.write(texts)
        owned.save()
    return {name: folder / name for name in texts}


def write_run(
    report: Report,
    outcome: Outcome,
    last: Example | None,
    folder: Path,
    *,
    renderings: Sequence[str] = RENDERINGS,
) -> None:
    """Keep the run in ``folder``: the main counterexample's scenario and
    histories (or, when nothing failed, the last example's), every other
    counterexample under ``failures/N``, then every format of ``report``
    (``renderings``: only those), ``report.json`` last. What an earlier run
    wrote there and this one did not (a ``failures/N`` it had more of) is
    removed; nothing else is."""
    try:
        owned = _Owned.claim(folder)
        kept: dict[str, bytes | Path] = {}
        _keep_example(outcome.failure or last, "", kept)
        for n, (_, ex) in enumerate(other_failures(outcome), 1):
            _keep_example(ex, f"failures/{n}/", kept)
        kept[LEDGER] = ledger_lines(outcome)
        owned.write(kept)
        # The renderings read the histories just kept: render after writing them.
        texts = _renderings(report, folder, renderings)
        owned.write(texts)
        owned.keep_only([*kept, *texts])
    finally:
        release_report_folder(folder)  # the run's report is written: the run is over


def write_merged(report: Report, files: dict[str, bytes | Path], folder: Path) -> None:
    """Keep a merged report in ``folder`` (``harness merge``): ``files`` (a
    relative path -> the file to copy, or its bytes: the shards'
    counterexamples, the joined ``scenarios.jsonl``), then
    every format of ``report``, ``report.json`` last; what an earlier
    report there had and this one has not is removed, nothing else is."""
    try:
        owned = _Owned.claim(folder)
        owned.write(files)
        texts = _renderings(report, folder)
        owned.write(texts)
        owned.keep_only([*files, *texts])
    finally:
        release_report_folder(folder)  # the merged report is written


def _renderings(
    report: Report, folder: Path, names: Sequence[str] = RENDERINGS
) -> dict[str, bytes]:
    """Every rendering's bytes (of ``names``), in :data:`RENDERINGS` order
    (``report.json`` last). Text is UTF-8; a character UTF-8 cannot carry
    (a lone surrogate from a runtime) is written as its ``\\uXXXX``
    escape, never an error."""
    report._folder = folder
    render = {
        "report.html": lambda: render_html(report, folder),
        "junit.xml": lambda: render_junit(report, folder),
        "summary.md": lambda: render_markdown(report),
        "report.json": report.to_json,
    }
    with _no_collection(), once_per_report():
        return {
            name: render[name]().encode("utf-8", "backslashreplace")
            for name in RENDERINGS
            if name in names
        }


@contextmanager
def _no_collection() -> Iterator[None]:
    """The cyclic garbage collector held off: rendering allocates in
    proportion to the report, which sets off full collections that each
    walk every object of the loaded report (a sixth of ``harness report``'s
    time, measured on 12,000 properties); the little garbage it leaves is
    collected after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _keep_example(example: Example | None, prefix: str, into: dict[str, bytes | Path]) -> None:
    if example is None:
        return
    for name in ("history.jsonl", "oracle.jsonl", "scenario.json"):
        src = example.folder / name
        if src.exists():
            into[prefix + name] = src
    results = json.dumps([r.model_dump(mode="json") for r in example.results], indent=2)
    into[prefix + "results.json"] = results.encode("ascii")
    if any(r.verdict is Verdict.FAIL for r in example.results):
        log = worker_output(example.folder)
        if log:
            into[prefix + WORKER_LOG] = log


#: every scenario the run executed, one JSON object a line
LEDGER = "scenarios.jsonl"


def ledger_lines(outcome: Outcome) -> bytes:
    """``scenarios.jsonl``: the outcome's ledger in the order run, each line
    with its ``n`` (from 1) and ``phase``: ``search`` (the plan: targeted,
    sampled, regressions; with its ``index`` in the whole plan, from 0) or
    ``shrink`` (run after the plan, shrinking)."""
    lines = [
        json.dumps(
            {"n": n, "phase": "search" if n <= outcome.searched else "shrink", **entry},
            sort_keys=True,
        )
        for n, entry in enumerate(outcome.ledger, 1)
    ]
    return "".join(line + "\n" for line in lines).encode("ascii")


#: where a failing scenario's worker output is kept, beside its history
WORKER_LOG = "workers.log"
#: how much of it: the end, where a crash's traceback is
WORKER_LOG_BYTES = 256 * 1024


def worker_output(folder: Path) -> bytes:
    """What the scenario's workers printed (every ``workers.log`` its
    deployment left, as the kit's ``WorkerSet`` and ``ForkServer.spawn(log=)``
    write them), each under a header naming it; the last
    :data:`WORKER_LOG_BYTES` of it. Empty if there is none."""
    env = folder / "env"
    if not env.is_dir():
        return b""
    parts = []
    for path in sorted(p for p in env.rglob(WORKER_LOG) if p.is_file() and not p.is_symlink()):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if data:
            parts.append(f"==> {path.relative_to(folder)} <==\n".encode() + data)
    out = b"\n".join(parts)
    return out[-WORKER_LOG_BYTES:]
