"""``harness report`` and ``harness merge``: a stored run rendered again,
and the shards of one search merged into one report. Both read folders
anyone may have written (CI artifacts): a replay command they print names
only an adapter the user chose, or one built in."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..report import Report, load_report, merge_reports, replay_command, write_reports
from ._output import _line, _step_summary, _summary, exit_code


def report(folder: Path, out: TextIO) -> int:
    """``harness report DIR``: re-render every format from the stored run,
    without running anything; exit 1 if the stored verdict is a failure."""
    stored = _replays_as_data(load_report(folder), folder)
    write_reports(stored, folder)
    _step_summary(folder)
    _line(out, f"harness: re-rendered {folder} (verdict: {stored.verdict.upper()})")
    for name in ("report.json", "report.html", "junit.xml", "summary.md"):
        _line(out, f"  {folder / name}")
    return exit_code(stored.verdict)


def _replays_as_data(stored: Report, folder: Path) -> Report:
    """``stored`` with its replay commands made again from its adapter, as
    :func:`replay_command` shows an adapter the user did not name: the
    stored strings are data anyone may have written (a CI artifact), and a
    printed command names only code the user chose."""
    spec, opts = stored.adapter.spec, stored.adapter.options
    given = _given_specs(stored)

    def command(where: Path) -> str:
        return replay_command(where, spec, opts, chosen=False, properties=given)

    ce = stored.counterexample
    others = [
        o.model_copy(update={"replay": command(folder / (o.folder or f"failures/{n}"))})
        for n, o in enumerate(stored.other_failures, 1)
    ]
    return stored.model_copy(
        update={
            "counterexample": None
            if ce is None
            else ce.model_copy(update={"replay": command(folder)}),
            "other_failures": others,
        }
    )


def _given_specs(stored: Report) -> list[str]:
    """The specs of the invariants ``stored``'s run was given (what its
    replay command names with ``--property``)."""
    return list(dict.fromkeys(p.spec for p in stored.properties if p.source == "run" and p.spec))


def merge(ns: argparse.Namespace, out: TextIO) -> int:
    """``harness merge DIR... --report-dir OUT``: one report from the report
    folders of a search's shards; the exit code of the merged verdict. The
    shards' folders are data (CI artifacts): a replay command it prints
    names an adapter only when it is built in."""
    opened = None
    if getattr(ns, "example_db", None) is not None:
        from .._exampledb import open_example_db

        # Before anything is written: an example database that cannot be
        # used is refused (exit 2) with no merged folder to hide the verdict.
        opened = open_example_db(ns.example_db)
    merged = merge_reports(list(ns.dirs), ns.report_dir, partial=ns.partial, chosen=False)
    info = merged.merged
    assert info is not None
    if opened is not None:
        from .._exampledb import ExampleDb

        db = ExampleDb(ns.example_db, merged.adapter.spec, merged.adapter.options, db=opened)
        kept, dropped = db.keep(merged, db.saved())
        _line(
            out,
            f"harness: example database {db.where}: kept {kept} counterexample(s), "
            f"dropped {dropped} that no longer fail",
        )
    missing = (
        f", missing {', '.join(f'{k}/{info.n}' for k in info.missing)}" if info.missing else ""
    )
    _line(
        out,
        f"harness: merged shards {', '.join(f'{k}/{info.n}' for k in info.shards)}{missing} "
        f"into {ns.report_dir}",
    )
    _summary(out, merged, ns.report_dir)
    _step_summary(ns.report_dir)
    return exit_code(merged.verdict)
