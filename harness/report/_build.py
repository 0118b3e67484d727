"""Building a :class:`Report` from the engine's :class:`Outcome` (the one place)."""

from __future__ import annotations

import shlex
from pathlib import Path

from .._engine import Example, Outcome
from ..adapters._contract import Adapter, Capability
from ..model import PropertyResult, Verdict
from ._schema import (
    AdapterInfo,
    Counterexample,
    FaultCoverage,
    NotTested,
    OtherFailure,
    PropertyReport,
    Report,
)

#: What each capability would let the harness test; reported when it is missing.
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


def not_tested(adapter: Adapter) -> list[dict[str, str]]:
    """The capabilities ``adapter`` lacks, each with what it leaves untested."""
    return [
        {"capability": cap.value, "what": what}
        for cap, what in CAPABILITY_GAPS.items()
        if cap not in adapter.capabilities
    ]


def replay_command(report_dir: Path) -> str:
    """The shell command that replays the run kept in ``report_dir``."""
    return f"harness replay {shlex.quote(str(report_dir))}"


def build_report(
    outcome: Outcome, adapter: Adapter, spec: str, opts: dict[str, str], report_dir: Path
) -> Report:
    """The report of ``outcome``: what ``harness run`` writes as ``report.json``.

    ``spec`` and ``opts`` are the adapter as the user named it (replay loads
    it again from them); ``report_dir`` is where the run is kept (it appears
    in the replay command). Other failures are expected under
    ``report_dir/failures/N`` in the order :func:`other_failures` gives.
    """
    failure = outcome.failure
    faults = {
        kind: _coverage(outcome, kind, outcome.faults_armed[kind], outcome.faults_fired[kind])
        for kind in sorted(set(outcome.faults_armed) | set(outcome.faults_fired))
    }
    sites = sorted(set(outcome.crash_points) | set(outcome.sites_armed))
    crash_points = {
        site: _coverage(
            outcome,
            f"crash_point:{site}",
            outcome.sites_armed[site],
            outcome.sites_fired[site],
        )
        for site in sites
    }
    properties = []
    for name, verdict in sorted(outcome.verdicts.items()):
        r = _result(outcome, name)
        properties.append(
            PropertyReport(
                name=name,
                verdict=verdict.value,
                message=r.message,
                witness=list(r.witness),
                counts=dict(r.counts),
            )
        )
    return Report(
        verdict=outcome.verdict.value,
        seed=outcome.seed,
        profile=outcome.settings.profile,
        adapter=AdapterInfo(
            spec=spec,
            options=dict(opts),
            name=adapter.name,
            description=dict(outcome.adapter_options),
            capabilities=list(outcome.capabilities),
        ),
        duration_seconds=round(outcome.seconds, 3),
        slowest_seconds=round(outcome.slowest, 3),
        scenarios=outcome.examples,
        properties=properties,
        other_failures=[
            OtherFailure(
                failed_properties=props, steps=ex.scenario.describe(), folder=f"failures/{n}"
            )
            for n, (props, ex) in enumerate(other_failures(outcome), 1)
        ],
        faults=faults,
        crash_points=crash_points,
        absorbed_duplicates=outcome.counts.get("exactly_once_effects.absorbed_duplicates", 0),
        not_tested=[NotTested(**gap) for gap in not_tested(adapter)],
        counterexample=None
        if failure is None
        else Counterexample(
            steps=failure.scenario.describe(),
            failed_properties=[r.name for r in failure.results if r.verdict is Verdict.FAIL],
            replay=replay_command(report_dir),
        ),
    )


def _coverage(outcome: Outcome, key: str, armed: int, fired: int) -> FaultCoverage:
    scenarios = outcome.fired_in[key]
    failed = outcome.failed_after[key]
    return FaultCoverage(
        armed=armed,
        fired=fired,
        scenarios=scenarios,
        survived=scenarios - failed,
        failed_after=failed,
    )


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
