"""``harness merge``: the report folders of one search's shards, as one report.

``harness run --shard K/N`` runs part K of N of a search's plan (see
``harness.session._plan.shard_plan``). Merging their folders gives the
report the whole plan would have given: per property, the evidence counts
summed over the shards and the verdict judged again from the sums by the
rules of a single run (:func:`harness.outcome.judge`); fault and crash point
coverage summed; every shard's counterexamples copied under ``shards/K/``
(with the shard's ``report.json``, so ``harness replay OUT/shards/K`` works
on the copy), the first one also at the top of the merged folder.

A shard's coverage gaps (a fault family it never armed, a property it never
exercised) are judged again over the sums: another shard may have covered
them. What the sums cannot show (a shard the budget cut short, or a signal
stopped) keeps the merge inconclusive, with the shard's reason.

Each shard's ``scenarios.jsonl`` (every scenario it ran, see
:func:`harness.report._write.ledger_lines`) is joined into the merged
folder's, each line marked with its ``shard``, the plan's in the plan's
order (by their ``index``): the shards of a plan ran exactly the
scenarios the unsharded search runs, and this shows it.

Report folders are data anyone may have written (CI artifacts): reading
them is :mod:`harness.report._shards`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..checkers import split_traceback
from ..model import Verdict
from ..outcome import Judgement, Tally, judge
from ._build import property_report, replay_command
from ._schema import (
    Counterexample,
    FaultCoverage,
    MergeInfo,
    OtherFailure,
    PropertyReport,
    Report,
)
from ._shards import _checked_dir, _copy_example, _in_plan_order, _ledger, load_shards
from ._store import load_results
from ._write import LEDGER, write_merged


def _sum_coverage(parts: Sequence[dict[str, FaultCoverage]]) -> dict[str, FaultCoverage]:
    totals: dict[str, Counter[str]] = {}
    unfired: dict[str, Counter[str]] = {}
    untested: dict[str, Counter[str]] = {}
    reasons = {"unfired", "untested"}
    for part in parts:
        for key, cov in part.items():
            totals.setdefault(key, Counter()).update(cov.model_dump(exclude=reasons))
            unfired.setdefault(key, Counter()).update(cov.unfired)
            untested.setdefault(key, Counter()).update(cov.untested)
    return {
        key: FaultCoverage(
            **{f: c[f] for f in FaultCoverage.model_fields if f not in reasons},
            unfired=dict(unfired[key]),
            untested=dict(untested[key]),
        )
        for key, c in sorted(totals.items())
    }


def _tally(r: Report, p: PropertyReport) -> Tally:
    """A shard's property, as the tally that judged it (its counts summed)."""
    assert r.shard is not None
    t = Tally(
        scenarios=p.scenarios,
        exercised=p.exercised,
        failed=p.failed or (1 if p.verdict == "fail" else 0),
        unknown=p.unknown,
    )
    t.counts.update(p.counts)
    why = p.reason or f"see shard {r.shard.k}/{r.shard.n}'s report"
    if p.unknown:
        t.unknowns[why] += p.unknown
    elif p.exercised == 0:
        t.idle[why] += max(p.scenarios, 1)
    return t


def _add(total: Tally, t: Tally) -> None:
    total.scenarios += t.scenarios
    total.exercised += t.exercised
    total.failed += t.failed
    total.unknown += t.unknown
    total.counts.update(t.counts)
    total.idle.update(t.idle)
    total.unknowns.update(t.unknowns)


def _needs(props: list[PropertyReport]) -> dict[str, tuple[list[str], str | None]]:
    """The user's invariants among ``props``: what each needs, and the
    fault family that exercises it (as the verdict rules take them)."""
    return {p.name: (list(p.needs), p.family) for p in props if p.user}


def _user_info(shards: list[Report]) -> dict[str, dict[str, object]]:
    """What the shards' reports say of the user's invariants (the first
    shard that has each), as a single run's outcome keeps it."""
    out: dict[str, dict[str, object]] = {}
    for r in shards:
        for p in r.properties:
            if p.user and p.name not in out:
                out[p.name] = {
                    "source": p.source,
                    "spec": p.spec,
                    "doc": p.doc,
                    "needs": list(p.needs),
                    "family": p.family,
                    "traceback": p.traceback,
                }
    return out


