"""What ``harness run`` and ``harness replay`` do, apart from parsing."""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from ._engine import Engine, Example, Outcome
from ._errors import RunFolderError, UsageError
from ._settings import load_settings
from .adapters._contract import Adapter, Capability, offered_storage_kinds
from .adapters._loading import load_adapter, parse_opts
from .model import SCHEMA_VERSION, PropertyResult, Scenario, Verdict

REPORT_SCHEMA_VERSION = 1

#: What each capability would let the harness test; printed when it is missing.
CAPABILITY_GAPS = {
    Capability.CRASH_POINTS: "kills at named crash points (only effect boundaries are tested)",
    Capability.CLOCK: "lease expiry, zombies, approval expiry and timers",
    Capability.APPROVALS: "approval integrity under duplicated, forged and late decisions",
    Capability.MEMORY_INJECTION: "stale, cross-tenant and poisoned memory",
    Capability.VERSION_SWITCH: "schema migration between crash and resume",
    Capability.CONTEXT: "context rebuild after resume",
    Capability.STORAGE_FAULTS: "storage connection faults",
    Capability.CONCURRENT_WORKERS: "racing and zombie workers",
}


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
    return Universe(
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


def not_tested(adapter: Adapter) -> list[dict[str, str]]:
    return [
        {"capability": cap.value, "what": what}
        for cap, what in CAPABILITY_GAPS.items()
        if cap not in adapter.capabilities
    ]


def report_dict(
    outcome: Outcome, adapter: Adapter, spec: str, opts: dict[str, str], report_dir: Path
) -> dict[str, Any]:
    failure = outcome.failure
    replay = f"harness replay {shlex.quote(str(report_dir))}"
    faults = {
        kind: {"armed": outcome.faults_armed[kind], "fired": outcome.faults_fired.get(kind, 0)}
        for kind in sorted(outcome.faults_armed)
    }
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "verdict": outcome.verdict.value,
        "seed": outcome.seed,
        "profile": outcome.settings.profile,
        "adapter": {
            "spec": spec,
            "options": opts,
            "name": adapter.name,
            "description": outcome.adapter_options,
            "capabilities": outcome.capabilities,
        },
        "duration_seconds": round(outcome.seconds, 3),
        "scenarios": outcome.examples,
        "properties": [
            {
                "name": name,
                "verdict": verdict.value,
                "message": _result(outcome, name).message,
                "witness": list(_result(outcome, name).witness),
                "counts": dict(_result(outcome, name).counts),
            }
            for name, verdict in sorted(outcome.verdicts.items())
        ],
        "other_failures": [
            {"failed_properties": props, "steps": ex.scenario.describe()}
            for props, ex in other_failures(outcome)
        ],
        "faults": faults,
        "absorbed_duplicates": outcome.counts.get("exactly_once_effects.absorbed_duplicates", 0),
        "not_tested": not_tested(adapter),
        "counterexample": None
        if failure is None
        else {
            "steps": failure.scenario.describe(),
            "failed_properties": [r.name for r in failure.results if r.verdict is Verdict.FAIL],
            "replay": replay,
        },
    }


def _result(outcome: Outcome, name: str) -> PropertyResult:
    """The result to show for a property: the counterexample's when it failed
    there (its witness indexes that history), else the last informative one."""
    if outcome.failure is not None:
        for r in outcome.failure.results:
            if r.name == name and r.verdict is Verdict.FAIL:
                return r
    return outcome.last_results[name]


def other_failures(outcome: Outcome) -> list[tuple[list[str], Example]]:
    """The smallest failing example for each other set of failed properties
    (the counterexample shows one bug; there may be more)."""
    if outcome.failure is None:
        return []
    shown = set(_failed(outcome.failure))
    best: dict[tuple[str, ...], Example] = {}
    for ex in outcome.failures:
        props = tuple(_failed(ex))
        if set(props) <= shown:
            continue
        if props not in best or ex.size < best[props].size:
            best[props] = ex
    return [(list(p), ex) for p, ex in sorted(best.items())]


def _failed(example: Example) -> list[str]:
    return sorted(r.name for r in example.results if r.verdict is Verdict.FAIL)


