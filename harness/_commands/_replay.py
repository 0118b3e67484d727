"""``harness replay``: a kept scenario run again, a run folder's (against
the adapter it recorded, when built in or trusted, or ``--adapter``) or a
scenario file's, and what failed again said apart from what did not."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TextIO

from .._errors import UsageError
from .._properties import adapter_properties, resolve_properties, specs_of
from .._settings import load_settings
from ..adapters._guard import close_adapter, guard, setup_adapter
from ..adapters._loading import BUILTIN, load_adapter, parse_opts
from ..adapters._specs import pythonpath_for, with_pythonpath
from ..model import PropertyResult, Verdict
from ..nemesis import resolve_worker_timeout, worker_timeout_limit
from ..outcome._replayed import replay_labels
from ..report import Report, load_run_folder, replay_command
from ..report._store import load_results
from ..scenarios import load_scenario_file
from ..session import Engine
from ..session._probe import judge_probe
from ._output import _line
from ._reports import _given_specs


def _failed_before(folder: Path) -> set[str] | None:
    """The properties the folder's counterexample failed when the run kept
    it (its ``results.json``); None when not kept or unreadable."""
    kept = load_results(folder / "results.json", inside=folder)
    return {r.name for r in kept if r.verdict is Verdict.FAIL} or None


def _say_reproduced(out: TextIO, failed: list[PropertyResult], before: set[str] | None) -> None:
    """``reproduced:`` names only what failed as it did in the run; what
    fails now and did not then, and what failed then and held now, are said
    apart: a replay against other options or another environment must not
    read as the same failure."""
    names = [r.name for r in failed]
    if before is None:
        _line(out, f"reproduced: {', '.join(names)} failed")
        return
    again = [n for n in names if n in before]
    new = [n for n in names if n not in before]
    held = sorted(before - set(names))
    if again:
        _line(out, f"reproduced: {', '.join(again)} failed")
    if held:
        _line(out, f"not reproduced: {', '.join(held)} held this time")
    if new:
        _line(
            out,
            f"{'also ' if again else ''}failed this time, not in the run: {', '.join(new)} "
            "(the adapter, its options or its environment may differ from the run's)",
        )


def replay(ns: argparse.Namespace, out: TextIO) -> int:
    """``harness replay DIR|FILE``: run a kept scenario again, the one of a run
    folder against the same adapter variant (or ``--adapter``), or a scenario
    file against ``--adapter``; exit 1 if a property fails again."""
    path: Path = ns.dir
    opts = parse_opts(ns.adapter_opt)
    named: list[str] = list(getattr(ns, "properties", None) or [])
    as_file = path.is_file() or (path.suffix == ".json" and not path.is_dir())
    if as_file:
        if ns.adapter is None:
            raise UsageError(
                f"{path} is a scenario file: name the adapter to replay it against "
                "(harness replay FILE --adapter NAME [--adapter-opt KEY=VALUE ...])"
            )
        scenario = load_scenario_file(path)
        adapter = load_adapter(ns.adapter, opts)
        settings = load_settings(ns.profile)
    else:
        stored, scenario = load_run_folder(path)
        spec, opts = _replay_adapter(ns, stored, path, out)
        named = _replay_properties(ns, stored, path, named, out)
        adapter = load_adapter(spec, opts)
        settings = load_settings(ns.profile or stored.profile)
    # the invariants named, then the adapter's and the installed ones, as a run gathers them
    mine = resolve_properties(named, installed=False)
    properties = resolve_properties([*mine, *adapter_properties(adapter)])
    engine = Engine(guard(adapter), settings, properties=properties)
    try:
        setup_adapter(adapter, log=lambda line: _line(out, line))
        with worker_timeout_limit(resolve_worker_timeout(settings.worker_timeout, adapter)):
            # a fault-free probe's counterexample is judged as the probe judged it
            example = judge_probe(engine.adapter, engine.execute(scenario))
    except BaseException as exc:
        engine.close()
        close_adapter(adapter, failing=exc)
        raise
    engine.close()
    close_adapter(adapter)  # the whole replay has ended: the optional hook
    _line(out, f"replaying {len(scenario.steps)} steps against {adapter.name}:")
    for i, step in enumerate(scenario.describe(), 1):
        _line(out, f"  {i}. {step}")
    failed = [r for r in example.results if r.verdict is Verdict.FAIL]
    # the run's words: not_tested where the run's rules (or its report) say
    # so, idle for a pass on no evidence in this one scenario
    recorded = None if as_file else {p.name: (p.verdict, p.reason) for p in stored.properties}
    for shown in replay_labels(
        example,
        [c.value for c in adapter.capabilities],
        None if as_file else stored.families,
        recorded,
    ):
        _line(out, f"  {shown.label:7} {shown.name}: {shown.message}")
    if failed:
        _say_reproduced(out, failed, None if as_file else _failed_before(path))
        _line(out, "minimal counterexample:")
        for i, step in enumerate(scenario.describe(), 1):
            _line(out, f"  {i}. {step}")
        specs = specs_of(mine) or []
        if as_file:
            words = ["harness", "replay", str(path), "--adapter", ns.adapter]
            for opt in ns.adapter_opt:
                words += ["--adapter-opt", opt]
            words += [w for p in specs for w in ("--property", p)]
            needs = pythonpath_for(ns.adapter, {**opts, **{f" {p}": p for p in specs}})
            _line(out, "replay: " + with_pythonpath(shlex.join(words), needs))
        else:
            _line(out, f"replay: {replay_command(path, spec, opts, properties=specs)}")
        return 1
    _line(out, "not reproduced: no property failed this time")
    sys.stdout.flush()
    return 0


def _replay_properties(
    ns: argparse.Namespace, stored: Report, folder: Path, named: list[str], out: TextIO
) -> list[str]:
    """The invariants to check on the replay of a run folder: those named
    (``--property``), else, with ``--trust-adapter``, those the folder's run
    was given (its report.json names them: code anyone may have written,
    imported only when the user says so); else none, saying what to add."""
    recorded = _given_specs(stored)
    if named or not recorded:
        return named
    shown = " ".join(f"--property {shlex.quote(p)}" for p in recorded)
    if getattr(ns, "trust_adapter", False):
        _line(
            out, f"harness: importing the recorded invariants ({shown}), as --trust-adapter allows"
        )
        return recorded
    _line(
        out,
        f"harness: {folder / 'report.json'} was judged with your invariants too; this replay "
        f"checks them only if you name them: add {shown} (or --trust-adapter)",
    )
    return []


def _replay_adapter(
    ns: argparse.Namespace, stored: Report, folder: Path, out: TextIO
) -> tuple[str, dict[str, str]]:
    """The adapter to replay a run folder against. A report folder is data
    anyone may have written (a CI artifact): the adapter it records is
    imported only when it is built in (``reference``: its options are data),
    or when the user says so, by naming it (``--adapter``) or by
    ``--trust-adapter`` after seeing what it is. An installed adapter's name
    (``temporal``, a third party's) counts as named by the folder, not by the
    user: its options may name code (``app=package.module:APP``)."""
    if ns.adapter is not None:
        return ns.adapter, parse_opts(ns.adapter_opt)
    spec, opts = stored.adapter.spec, dict(stored.adapter.options)
    if spec in BUILTIN:
        return spec, opts
    shown = " ".join(
        ["--adapter", shlex.quote(spec)]
        + [f"--adapter-opt {shlex.quote(f'{k}={v}')}" for k, v in sorted(opts.items())]
    )
    if not getattr(ns, "trust_adapter", False):
        # An installed name is code the user installed, but what the folder
        # asks of it is not theirs: a framework adapter imports the
        # application its options name (app=package.module:APP), and a third
        # party's options mean what its adapter makes of them.
        why = (
            "an installed adapter that is not built in: its options may name code to import"
            if ":" not in spec
            else "which is not built in"
        )
        raise UsageError(
            f"{folder / 'report.json'} records adapter {spec!r}, {why}, and "
            "replay does not import code a report folder names; if you trust it, say so: "
            f"harness replay {shlex.quote(str(folder))} {shown} (or --trust-adapter)"
        )
    _line(out, f"harness: importing the recorded adapter ({shown}), as --trust-adapter allows")
    return spec, opts