def _own_reasons(r: Report) -> list[str]:
    """The shard's reasons for being inconclusive that its evidence does not
    show (the budget, a signal): judging the summed evidence again decides
    the rest."""
    faults = {k: v.armed for k, v in r.faults.items()}
    fired = {k: v.fired for k, v in r.faults.items()}
    again = judge(
        {p.name: _tally(r, p) for p in r.properties},
        capabilities=r.adapter.capabilities,
        families=r.families,
        faults_armed=faults,
        faults_fired=fired,
        unfired={k: v.unfired for k, v in r.faults.items()},
        needs=_needs(r.properties),
    )
    # A property it could not judge is said with the shard's own words, which
    # the tally above keeps only in part: know it by its name.
    unjudged = tuple(
        f"{name} could not be judged:"
        for name, pv in again.properties.items()
        if pv.verdict is Verdict.UNKNOWN
    )
    evidence = set(again.inconclusive)
    return [why for why in r.inconclusive if why not in evidence and not why.startswith(unjudged)]


#: property -> (shard K, its counterexample's folder in the shard, witness)
Witnesses = dict[str, tuple[int, str, list[int]]]


#: a counterexample a shard kept: (K, folder in the shard, steps, failed, serves)
Kept = tuple[int, str, list[str], list[str], list[str]]


def merge_reports(
    folders: Sequence[Path],
    out: Path,
    *,
    partial: bool = False,
    why_missing: Mapping[int, str] | None = None,
    duration: float | None = None,
    chosen: bool = True,
) -> Report:
    """Merge the shard report folders ``folders`` into ``out`` (every
    format, and every counterexample copied); returns the merged report.
    ``partial`` merges even when shards are missing: the verdict is then
    inconclusive, naming them, each with its reason in ``why_missing`` (by
    K) when the caller knows it (``harness run --jobs``: the job died).
    ``duration``: the whole search's wall seconds, when the caller measured
    them (else the slowest shard's). ``chosen``: the user named the adapter
    the shards record (their own run's jobs or pytest workers); when not
    (``harness merge`` of folders anyone may have written), the replay
    commands show an adapter that is not built in as data
    (:func:`replay_command`)."""
    shards = load_shards(folders, out, partial=partial)
    first = shards[0]
    assert first.shard is not None
    n = first.shard.n
    by_k = {r.shard.k: r for r in shards if r.shard is not None}
    missing = [k for k in range(1, n + 1) if k not in by_k]
    user = _user_info(shards)
    # 1. the sums, judged again by the rules of a single run
    tallies, witness, reasons = _sum_properties(shards, n)
    faults = _sum_coverage([r.faults for r in shards])
    judgement = _judge(first, shards, tallies, faults, _fail_messages(witness, by_k))
    inconclusive = [split_traceback(r)[0] for r in judgement.inconclusive] + reasons
    inconclusive += _missing_reasons(missing, dict(why_missing or {}), n)
    # 2. every counterexample copied, the first also at the top
    files: dict[str, bytes | Path] = {
        LEDGER: _in_plan_order([ln for r in shards for ln in _ledger(r)])
    }
    kept, copied, unshrunk, dropped = _kept_examples(shards, files)
    given = _given(user)

    def replay(k: int, rel: str) -> str:
        spec, opts = first.adapter.spec, dict(first.adapter.options)
        return replay_command(out / _where(k, rel), spec, opts, chosen=chosen, properties=given)

    counterexample, others = _counterexamples(kept, by_k, files, (unshrunk, dropped), replay)
    properties = [
        property_report(name, pv, *_witness_of(name, witness, kept), user.get(name))
        for name, pv in judgement.properties.items()
    ]
    pass_unearned = judgement.verdict is Verdict.PASS and bool(inconclusive)
    report = Report(
        verdict=(Verdict.UNKNOWN if pass_unearned else judgement.verdict).value,
        inconclusive=inconclusive,
        # a shard a signal stopped: the merge of it is a partial report too
        interrupted=_first_interrupted(shards),
        seed=first.seed,
        profile=first.profile,
        adapter=first.adapter,
        duration_seconds=duration or max(r.duration_seconds for r in shards),
        properties=properties,
        other_failures=others,
        faults=faults,
        families=list(first.families),
        crash_points=_sum_coverage([r.crash_points for r in shards]),
        not_tested=list(first.not_tested),
        counterexample=counterexample,
        merged=MergeInfo(n=n, shards=sorted(by_k), missing=missing, folders=copied),
        **_scenario_sums(shards, n, missing),
    )
    write_merged(report, files, out)
    return report