def _keep_example(example: Example | None, report_dir: Path) -> None:
    if example is None:
        return
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
    )
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

    shown: dict[str, Any] = {"failing": []}

    def progress(o: Outcome) -> None:
        # Line-oriented for CI logs: every 25 scenarios, and at once when a
        # property starts failing.
        failing = sorted(n for n, v in o.verdicts.items() if v is Verdict.FAIL)
        if o.examples % 25 and o.examples != 1 and failing == shown["failing"]:
            return
        shown["failing"] = failing
        _line(
            out,
            f"harness: scenario {o.examples} (slowest {o.slowest:.1f} s): "
            f"{sum(o.faults_fired.values())} faults fired"
            f"{'; failing: ' + ', '.join(failing) if failing else ''}",
        )

    engine = Engine(adapter, settings, progress=progress)
    _line(out, f"harness: seed {engine.seed} (repeat this run with --seed {engine.seed})")
    try:
        if ns.exhaustive:
            outcome = _exhaustive(engine, adapter, universe, ns.exhaustive, settings)
        else:
            outcome = engine.run(universe)
        kept = outcome.failure or engine.last_example
        _keep_example(kept, report_dir)
        shutil.rmtree(report_dir / "failures", ignore_errors=True)
        for n, (_, ex) in enumerate(other_failures(outcome), 1):
            shutil.copytree(
                ex.folder, report_dir / "failures" / str(n), ignore=shutil.ignore_patterns("env")
            )
        report = report_dict(outcome, adapter, ns.adapter, opts, report_dir)
        (report_dir / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True))
    finally:
        engine.close()
    _summary(out, report, report_dir)
    return 1 if outcome.verdict is Verdict.FAIL else 0


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
                outcome.failures.append(example)
                if outcome.failure is None or example.size < outcome.failure.size:
                    outcome.failure = example
            else:
                engine.keep_last(example)
        sites = sorted(still_firing)
        nth += 1
    outcome.seconds = time.monotonic() - started
    return outcome


def _summary(out: TextIO, report: dict[str, Any], report_dir: Path) -> None:
    _line(
        out,
        f"harness: {report['scenarios']} scenarios in {report['duration_seconds']:.1f} s; "
        f"verdict: {report['verdict'].upper()}",
    )
    for p in report["properties"]:
        _line(out, f"  {p['verdict']:7} {p['name']}")
    fired = {k: v["fired"] for k, v in report["faults"].items()}
    _line(out, "  faults fired: " + (", ".join(f"{k}={v}" for k, v in fired.items()) or "none"))
    ce = report["counterexample"]
    if ce is not None:
        _line(out, "minimal counterexample:")
        for i, step in enumerate(ce["steps"], 1):
            _line(out, f"  {i}. {step}")
        _line(out, f"replay: {ce['replay']}")
    for n, other in enumerate(report.get("other_failures", []), 1):
        _line(
            out,
            f"another failure ({', '.join(other['failed_properties'])}), "
            f"kept in {report_dir / 'failures' / str(n)}:",
        )
        for i, step in enumerate(other["steps"], 1):
            _line(out, f"  {i}. {step}")
    _line(out, f"report: {report_dir / 'report.json'}")


def _load_run_folder(folder: Path) -> tuple[dict[str, Any], Scenario]:
    """The report and the scenario of a run folder, checked: RunFolderError
    names what is missing, corrupt or too new, and how to get a good folder."""
    if not folder.is_dir():
        raise RunFolderError(f"{folder} is not a folder; give the --report-dir of a harness run")
    rerun = "run `harness run --report-dir DIR` again to write a fresh one"
    try:
        report = json.loads((folder / "report.json").read_text())
        scenario_text = (folder / "scenario.json").read_text()
    except FileNotFoundError as exc:
        raise RunFolderError(
            f"{folder} is not a complete run folder: {Path(exc.filename).name} is missing; " + rerun
        ) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{folder}/report.json is corrupt ({exc}); {rerun}") from exc
    adapter = report.get("adapter") if isinstance(report, dict) else None
    if not isinstance(adapter, dict) or not isinstance(adapter.get("spec"), str):
        raise RunFolderError(
            f"{folder}/report.json is not a harness report (no adapter.spec); {rerun}"
        )
    # The version is checked before the scenario is parsed: a newer harness's
    # scenario may not parse here, and "upgrade" is the useful answer then.
    version = report.get("schema_version", 0)
    if not isinstance(version, int):
        raise RunFolderError(
            f"{folder}/report.json has schema_version {version!r}, not an integer; {rerun}"
        )
    if version > REPORT_SCHEMA_VERSION:
        raise RunFolderError(
            f"{folder} was written by a newer harness (report schema {version}, this harness "
            f"reads up to {REPORT_SCHEMA_VERSION}); upgrade stateful-agent-harness to replay it"
        )
    try:
        raw = json.loads(scenario_text)
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{folder}/scenario.json is corrupt ({exc}); {rerun}") from exc
    scenario_version = raw.get("schema_version", SCHEMA_VERSION) if isinstance(raw, dict) else 0
    if isinstance(scenario_version, int) and scenario_version > SCHEMA_VERSION:
        raise RunFolderError(
            f"{folder}/scenario.json was written by a newer harness (scenario schema "
            f"{scenario_version}, this harness reads up to {SCHEMA_VERSION}); upgrade "
            "stateful-agent-harness to replay it"
        )
    try:
        scenario = Scenario.model_validate(raw)
    except ValueError as exc:
        raise RunFolderError(
            f"{folder}/scenario.json is not a valid scenario ({exc}); {rerun}"
        ) from exc
    return report, scenario


def replay(folder: Path, out: TextIO) -> int:
    report, scenario = _load_run_folder(folder)
    adapter = load_adapter(report["adapter"]["spec"], report["adapter"].get("options") or {})
    settings = load_settings(report.get("profile"))
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
        return 1
    _line(out, "not reproduced: every property held this time")
    sys.stdout.flush()
    return 0
