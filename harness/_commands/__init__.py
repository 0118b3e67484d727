"""What ``harness run`` and ``harness replay`` do, apart from parsing."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from . import _api as api
from ._errors import UsageError
from ._properties import adapter_properties, resolve_properties, specs_of
from ._settings import flag_values, load_settings
from .adapters._guard import close_adapter, guard, setup_adapter
from .adapters._loading import BUILTIN, load_adapter, parse_opts
from .adapters._specs import pythonpath_for, with_pythonpath
from .model import PropertyResult, Verdict
from .nemesis import resolve_worker_timeout, worker_timeout_limit
from .outcome import Outcome
from .outcome._replayed import replay_labels
from .procs._child import IMPORT_LOG_ENV
from .report import (
    Report,
    load_report,
    load_run_folder,
    merge_reports,
    replay_command,
    write_reports,
)
from .report._store import load_results
from .scenarios import load_scenario_file
from .session import Engine
from .session._probe import judge_probe


def _line(out: TextIO, text: str) -> None:
    print(text, file=out, flush=True)


def run(ns: argparse.Namespace, out: TextIO) -> int:
    """``harness run``: the front door (:func:`harness.run`) with progress on
    ``out``, then the summary; the exit code of the verdict."""
    progress = _Progress(out)
    with progress:
        report = api.run(
            ns.adapter,
            options=parse_opts(ns.adapter_opt),
            exhaustive=ns.exhaustive,
            scenarios=ns.scenarios,
            properties=getattr(ns, "properties", None) or (),
            log=progress.log,
            progress=progress.update,
            # every setting's flag, by its field's name (None: not given)
            **flag_values(ns),
        )
    report_dir = report.folder or Path(".")
    # The progress lines count from the command's start: the summary says
    # that time too, beside the search's own (the two disagreed, unexplained).
    wall = max(progress.clock() - progress.started, 0.0)
    _summary(out, report, report_dir, wall=wall)
    _step_summary(report_dir)
    return exit_code(report.verdict)


def exit_code(verdict: str) -> int:
    """0: every property the adapter allows was exercised and held; 1: a
    property failed; 3: inconclusive (the report says why)."""
    return {Verdict.FAIL.value: 1, Verdict.UNKNOWN.value: 3}.get(verdict, 0)


class _Progress:
    """Progress of a run. On a terminal, a rich progress bar (scenarios run of
    planned, the time left at this pace, faults fired, properties failing so
    far); otherwise quiet, line-oriented output for CI logs: every 25
    scenarios, and at once when a property starts failing, each line with the
    time elapsed and left."""

    def __init__(self, out: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.clock = clock
        self.started = clock()
        #: when the first scenario was shown, and how many had run: the pace
        #: is measured from there (before it, loading the adapter and the
        #: fault-free probe took their time: a first ETA of 25 min for a
        #: 2 min run)
        self.first: tuple[float, int] | None = None
        self.failing: list[str] = []
        self.bar: Any = None
        self.task: Any = None
        if _isatty(out):
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("harness"),
                BarColumn(bar_width=10),
                MofNCompleteColumn(),
                # the time left at this pace (mm:ss), within the plan
                TimeRemainingColumn(compact=True),
                TextColumn("{task.fields[faults]} fired"),
                TextColumn("[red]{task.fields[failing]}"),
                console=Console(file=out),
                transient=True,
            )
            self.task = self.bar.add_task("run", total=None, faults="0 faults", failing="")

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def log(self, text: str) -> None:
        """One notice line of the run (above the bar, on a terminal)."""
        if self.bar is not None:
            self.bar.console.print(text, markup=False, highlight=False)
        else:
            _line(self.out, text)

    def update(self, o: Outcome) -> None:
        """Show ``o`` after one more scenario."""
        failing = sorted(n for n, t in o.tallies.items() if t.failed)
        fired = sum(o.faults_fired.values())
        if self.bar is not None:
            # Shrinking runs past the plan: let the bar grow rather than overflow.
            total = None if o.planned is None else max(o.planned, o.examples)
            self.bar.update(
                self.task,
                completed=o.examples,
                total=total,
                faults=_count(fired, "fault"),
                failing=("failing: " + ", ".join(failing)) if failing else "",
            )
            return
        if o.examples % 25 and o.examples != 1 and failing == self.failing:
            return
        self.failing = failing
        of = f" of {o.planned}" if o.planned and o.examples <= o.planned else ""
        _line(
            self.out,
            f"harness: scenario {o.examples}{of} ({self._times(o)}slowest {o.slowest:.1f} s): "
            f"{_count(fired, 'fault')} fired"
            + (f"; failing: {', '.join(failing)}" if failing else ""),
        )

    def _times(self, o: Outcome) -> str:
        """Elapsed time and, within the plan, the time left at this pace (a
        plan that a failure cuts short, or shrinking, changes it)."""
        now = self.clock()
        elapsed = max(now - self.started, 0.0)
        text = f"{_duration(elapsed)} elapsed"
        if self.first is None:
            self.first = (now, o.examples)
        since, then = self.first
        if o.planned and then < o.examples < o.planned:
            left = max(now - since, 0.0) / (o.examples - then) * (o.planned - o.examples)
            text += f", about {_duration(left)} left"
        return text + "; "


def _count(n: int, noun: str) -> str:
    """``1 fault``, ``2 faults``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min 5 s``, ``1 h 2 min``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def _isatty(out: TextIO) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


