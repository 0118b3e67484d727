"""Building a :class:`Report` from the engine's :class:`Outcome` (the one place)."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import _toxiproxy
from ..adapters._contract import Adapter, Capability
from ..adapters._loading import BUILTIN
from ..adapters._netinfo import network_gaps, offered_network_kinds
from ..adapters._specs import pythonpath_for, with_pythonpath
from ..checkers import split_traceback
from ..model import Verdict
from ..outcome import Example, Outcome
from ..outcome._verdicts import PropertyVerdict
from ..vocabulary import NETWORK_KINDS
from ._schema import (
    AdapterInfo,
    CommitFaultPair,
    Counterexample,
    FaultCoverage,
    NotTested,
    OtherFailure,
    PropertyReport,
    Report,
    ShardInfo,
)

#: What each capability would let the harness test; reported when it is missing.
CAPABILITY_GAPS = {cap: cap.gap for cap in Capability}


#: what the migration family leaves out for an adapter that does not
#: promise an older release may meet runs this one touched (``rolls_back``)
ROLLBACK_GAP = (
    "rollback orders of versions (a previous release meeting runs this one touched): "
    "the adapter does not declare rolls_back = True"
)


def not_tested(
    adapter: Adapter, *, asked: Sequence[str] | None = None, ran: Sequence[str] | None = None
) -> list[dict[str, str]]:
    """The capabilities ``adapter`` lacks, each with what it leaves untested;
    and those it declares that this machine cannot exercise, with why (the
    network faults' kernel backend needs iptables and root). Given the
    families a run was ``asked`` for (None: all) and those that ``ran``,
    also those the capabilities allow that found nowhere to aim."""
    gaps = [
        {"capability": cap.value, "what": what}
        for cap, what in CAPABILITY_GAPS.items()
        if cap not in adapter.capabilities
    ]
    if Capability.NETWORK_FAULTS in adapter.capabilities:
        try:
            choice = _toxiproxy.choose()
        except ValueError as exc:  # a bad HARNESS_NETWORK_BACKEND
            choice = _toxiproxy.Choice(None, str(exc))
        reason = None if choice.backend is not None else choice.reason
        if reason is not None:
            what = CAPABILITY_GAPS[Capability.NETWORK_FAULTS]
            gaps.append(
                {"capability": Capability.NETWORK_FAULTS.value, "what": f"{what}: {reason}"}
            )
        if asked is None or "network" in asked:
            gaps += _unreachable_gaps(adapter)
    if (
        Capability.VERSION_SWITCH in adapter.capabilities
        and getattr(adapter, "rolls_back", False) is not True
        and (asked is None or "migration" in asked)
    ):
        gaps.append({"capability": Capability.VERSION_SWITCH.value, "what": ROLLBACK_GAP})
    if ran is not None:
        gaps += _aim_gaps(adapter, asked, ran)
    return gaps


def _unreachable_gaps(adapter: Adapter) -> list[dict[str, str]]:
    """Per store whose connections the kernel backend cannot reach (a Unix
    socket): the network faults on it, not tested, and why; and those that
    are still tested on the others."""
    gaps = network_gaps(adapter)
    if not gaps:
        return []
    offered = offered_network_kinds(adapter, NETWORK_KINDS)
    still = (
        f"; still tested: {', '.join(offered)}"
        if offered
        else "; no network fault is armed in this run"
    )
    return [
        {
            "capability": Capability.NETWORK_FAULTS.value,
            "what": f"lost commit acknowledgements, resets and partitions on {service}: "
            f"{why}{still}",
        }
        for service, why in gaps.items()
    ]


def _aim_gaps(
    adapter: Adapter, asked: Sequence[str] | None, ran: Sequence[str]
) -> list[dict[str, str]]:
    """Families the adapter's capabilities allow, asked for (``asked``; None:
    all), that did not run (``ran``) for want of a place to aim: memory with
    nowhere a run reads (see ``WorkflowSpec.memory_targets``); network faults
    for an adapter without crash points that the backend in use cannot
    reach (``partition_after_apply`` needs its workers routed through
    Toxiproxy)."""
    out = _network_aim_gaps(adapter, asked, ran)
    if (
        Capability.MEMORY_INJECTION in adapter.capabilities
        and (asked is None or "memory" in asked)
        and "memory" not in ran
    ):
        return [
            {
                "capability": Capability.MEMORY_INJECTION.value,
                "what": f"{CAPABILITY_GAPS[Capability.MEMORY_INJECTION]}: no workflow "
                "declares memory_targets and no fault-free run's context listed a memory "
                "record, so no run would read a planted one (declare where the runs read "
                "in WorkflowSpec.memory_targets)",
            }
        ]
    return out


def _network_aim_gaps(
    adapter: Adapter, asked: Sequence[str] | None, ran: Sequence[str]
) -> list[dict[str, str]]:
    caps = adapter.capabilities
    if (
        Capability.NETWORK_FAULTS not in caps
        or Capability.CRASH_POINTS in caps
        or (asked is not None and "network" not in asked)
        or "network" in ran
    ):
        return []
    try:
        choice = _toxiproxy.choose()
    except ValueError:
        return []  # a bad HARNESS_NETWORK_BACKEND: refused where the run starts
    if choice.backend is None:
        return []  # said with the capability's own gap (not_tested)
    routed = getattr(adapter, "routes_workers", False) is True
    if routed and choice.backend == "toxiproxy":
        return []  # aimed wherever a workflow makes an effect
    why = (
        f"the network faults run on {choice.describe()}, and without crash points the only "
        "kind is partition_after_apply, which needs the Toxiproxy backend "
        "(HARNESS_TOXIPROXY_URL or HARNESS_TOXIPROXY_BIN)"
        if routed
        else "the adapter has no crash points and does not route its workers through "
        "Toxiproxy (routes_workers = True and route_worker), so no network fault can be aimed"
    )
    what = CAPABILITY_GAPS[Capability.NETWORK_FAULTS]
    return [{"capability": Capability.NETWORK_FAULTS.value, "what": f"{what}: {why}"}]


def replay_command(
    report_dir: Path,
    spec: str = "reference",
    opts: Mapping[str, str] | None = None,
    *,
    chosen: bool = True,
    properties: Sequence[str] = (),
) -> str:
    """The shell command that replays the run kept in ``report_dir``, with
    ``--property`` for each of the user's invariants (``properties``: their
    specs), so that the replay checks them again. An
    adapter that is not built in is named on the command line: replay never
    imports code a report folder names (anyone may have written the folder);
    with the ``PYTHONPATH`` this process needed to import it, if any.

    ``chosen``: the user named this adapter (``harness run``, ``replay``).
    When not (``harness merge``, ``harness report``: the spec is the
    folder's, data anyone may have written), an adapter that is not built in
    is shown as data, with how to replay it if the user trusts it: a printed
    command names only code the user chose."""
    words = ["harness", "replay", str(report_dir)]
    named = [w for p in properties for w in ("--property", p)]
    if not chosen and (spec not in BUILTIN or properties):
        shown = json.dumps({"adapter": spec, "options": dict(sorted((opts or {}).items()))})
        what = f"adapter {shown}, which is not built in"
        if properties:
            code = json.dumps(list(properties))
            what = f"invariants {code}" if spec in BUILTIN else f"{what}, and invariants {code}"
        return (
            f"this report names {what}: replay it with "
            f"{shlex.join([*words, '--trust-adapter'])} if you trust it"
        )
    if spec in BUILTIN:
        # its recorded options are data: replay takes them
        return with_pythonpath(shlex.join([*words, *named]), _pythonpath(properties))
    words += ["--adapter", spec, *_opt_words(opts), *named]
    return with_pythonpath(shlex.join(words), _pythonpath(properties, spec, opts))


def _pythonpath(
    properties: Sequence[str], spec: str | None = None, opts: Mapping[str, str] | None = None
) -> str | None:
    """The ``PYTHONPATH`` a fresh ``harness`` needs for the adapter
    ``spec`` (with ``opts``) and the invariants' specs, each folder once."""
    roots: list[str] = []
    found = [] if spec is None else [pythonpath_for(spec, opts)]
    found += [pythonpath_for(p if ":" in p else f"{p}:_") for p in properties]
    for got in found:
        for root in (got or "").split(os.pathsep):
            if root and root not in roots:
                roots.append(root)
    return os.pathsep.join(roots) if roots else None


def _opt_words(opts: Mapping[str, str] | None) -> list[str]:
    return [w for k, v in sorted((opts or {}).items()) for w in ("--adapter-opt", f"{k}={v}")]


def build_report(
    outcome: Outcome,
    adapter: Adapter,
    spec: str,
    opts: dict[str, str],
    report_dir: Path,
    *,
    properties: Sequence[str] = (),
) -> Report:
    """The report of ``outcome``: what ``harness run`` writes as ``report.json``.

    ``spec`` and ``opts`` are the adapter as the user named it (replay loads
    it again from them); ``report_dir`` is where the run is kept (it appears
    in the replay command, with ``--property`` for each of ``properties``,
    the specs of the invariants given to the run). Other failures are expected under
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
    judgement = outcome.judgement()
    others = other_failures(outcome)
    folder_of = {id(ex): f"failures/{n}" for n, (_, ex) in enumerate(others, 1)}
    if failure is not None:
        folder_of[id(failure)] = "."
    lines: list[PropertyReport] = []
    for name, pv in judgement.properties.items():
        ce = outcome.counterexamples.get(name)
        witness: list[int] = []
        if ce is not None:
            witness = next(
                (
                    list(r.witness)
                    for r in ce.results
                    if r.name == name and r.verdict is Verdict.FAIL
                ),
                [],
            )
        lines.append(
            property_report(
                name,
                pv,
                witness,
                None if ce is None else folder_of.get(id(ce)),
                outcome.user_properties.get(name),
            )
        )
    return Report(
        verdict=judgement.verdict.value,
        # an invariant's traceback has its own field (its property's)
        inconclusive=[split_traceback(r)[0] for r in judgement.inconclusive],
        interrupted=outcome.interrupted,
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
        planned_scenarios=outcome.planned,
        searched_scenarios=outcome.searched if outcome.planned is not None else None,
        fit_scenarios=outcome.fit,
        not_run=outcome.not_exercised()
        if outcome.budget_cut and outcome.planned is not None
        else None,
        not_run_schedules=list(outcome.not_run_targeted) if outcome.budget_cut else [],
        commit_faults=[CommitFaultPair.model_validate(r) for r in outcome.commit_pair_coverage()],
        excused=outcome.excused(),
        model_usage=dict(sorted(outcome.model_usage.items())),
        scenario_seconds=None
        if outcome.scenario_seconds is None
        else round(outcome.scenario_seconds, 3),
        scenario_cost="declared"
        if outcome.scenario_cost == "declared"
        else "measured"
        if outcome.scenario_cost == "measured"
        else None,
        properties=lines,
        other_failures=[
            OtherFailure(
                failed_properties=_failed(ex),
                counterexample_for=props,
                steps=ex.scenario.describe(),
                folder=f"failures/{n}",
                fully_shrunk=not set(props) & set(outcome.not_fully_shrunk),
                dropped_steps=_dropped(outcome, props),
                replay=replay_command(
                    report_dir / "failures" / str(n), spec, opts, properties=properties
                ),
            )
            for n, (props, ex) in enumerate(others, 1)
        ],
        faults=faults,
        families=list(outcome.families),
        crash_points=crash_points,
        absorbed_duplicates=outcome.counts.get("exactly_once_effects.absorbed_duplicates", 0),
        not_tested=[
            NotTested(**gap)
            for gap in not_tested(
                adapter, asked=outcome.settings.families or None, ran=outcome.families
            )
        ],
        shard=None
        if outcome.settings.shard is None
        else ShardInfo(
            k=outcome.settings.shard[0], n=outcome.settings.shard[1], plan=outcome.whole_plan
        ),
        counterexample=None
        if failure is None
        else Counterexample(
            steps=failure.scenario.describe(),
            failed_properties=_failed(failure),
            counterexample_for=_serves(outcome, failure),
            fully_shrunk=not set(_serves(outcome, failure)) & set(outcome.not_fully_shrunk),
            dropped_steps=_dropped(outcome, _serves(outcome, failure)),
            replay=replay_command(report_dir, spec, opts, properties=properties),
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
        unfired=dict(outcome.faults_unfired.get(key, {})),
        untested=dict(outcome.faults_untested.get(key, {})),
    )


def _dropped(outcome: Outcome, serves: list[str]) -> int:
    """How many steps the last pass of shrinking deleted from the
    counterexample of ``serves`` (see ``harness.session._drop``)."""
    return max((outcome.dropped_steps.get(name, 0) for name in serves), default=0)


def _serves(outcome: Outcome, example: Example) -> list[str]:
    """The properties whose counterexample ``example`` is."""
    return [name for name, ex in outcome.counterexamples.items() if ex is example]


def other_failures(outcome: Outcome) -> list[tuple[list[str], Example]]:
    """The counterexamples besides the main one, each with the properties it
    is the (minimal) counterexample of, in the order they were found."""
    out: list[tuple[list[str], Example]] = []
    seen = {id(outcome.failure)}
    for ex in outcome.counterexamples.values():
        if id(ex) in seen:
            continue
        seen.add(id(ex))
        out.append((_serves(outcome, ex), ex))
    return out


def _failed(example: Example) -> list[str]:
    return sorted(r.name for r in example.results if r.verdict is Verdict.FAIL)


def property_report(
    name: str,
    pv: PropertyVerdict,
    witness: list[int],
    counterexample: str | None,
    user: Mapping[str, object] | None = None,
) -> PropertyReport:
    """One property's entry of a report: its judged verdict ``pv``, witness
    and counterexample folder (a single run's, or a merge's); ``user``: for
    a user's invariant, what the outcome keeps of it (``source``, ``spec``,
    ``doc``, ``needs``, ``family``). An invariant that raised has its
    traceback moved out of the message into ``traceback``."""
    message, tb = split_traceback(pv.message)
    reason, tb2 = (None, None) if pv.reason is None else split_traceback(pv.reason)
    info = dict(user or {})
    extra: dict[str, object] = {}
    if user is not None:
        needs = info.get("needs") or []
        extra = {
            "source": info.get("source") or "run",
            "spec": info.get("spec"),
            "doc": info.get("doc") or None,
            "needs": list(needs) if isinstance(needs, list | tuple) else [],
            "family": info.get("family"),
            # the reason's first: the message ends it with a full stop
            "traceback": tb2 or tb or info.get("traceback"),
        }
    return PropertyReport(
        name=name,
        verdict=pv.verdict.value,
        message=message,
        witness=witness,
        counts=dict(pv.counts),
        reason=reason,
        exercised=pv.exercised,
        scenarios=pv.scenarios,
        failed=pv.failed,
        unknown=pv.unknown,
        counterexample=counterexample,
        **extra,
    )
