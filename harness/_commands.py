"""What ``harness run`` and ``harness replay`` do, apart from parsing."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from ._engine import Engine, Example, Outcome
from ._errors import UsageError
from ._probe import check_declarations
from ._profile import profile_workflow
from ._settings import load_settings
from .adapters._contract import Adapter, offered_storage_kinds
from .adapters._loading import load_adapter, parse_opts
from .model import Verdict
from .report import (
    Report,
    build_report,
    load_report,
    load_run_folder,
    not_tested,
    other_failures,
    replay_command,
    write_reports,
)


def probe_universe(adapter: Adapter, settings: Any) -> Any:
    """What the adapter offers, read from one throwaway environment."""
    from scenarios import FAMILIES, Universe

    with tempfile.TemporaryDirectory(prefix="harness-probe-") as tmp:
        env = adapter.open(Path(tmp), seed=0)
        try:
            crash_points = tuple(env.crash_points())
            pause_points = tuple(env.pause_points())
            storage_kinds = offered_storage_kinds(env, frozenset(adapter.capabilities))
        finally:
            env.close()
    # The sites right before effects serve only the targeted schedules.
    aim = settings.targeted and settings.mode == "search"
    profiles = {wf.name: profile_workflow(adapter, wf, effects=aim) for wf in adapter.workflows()}
    return Universe(
        site_hits={k: p.hits for k, p in profiles.items() if p.hits},
        profiles={k: p for k, p in profiles.items() if p.hits},
        workflows=tuple(adapter.workflows()),
        crash_points=crash_points,
        pause_points=pause_points,
        capabilities=frozenset(adapter.capabilities),
        lease_seconds=float(getattr(adapter, "lease_seconds", 30.0)),
        families=settings.families or FAMILIES,
        max_runs=settings.max_runs,
        max_episodes=settings.max_episodes,
        storage_kinds=storage_kinds,
    )


def _keep_example(example: Example | None, report_dir: Path) -> None:
    if example is None:
        return
    report_dir.mkdir(parents=True, exist_ok=True)
    for name in ("history.jsonl", "oracle.jsonl", "scenario.json"):
        src = example.folder / name
        if src.exists():
            shutil.copyfile(src, report_dir / name)
    (report_dir / "results.json").write_text(
        json.dumps([r.model_dump(mode="json") for r in example.results], indent=2)
    )


def _line(out: TextIO, text: str) -> None:
    print(text, file=out, flush=True)


def run(ns: argparse.Namespace, out: TextIO) -> int:
    opts = parse_opts(ns.adapter_opt)
    settings = load_settings(
        ns.profile,
        seed=ns.seed,
        budget_seconds=ns.budget,
        max_examples=ns.max_examples,
        report_dir=ns.report_dir,
        mode=getattr(ns, "mode", None),
        targeted=getattr(ns, "targeted", None),
        stop_on_first=getattr(ns, "stop_on_first", None),
    )
    if settings.mode == "random-kill" and ns.exhaustive:
        raise UsageError("--mode random-kill and --exhaustive exclude each other; pick one")
    adapter = load_adapter(ns.adapter, opts)
    report_dir = Path(settings.report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    universe = probe_universe(adapter, settings)
    gaps = not_tested(adapter)
    _line(
        out,
        f"harness: adapter {adapter.name} {adapter.describe()}, profile {settings.profile}, "
        f"{len(universe.crash_points)} crash points, families {', '.join(universe.enabled())}",
    )
    for gap in gaps:
        _line(out, f"harness: not tested ({gap['capability']} missing): {gap['what']}")

    progress = _Progress(out, settings.max_examples if not ns.exhaustive else None)
    engine = Engine(adapter, settings, progress=progress.update)
    _line(out, f"harness: seed {engine.seed} (repeat this run with --seed {engine.seed})")
    try:
        check_declarations(adapter, engine.oracle)
        with progress:
            if ns.exhaustive:
                outcome = _exhaustive(engine, adapter, universe, ns.exhaustive, settings)
            elif settings.mode == "random-kill":
                from ._random_kill import run_random_kill

                outcome = run_random_kill(engine, universe)
            else:
                outcome = engine.run(universe)
        kept = outcome.failure or engine.last_example
        _keep_example(kept, report_dir)
        shutil.rmtree(report_dir / "failures", ignore_errors=True)
        for n, (_, ex) in enumerate(other_failures(outcome), 1):
            _keep_example(ex, report_dir / "failures" / str(n))
        report = build_report(outcome, adapter, ns.adapter, opts, report_dir)
        write_reports(report, report_dir)
    finally:
        engine.close()
    _summary(out, report, report_dir)
    _step_summary(report_dir)
    return exit_code(report.verdict)


def exit_code(verdict: str) -> int:
    """0: every property the adapter allows was exercised and held; 1: a
    property failed; 3: inconclusive (the report says why)."""
    return {Verdict.FAIL.value: 1, Verdict.UNKNOWN.value: 3}.get(verdict, 0)


class _Progress:
    """Progress of a run. On a terminal, a rich progress bar (scenarios run,
    faults fired, properties failing so far); otherwise quiet, line-oriented
    output for CI logs: every 25 scenarios, and at once when a property starts
    failing."""

    def __init__(self, out: TextIO, total: int | None) -> None:
        self.out = out
        self.total = total
        self.failing: list[str] = []
        self.bar: Any = None
        self.task: Any = None
        if _isatty(out):
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(
                TextColumn("harness: scenarios"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[faults]} faults fired"),
                TextColumn("[red]{task.fields[failing]}"),
                console=Console(file=out),
                transient=True,
            )
            self.task = self.bar.add_task("run", total=total, faults=0, failing="")

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def update(self, o: Outcome) -> None:
        """Show ``o`` after one more scenario."""
        failing = sorted(n for n, t in o.tallies.items() if t.failed)
        fired = sum(o.faults_fired.values())
        if self.bar is not None:
            # Shrinking runs past max_examples: let the bar grow rather than overflow.
            total = None if self.total is None else max(self.total, o.examples)
            self.bar.update(
                self.task,
                completed=o.examples,
                total=total,
                faults=fired,
                failing=("failing: " + ", ".join(failing)) if failing else "",
            )
            return
        if o.examples % 25 and o.examples != 1 and failing == self.failing:
            return
        self.failing = failing
        _line(
            self.out,
            f"harness: scenario {o.examples} (slowest {o.slowest:.1f} s): {fired} faults fired"
            f"{'; failing: ' + ', '.join(failing) if failing else ''}",
        )


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


def _exhaustive(
    engine: Engine, adapter: Adapter, universe: Any, workflow: str, settings: Any
) -> Outcome:
    from scenarios import exhaustive

    from .model import RunSpec

    spec = next((w for w in adapter.workflows() if w.name == workflow), None)
    if spec is None:
        names = ", ".join(w.name for w in adapter.workflows())
        raise UsageError(f"--exhaustive {workflow!r}: the adapter has no such workflow ({names})")
    if not universe.crash_points:
        raise UsageError(
            f"--exhaustive needs crash points, and adapter {adapter.name!r} declares none "
            "(capability crash_points); run without --exhaustive to sample effect-boundary kills"
        )
    run_spec = RunSpec(run_id="r1", tenant="acme", workflow=workflow, input=dict(spec.inputs[0]))
    outcome = engine.new_outcome(universe)
    # Only kills at crash points: the other families are off for this run
    # (their properties read not_tested, which is not inconclusive).
    outcome.families = ["crash"]
    started = time.monotonic()
    sites = list(universe.crash_points)
    nth = 1
    while sites and nth <= 8:
        still_firing = set()
        for scenario in exhaustive(run_spec, sites, nth):
            example = engine.execute(scenario)
            engine.account(outcome, example)
            site = scenario.steps[1].crash or scenario.steps[3].crash  # type: ignore[union-attr]
            if example.coverage.fired.get("crash_point") and site is not None:
                still_firing.add(site.site)
            if example.failed:
                for r in example.results:
                    best = outcome.counterexamples.get(r.name)
                    if r.verdict is Verdict.FAIL and (best is None or example.size < best.size):
                        outcome.counterexamples[r.name] = example
            else:
                engine.keep_last(example)
        sites = sorted(still_firing)
        nth += 1
    outcome.failures = list({id(e): e for e in outcome.counterexamples.values()}.values())
    outcome.failure = outcome.failures[0] if outcome.failures else None
    outcome.seconds = time.monotonic() - started
    return outcome


def _summary(out: TextIO, report: Report, report_dir: Path) -> None:
    _line(
        out,
        f"harness: {report.scenarios} scenarios in {report.duration_seconds:.1f} s; "
        f"verdict: {report.verdict.upper()}",
    )
    if report.planned_scenarios is not None and report.searched_scenarios is not None:
        _line(
            out,
            f"  ran {report.searched_scenarios} of {report.planned_scenarios} planned "
            "scenarios (the rest were shrinking)"
            if report.scenarios > report.searched_scenarios
            else f"  ran {report.searched_scenarios} of {report.planned_scenarios} planned "
            "scenarios",
        )
    for p in report.properties:
        why = f" ({p.reason})" if p.reason and p.verdict != "fail" else ""
        seen = f", exercised in {p.exercised} of {p.scenarios}" if p.verdict == "pass" else ""
        _line(out, f"  {p.verdict:10} {p.name}{seen}{why}")
    fired = {k: v.fired for k, v in report.faults.items()}
    _line(out, "  faults fired: " + (", ".join(f"{k}={v}" for k, v in fired.items()) or "none"))
    for reason in report.inconclusive:
        _line(out, f"inconclusive: {reason}")
    ce = report.counterexample
    if ce is not None:
        serves = ", ".join(ce.counterexample_for or ce.failed_properties)
        _line(out, f"minimal counterexample for {serves}:")
        for i, step in enumerate(ce.steps, 1):
            _line(out, f"  {i}. {step}")
        _line(out, f"replay: {ce.replay}")
    for n, other in enumerate(report.other_failures, 1):
        serves = ", ".join(other.counterexample_for or other.failed_properties)
        _line(
            out,
            f"minimal counterexample for {serves}, "
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
    stored = load_report(folder)
    write_reports(stored, folder)
    _step_summary(folder)
    _line(out, f"harness: re-rendered {folder} (verdict: {stored.verdict.upper()})")
    for name in ("report.json", "report.html", "junit.xml", "summary.md"):
        _line(out, f"  {folder / name}")
    return exit_code(stored.verdict)


def replay(folder: Path, out: TextIO) -> int:
    """``harness replay DIR``: run the kept scenario again against the same
    adapter variant; exit 1 if a property fails again."""
    stored, scenario = load_run_folder(folder)
    adapter = load_adapter(stored.adapter.spec, stored.adapter.options)
    settings = load_settings(stored.profile)
    engine = Engine(adapter, settings)
    try:
        example = engine.execute(scenario)
    finally:
        engine.close()
    _line(out, f"replaying {len(scenario.steps)} steps against {adapter.name}:")
    for i, step in enumerate(scenario.describe(), 1):
        _line(out, f"  {i}. {step}")
    failed = [r for r in example.results if r.verdict is Verdict.FAIL]
    for r in example.results:
        _line(out, f"  {r.verdict.value:7} {r.name}: {r.message}")
    if failed:
        _line(out, f"reproduced: {', '.join(r.name for r in failed)} failed")
        _line(out, "minimal counterexample:")
        for i, step in enumerate(scenario.describe(), 1):
            _line(out, f"  {i}. {step}")
        _line(out, f"replay: {replay_command(folder)}")
        return 1
    _line(out, "not reproduced: every property held this time")
    sys.stdout.flush()
    return 0