def _judge(
    first: Report,
    shards: Sequence[Report],
    tallies: dict[str, Tally],
    faults: Mapping[str, FaultCoverage],
    fail_messages: dict[str, str],
) -> Judgement:
    """The summed tallies and coverage judged by the rules of a single run."""
    return judge(
        tallies,
        capabilities=first.adapter.capabilities,
        families=first.families,
        faults_armed={k: v.armed for k, v in faults.items()},
        faults_fired={k: v.fired for k, v in faults.items()},
        unfired={k: v.unfired for k, v in faults.items()},
        fail_messages=fail_messages,
        needs=_needs([p for r in shards for p in r.properties]),
    )


def _first_interrupted(shards: Sequence[Report]) -> Any:
    """The first shard's interruption (a signal stopped it), or None."""
    return next((r.interrupted for r in shards if r.interrupted), None)


def _given(user: Mapping[str, Mapping[str, object]]) -> list[str]:
    """The invariants the run was given, by spec: a replay names them (--property)."""
    specs = (str(u["spec"]) for u in user.values() if u["source"] == "run" and u["spec"])
    return list(dict.fromkeys(specs))


def _sum_properties(
    shards: Sequence[Report], n: int
) -> tuple[dict[str, Tally], Witnesses, list[str]]:
    """Per property, its tallies summed over ``shards``; the first failing
    shard's counterexample and witness; and the shards' own reasons the
    sums cannot show (a budget cut, a signal), each once."""
    tallies: dict[str, Tally] = {}
    witness: Witnesses = {}
    reasons: list[str] = []
    for r in shards:
        assert r.shard is not None and r.folder is not None
        for p in r.properties:
            _add(tallies.setdefault(p.name, Tally()), _tally(r, p))
            if p.verdict == "fail" and p.name not in witness:
                witness[p.name] = (r.shard.k, p.counterexample or ".", list(p.witness))
        for why in _own_reasons(r):
            said = f"shard {r.shard.k}/{n}: {why}"
            if said not in reasons:
                reasons.append(said)
    return tallies, witness, reasons


def _fail_messages(witness: Witnesses, by_k: Mapping[int, Report]) -> dict[str, str]:
    """What each failed property's checker said, read from the results of
    the shard's counterexample that failed it ("" where none can be read)."""
    messages = {}
    for name, (k, rel, _) in witness.items():
        src = _checked_dir(by_k[k].folder or Path("."), rel)
        results = (
            load_results(src / "results.json")
            if src is not None and not (src / "results.json").is_symlink()
            else []
        )
        said = [res.message for res in results if res.name == name and res.verdict is Verdict.FAIL]
        messages[name] = said[0] if said else ""
    return messages


def _missing_reasons(missing: Sequence[int], why: Mapping[int, str], n: int) -> list[str]:
    """Why the shards not merged are missing: each one's reason where the
    caller knows it, else one line for all the rest."""
    out = [f"shard {k}/{n}: {why[k]}" for k in missing if k in why]
    unexplained = [k for k in missing if k not in why]
    if unexplained:
        out.append(
            f"shard(s) {', '.join(f'{k}/{n}' for k in unexplained)} of {n} missing (merged "
            "with --partial): their part of the plan is not in this report"
        )
    return out


def _where(k: int, rel: str) -> str:
    """Where shard K's counterexample at ``rel`` lands in the merged folder."""
    return f"shards/{k}" if rel == "." else f"shards/{k}/{rel}"