def _step_summary(report_dir: Path) -> None:
    """Append summary.md to $GITHUB_STEP_SUMMARY when it is set (GitHub Actions)."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    with open(target, "a", encoding="utf-8") as f:
        f.write((report_dir / "summary.md").read_text(encoding="utf-8"))


def _minimal(fully_shrunk: bool) -> str:
    if fully_shrunk:
        return "minimal counterexample"
    return "counterexample (not fully shrunk: shrinking stopped at --shrink-budget)"


def _summary(out: TextIO, report: Report, report_dir: Path, *, wall: float | None = None) -> None:
    """The run's summary on ``out``; ``wall``: the seconds since the command
    started (loading the adapter and probing it before the search), when
    known."""
    whole = (
        f" ({_duration(wall)} since harness started)"
        if wall is not None and wall >= report.duration_seconds + 1
        else ""
    )
    _line(
        out,
        f"harness: {_count(report.scenarios, 'scenario')} in "
        f"{report.duration_seconds:.1f} s{whole}; verdict: {report.verdict.upper()}",
    )
    plan = report.plan_line()
    if plan is not None:
        _line(out, f"  {plan}")
    if report.shard is not None:
        whole = f" of a {report.shard.plan}-scenario plan" if report.shard.plan is not None else ""
        _line(
            out,
            f"  shard {report.shard.k} of {report.shard.n}{whole}: merge the shards' report "
            "folders with harness merge DIR... --report-dir OUT",
        )
    for p in report.properties:
        why = f" ({p.reason})" if p.reason and p.verdict != "fail" else ""
        seen = f", exercised in {p.exercised} of {p.scenarios}" if p.verdict == "pass" else ""
        mine = " (your invariant)" if p.user else ""
        _line(out, f"  {p.verdict:10} {p.name}{mine}{seen}{why}")
    fired = {k: v.fired for k, v in report.faults.items()}
    _line(out, "  faults fired: " + (", ".join(f"{k}={v}" for k, v in fired.items()) or "none"))
    # never armed there, with why: the runtime left the fault nothing to aim
    # at (said even where the kind was armed or fired elsewhere)
    moot = [
        f"{k} ({'; '.join(c.not_tested())})"
        for k, c in sorted(report.faults.items())
        if c.not_tested()
    ]
    if moot:
        _line(out, "  not tested: " + ", ".join(moot))
    excused = report.excused_line()
    if excused is not None:
        _line(out, f"  {excused}")
    model = report.model_line()
    if model is not None:
        _line(out, f"  {model}")
    for i, text in enumerate(report.commit_fault_lines()):
        _line(out, f"  {'  ' if i else ''}{text}")
    for reason in report.inconclusive:
        _line(out, f"inconclusive: {reason}")
    ce = report.counterexample
    if ce is not None:
        serves = ", ".join(ce.counterexample_for or ce.failed_properties)
        _line(out, f"{_minimal(ce.fully_shrunk)} for {serves}:")
        for i, step in enumerate(ce.steps, 1):
            _line(out, f"  {i}. {step}")
        _line(out, f"replay: {ce.replay}")
    for n, other in enumerate(report.other_failures, 1):
        serves = ", ".join(other.counterexample_for or other.failed_properties)
        _line(
            out,
            f"{_minimal(other.fully_shrunk)} for {serves}, "
            f"kept in {report_dir / (other.folder or f'failures/{n}')}:",
        )
        for i, step in enumerate(other.steps, 1):
            _line(out, f"  {i}. {step}")
        if other.replay:
            _line(out, f"replay: {other.replay}")
    _line(out, f"report: {report_dir / 'report.json'} (and report.html, junit.xml, summary.md)")


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
        from ._exampledb import open_example_db

        # Before anything is written: an example database that cannot be
        # used is refused (exit 2) with no merged folder to hide the verdict.
        opened = open_example_db(ns.example_db)
    merged = merge_reports(list(ns.dirs), ns.report_dir, partial=ns.partial, chosen=False)
    info = merged.merged
    assert info is not None
    if opened is not None:
        from ._exampledb import ExampleDb

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


def check_adapter(ns: argparse.Namespace, out: TextIO) -> int:
    """``harness check-adapter SPEC``: load the adapter as ``harness run``
    does, probe each workflow without faults, and say in plain words what is
    right and wrong with it; 0 when all is well, 2 naming the cause."""
    from .report import not_tested
    from .session._check import check_workflows

    opts = parse_opts(ns.adapter_opt)
    preload_out: Path | None = getattr(ns, "preload_out", None)
    if preload_out is not None and (preload_out.exists() or preload_out.is_symlink()):
        raise UsageError(
            f"--preload-out {preload_out}: the file exists, and check-adapter writes only a new "
            "file: remove it or name another"
        )
    adapter = guard(load_adapter(ns.spec, opts))
    caps = sorted(c.value for c in adapter.capabilities)
    # Workers forked from now on log what they import after the fork.
    imports = Path(tempfile.mkdtemp(prefix="harness-imports-")) / "imports.jsonl"
    os.environ[IMPORT_LOG_ENV] = str(imports)
    _line(out, f"harness: checking adapter {adapter.name} {adapter.describe()} ({ns.spec})")
    _line(out, f"  capabilities: {', '.join(caps) or 'none declared'}")
    engine = Engine(adapter, load_settings(ns.profile))
    try:
        setup_adapter(adapter, log=lambda line: _line(out, line))
        limit = resolve_worker_timeout(engine.settings.worker_timeout, adapter)
        with worker_timeout_limit(limit):
            checks = check_workflows(adapter, engine)
    except BaseException as exc:
        engine.close()
        close_adapter(adapter, failing=exc)
        shutil.rmtree(imports.parent, ignore_errors=True)
        raise
    finally:
        os.environ.pop(IMPORT_LOG_ENV, None)
    engine.close()
    close_adapter(adapter)
    for check in checks:
        _render_check(out, check)
    _report_imports(out, imports, preload_out)
    aims = [c.memory_aims for c in checks if c.memory_aims is not None]
    # memory_injection declared, but no workflow gives it a place to aim:
    # a run would leave the family out and say so; say it here first
    ran = None if not aims or any(aims) else ()
    gaps = not_tested(adapter, ran=ran)
    if gaps:
        _line(out, "left untested (what the adapter does not declare or give a place to aim):")
        for gap in gaps:
            _line(out, f"  {gap['capability']:19} {gap['what']}")
    bad = [c for c in checks if not c.ok]
    if not bad:
        _line(
            out,
            f"harness: adapter {adapter.name} is ready: {len(checks)} workflow(s) ran without "
            f"faults as declared{_warned(checks)} (next: "
            + with_pythonpath(
                shlex.join(["harness", "run", "--adapter", ns.spec, *_opt_words(ns.adapter_opt)])
                + " --profile ci",
                pythonpath_for(ns.spec, opts),
            )
            + ")",
        )
        return 0
    causes = "; ".join(f"workflow {c.workflow!r}: {', '.join(c.causes)}" for c in bad)
    verdict = f"harness: adapter check failed ({causes})"
    _line(out, verdict)
    if not _same_sink(out, sys.stderr):  # a CI log of stderr alone shows it too
        print(verdict, file=sys.stderr)
    return 2


def _report_imports(out: TextIO, log: Path, preload_out: Path | None) -> None:
    """Say what the workers imported after the fork (each worker pays for
    it: a framework that imports itself lazily defeats the fork server's
    preload), and write the list where ``--preload-out`` asks."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    finally:
        shutil.rmtree(log.parent, ignore_errors=True)
    workers = [json.loads(line) for line in lines if line.strip()]
    if not workers:
        return
    counts = sorted(len(w["modules"]) for w in workers)
    cpu = sorted(float(w["cpu"]) for w in workers)
    seen: dict[str, int] = {}
    for w in workers:
        for name in w["modules"]:
            seen[name] = seen.get(name, 0) + 1
    modules = sorted(seen)
    median = counts[len(counts) // 2]
    _line(
        out,
        f"  imports: {len(workers)} worker(s) imported a median of {median} modules after the "
        f"fork ({len(modules)} in all; a worker's median CPU {cpu[len(cpu) // 2] * 1000:.0f} ms)"
        + (
            ": a preload list saves each worker that (--preload-out FILE writes it; "
            "then WorkerSet(workdir, [..., '@FILE']))"
            if median >= PRELOAD_HINT
            else ""
        ),
    )
    if preload_out is not None:
        with preload_out.open("x", encoding="utf-8") as fh:
            json.dump(modules, fh, indent=0)
            fh.write("\n")
        _line(out, f"  preload list: {len(modules)} modules written to {preload_out}")


#: modules a worker imports after the fork past which check-adapter suggests a preload list
PRELOAD_HINT = 20


def _same_sink(a: TextIO, b: TextIO) -> bool:
    """Whether two streams end up in one place (a terminal both write to,
    one file or pipe after ``2>&1``): a line written to both shows twice."""
    try:
        fa, fb = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (OSError, ValueError, AttributeError):  # io.StringIO and the like
        return False
    if a.isatty() and b.isatty():
        return True
    return (fa.st_dev, fa.st_ino) == (fb.st_dev, fb.st_ino)


def _warned(checks: list[Any]) -> str:
    n = sum(len(c.warnings) for c in checks)
    return f", with {n} warning{'s' if n != 1 else ''} above to read first" if n else ""


def _memory_line(check: Any) -> str:
    where = ", ".join(check.memory_aims)
    if check.memory_aimed_by == "declared":
        return f"planted at {where} (declared in memory_targets)"
    if check.memory_aimed_by == "read":
        return f"planted at {where} (a new key in each namespace the fault-free run read)"
    return (
        "nowhere to plant: no memory_targets declared and the fault-free run's contexts "
        "list no memory record (declare where the runs read in WorkflowSpec.memory_targets)"
    )


def _opt_words(pairs: list[str]) -> list[str]:
    return [w for pair in pairs for w in ("--adapter-opt", pair)]


def _render_check(out: TextIO, check: Any) -> None:
    """One workflow's block of ``harness check-adapter``."""
    status = "ok" if check.ok else f"PROBLEM: {', '.join(check.causes)}"
    _line(out, f"workflow {check.workflow}: {status}")
    declared = ", ".join(check.declared) or "none"
    # in the order declared, then the rest
    order = [k for k in check.declared if k in check.performed]
    performed = ", ".join(order + [k for k in check.performed if k not in order]) or "none"
    same = " (as declared)" if set(check.declared) == set(check.performed) else ""
    if check.ran:
        _line(out, f"  effects: declared {declared}; performed {performed}{same}")
    else:
        _line(out, f"  effects: declared {declared}; not run (the adapter raised first)")
    for run in check.runs:
        ended = run.state or "no state reported"
        raw = f" (raw status {run.raw_status!r})" if run.raw_status is not None else ""
        how = "" if run.settled else ": neither terminal nor a legitimate wait"
        err = f"; {run.error}" if run.error else ""
        _line(out, f"  run {run.run_id} {run.input}: ended {ended}{raw}{how}{err}")
    if check.transitions is not None:
        _line(out, f"  transitions: {check.transitions.verdict.value}: {check.transitions.message}")
    crashed = f", {len(check.crashes)} crashed" if check.crashes else ", none crashed"
    if check.workers:
        _line(out, f"  workers: {check.workers} started{crashed}")
    for crash in check.crashes[:3]:
        _line(out, f"    worker {crash.worker_id} {crash.exit}")
    if check.crash_points is not None:
        sites = len(check.crash_points)
        hits = sum(check.crash_points.values())
        _line(
            out,
            f"  crash points: {sites} passed ({hits} hits) on the fault-free path"
            if sites
            else "  crash points: none passed on the fault-free path (crash_point_trace() "
            "gives nothing: no targeted schedule can be aimed)",
        )
    if check.memory_aims is not None:
        _line(out, "  memory: " + _memory_line(check))
    for cause in check.causes:
        for problem in check.problems[cause]:
            _line(out, f"  {cause}: {problem}")
    for warning in check.warnings:
        _line(out, f"  warning: {warning}")
    for text in check.log_tail:
        _line(out, f"    | {text}")