def _kept_examples(
    shards: Sequence[Report], files: dict[str, bytes | Path]
) -> tuple[list[Kept], dict[str, str], set[str], dict[tuple[int, str], int]]:
    """Every shard's kept counterexamples, copied under ``shards/K/`` (into
    ``files``, with the shard's report.json, so replay works on the copy);
    where each shard's went; the properties a shard's counterexample
    serves that it did not fully shrink; and per kept counterexample (K,
    folder), the steps the last pass of shrinking deleted from it."""
    kept: list[Kept] = []
    copied: dict[str, str] = {}
    unshrunk: set[str] = set()
    dropped: dict[tuple[int, str], int] = {}
    for r in shards:
        assert r.shard is not None and r.folder is not None
        k = r.shard.k
        for c in [r.counterexample, *r.other_failures]:
            if c is not None and not c.fully_shrunk:
                unshrunk.update(c.counterexample_for or c.failed_properties)
        found: list[tuple[str, list[str], list[str], list[str]]] = []
        if r.counterexample is not None:
            ce = r.counterexample
            found.append((".", ce.steps, ce.failed_properties, ce.counterexample_for))
            dropped[k, "."] = ce.dropped_steps
        for i, other in enumerate(r.other_failures, 1):
            rel = other.folder or f"failures/{i}"
            found.append((rel, other.steps, other.failed_properties, other.counterexample_for))
            dropped[k, rel] = other.dropped_steps
        if not found:
            continue
        copied[str(k)] = f"shards/{k}"
        files[f"shards/{k}/report.json"] = r.folder / "report.json"
        for rel, steps, failed, serves in found:
            dest = f"shards/{k}/" if rel == "." else f"shards/{k}/{rel}/"
            _copy_example(r.folder, rel, dest, files)
            kept.append((k, rel, steps, failed, serves))
    return kept, copied, unshrunk, dropped


def _counterexamples(
    kept: Sequence[Kept],
    by_k: Mapping[int, Report],
    files: dict[str, bytes | Path],
    shrunk: tuple[set[str], dict[tuple[int, str], int]],
    replay: Callable[[int, str], str],
) -> tuple[Counterexample | None, list[OtherFailure]]:
    """The merged report's counterexample (the first kept, also copied to
    the top of the folder) and its other failures (the rest); ``shrunk``:
    the properties not fully shrunk, and the steps deleted from each kept
    counterexample (see :func:`_kept_examples`)."""
    if not kept:
        return None, []
    unshrunk, dropped = shrunk
    k0, rel0, steps, failed, serves = kept[0]
    _copy_example(by_k[k0].folder or Path("."), rel0, "", files)
    counterexample = Counterexample(
        steps=steps,
        failed_properties=failed,
        counterexample_for=serves,
        replay=replay(k0, rel0),
        fully_shrunk=not set(serves) & unshrunk,
        dropped_steps=dropped.get((k0, rel0), 0),
    )
    others = [
        OtherFailure(
            failed_properties=failed,
            counterexample_for=serves,
            steps=steps,
            folder=_where(k, rel),
            replay=replay(k, rel),
            fully_shrunk=not set(serves) & unshrunk,
            dropped_steps=dropped.get((k, rel), 0),
        )
        for k, rel, steps, failed, serves in kept[1:]
    ]
    return counterexample, others


def _witness_of(
    name: str, witness: Witnesses, kept: Sequence[Kept]
) -> tuple[list[int], str | None]:
    """A failed property's witness and where its counterexample is in the
    merged folder ("." for the top one); ([], None) for the others."""
    if name not in witness:
        return [], None
    k, rel, events = witness[name]
    return events, "." if kept and (k, rel) == kept[0][:2] else _where(k, rel)


def _total(values: Sequence[int | None]) -> int | None:
    """The sum of ``values``, or None when one of them is unknown."""
    return None if None in values else sum(v or 0 for v in values)


def _scenario_sums(shards: Sequence[Report], n: int, missing: Sequence[int]) -> dict[str, Any]:
    """The merged report's scenario counts: each a sum over the shards, or
    None where a shard does not know its own (or, for the fit, one is missing)."""
    not_run = [f"shard {r.shard.k}/{n}: {r.not_run}" for r in shards if r.not_run and r.shard]
    model: Counter[str] = Counter()
    for r in shards:
        model.update(r.model_usage)
    return {
        "slowest_seconds": max(r.slowest_seconds for r in shards),
        "scenarios": sum(r.scenarios for r in shards),
        "planned_scenarios": _total([r.planned_scenarios for r in shards]),
        "searched_scenarios": _total([r.searched_scenarios for r in shards]),
        "fit_scenarios": None if missing else _total([r.fit_scenarios for r in shards]),
        "not_run": "; ".join(not_run) or None,
        "not_run_schedules": [name for r in shards for name in r.not_run_schedules],
        "absorbed_duplicates": sum(r.absorbed_duplicates for r in shards),
        "model_usage": dict(sorted(model.items())),
    }
