"""A search's plan and its budget: what the plan holds, each shard's part
of it, what fits in ``--budget``, when sampling takes over from the
targeted schedules, and shrinking's own budget.

Pure arithmetic over the settings, the outcome and the clock's readings
(passed in): the search (:mod:`._search`) calls it and says what it says.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from .._errors import UsageError
from .._settings import Settings
from ..adapters._contract import Adapter
from ..model import Scenario
from ..outcome import Draft

#: the share of a plan kept for Hypothesis-sampled scenarios when the
#: targeted schedules alone would fill it: sampling finds what no schedule
#: aims at (issue 11 measured mistakes only the sampled phase found), so a
#: long targeted list must not crowd it out
SAMPLED_SHARE = 0.2


def targeted_cap(s: Settings) -> int:
    """How many targeted schedules a plan of ``s.max_examples`` runs: all
    but :data:`SAMPLED_SHARE` of it (rounded down, so a plan of 1-4 is all
    targeted)."""
    return s.max_examples - int(s.max_examples * SAMPLED_SHARE)


#: how much a plan may grow, as a share of ``--max-examples``, to run the
#: (commit kind x fault) pairs its targeted share does not reach (issue 28:
#: the ci plan's 120 targeted places reached 4 of the 16 pairs the
#: reference offers on SQLite; the rest ran only in longer plans)
PAIR_SHARE = 0.2


def pair_room(s: Settings) -> int:
    """How many schedules past the targeted share a plan of
    ``s.max_examples`` may add for the (commit kind x fault) pairs that
    share does not reach: :data:`PAIR_SHARE` of it, rounded down (none
    without targeted schedules)."""
    return int(s.max_examples * PAIR_SHARE) if s.targeted else 0


def shard_plan(
    aimed: Sequence[Scenario], planned: int, shard: tuple[int, int] | None
) -> tuple[list[Scenario], int]:
    """Shard ``(K, N)``'s part of a plan: of the ``aimed`` scenarios (the
    regressions, then the targeted schedules, as the whole plan runs them),
    those at an index ``i`` with ``i % N == K - 1``; of the sampled ones
    (``planned`` minus the aimed ones), an even share, the first
    ``sampled % N`` shards taking one more. Returns the shard's aimed
    scenarios and its planned total. The N shards' parts add up to the
    plan, each aimed scenario in exactly one of them (the sampled ones: see
    :func:`drawn_by`). No shard: the plan."""
    if shard is None:
        return list(aimed), planned
    k, n = shard
    sampled = max(planned - len(aimed), 0)
    mine = list(aimed[k - 1 :: n])
    share = sampled // n + (1 if k - 1 < sampled % n else 0)
    return mine, len(mine) + share


#: a measured scenario costs this many fault-free runs: its faulted run,
#: which starts more workers than a fault-free one (the kill, the resume,
#: the quiesce after it), and (the first time its workload runs) its
#: oracle's. Measured on the six shipped ci rows (issue 33, quiet machine,
#: benchmarks/adapter_cost.py): 2.2 fault-free runs a scenario on the
#: reference on SQLite, 3.3-5.0 on the others; 2 made every estimate but
#: the reference's 1.6-2.5x too low. Faults that cost real time (a timeout
#: after a kill, a retry's interval) are not in it: an adapter that has
#: them declares them (``fault_seconds``, added to the measured cost, which
#: still follows the machine's pace) or the whole cost (``scenario_seconds``)
MEASURED_RUNS = 3.0
#: scenarios after which the plan is checked against the pace of the search
REVISE_AFTER = 10
#: scenarios after which a *measured* plan is re-fitted to the search's own
#: pace: the estimate comes from the probe's fault-free runs, the first runs
#: of the harness, which pay each framework's first-use costs (the fork
#: server's start and preload, first imports, first connections): 4-14x the
#: warm cost of a real adapter's scenario (issue 33). A declared cost (a
#: runtime on real time) is the adapter's word until REVISE_AFTER.
REFIT_AFTER = 3


#: shrinking's own budget, as a share of ``--budget``, when
#: ``--shrink-budget`` does not give it
SHRINK_SHARE = 0.25


def shrink_seconds(s: Settings) -> float:
    """Shrinking's own budget: ``--shrink-budget``, else :data:`SHRINK_SHARE`
    of ``--budget``."""
    if s.shrink_budget_seconds is not None:
        return s.shrink_budget_seconds
    return SHRINK_SHARE * s.budget_seconds


def shrink_deadline(now: float, search_started: float, s: Settings) -> float:
    """When shrinking that begins at ``now`` must stop: after its own
    budget (:func:`shrink_seconds`), or when the search's ``--budget`` ends
    if that is later (a search that ended early leaves its time to
    shrinking). Shrinking begins after the search, so it never takes time
    from it; a search that spent all its budget still leaves shrinking its
    own; a run lasts at most ``--budget`` plus ``--shrink-budget``."""
    return max(now + shrink_seconds(s), search_started + s.budget_seconds)


def budget_fit(planned: int, budget: float, cost: float | None) -> int | None:
    """How many of ``planned`` scenarios fit in ``budget`` seconds at
    ``cost`` seconds each (None: the cost is not known). The search starts
    a scenario while its budget lasts, so one that begins just in time
    counts."""
    if cost is None:
        return None
    if cost <= 0:
        return planned
    return min(planned, math.ceil(budget / cost))


def drawn_by(shard: tuple[int, int] | None, index: int) -> bool:
    """Whether shard ``(K, N)`` runs the sampled scenario drawn ``index``-th
    (from 0). Every shard draws the one stream of the whole plan from the
    run's seed, and runs those at ``index % N == K - 1``: the N shards
    together run exactly the scenarios the unsharded search runs, whatever
    N (``harness run --jobs N`` relies on it)."""
    return shard is None or index % shard[1] == shard[0] - 1


def _declared(adapter: Adapter, name: str, what: str, example: str) -> float | None:
    """The adapter's optional number ``name`` (>= 0, finite), else None;
    anything else is refused with what it must be (``what``, ``example``)."""
    declared = getattr(adapter, name, None)
    if declared is None:
        return None
    if (
        isinstance(declared, bool)
        or not isinstance(declared, (int, float))
        or not math.isfinite(declared)
        or declared < 0
    ):
        raise UsageError(
            f"adapter {adapter.name!r} declares {name}={declared!r}: it must be {what}, "
            f"a number >= 0 (say {name} = {example}), or left out to have the harness "
            "measure it"
        )
    return float(declared)


def fault_seconds(adapter: Adapter) -> float:
    """What a scenario's faults add in real time to a measured cost: the
    adapter's ``fault_seconds`` (a runtime whose faults wait out real time
    that no fault-free run waits: a retry's interval, a timed-out attempt),
    else 0."""
    what = "the real seconds a scenario's faults wait that no fault-free run waits"
    return _declared(adapter, "fault_seconds", what, "0.5") or 0.0


def scenario_cost(
    adapter: Adapter, fault_free_seconds: Sequence[float]
) -> tuple[float | None, str]:
    """What one scenario costs in real time, about, and how that is
    known: the adapter's ``scenario_seconds`` (``declared``), else
    :data:`MEASURED_RUNS` times the median of ``fault_free_seconds``, plus
    :func:`fault_seconds` (``measured``), the first run of all left out
    when there are others (it pays the first-use costs: the fork server's
    start, first imports), else ``(None, "unknown")``."""
    what = "the real seconds one scenario takes"
    declared = _declared(adapter, "scenario_seconds", what, "3.5")
    if declared is not None:
        return declared, "declared"
    if fault_free_seconds:
        warm = fault_free_seconds[1:] or fault_free_seconds
        runs = MEASURED_RUNS * statistics.median(warm)
        return runs + fault_seconds(adapter), "measured"
    return None, "unknown"


def plan_budget(
    outcome: Draft,
    aimed: int,
    cost: tuple[float | None, str],
    budget: float,
    log: Callable[[str], None],
    waits: float = 0.0,
    pairs: int = 0,
) -> None:
    """Say before the search how many planned scenarios fit in the budget
    (kept in the outcome, for the report), and what to do if not all do;
    ``cost`` is :func:`scenario_cost`'s answer (``waits``: the
    :func:`fault_seconds` a measured one adds), ``aimed`` the targeted part
    (``pairs`` of the whole plan's: the schedules past the targeted share
    that run the commit x fault pairs it does not reach, :func:`pair_room`)."""
    planned = outcome.planned or 0
    outcome.scenario_seconds, outcome.scenario_cost = cost
    seconds, source = cost
    outcome.fit = budget_fit(planned, budget, seconds)
    sampled = max(planned - aimed, 0)
    added = ","
    if pairs:
        added = f": {aimed - pairs} plus {pairs} for the commit x fault pairs those miss;"
    head = f"harness: plan: {planned} scenarios ({aimed} targeted{added} {sampled} sampled)"
    if seconds is None or outcome.fit is None:
        log(f"{head}; the {budget:g} s budget may cut it short (cost not known)")
        return
    how = (
        "declared by the adapter"
        if source == "declared"
        else f"measured: {MEASURED_RUNS:g} x the median fault-free run"
        + (f", plus {waits:g} s the faults wait" if waits else "")
    )
    at = f"at about {seconds:.2g} s a scenario ({how})"
    if outcome.fit >= planned:
        log(f"{head}; {at}, all fit in the {budget:g} s budget")
        return
    log(
        f"{head}; {at}, about {outcome.fit} fit in the {budget:g} s budget: the other "
        f"{planned - outcome.fit} will not run, and the report will say which. Every "
        "kind of targeted schedule comes once before any comes twice, and about "
        f"{SAMPLED_SHARE:.0%} of what fits is kept for sampling; a kind that never runs "
        "makes the run inconclusive. "
        f"To run them all: --budget {math.ceil(planned * seconds)}"
    )


def refit_after(outcome: Draft) -> int:
    """After how many scenarios the search's pace replaces the plan's
    estimate: :data:`REFIT_AFTER` for a measured one, :data:`REVISE_AFTER`
    for a declared one."""
    return REFIT_AFTER if outcome.scenario_cost == "measured" else REVISE_AFTER


def left_for_sampling(outcome: Draft, elapsed: float, budget: float) -> bool:
    """Whether the targeted schedules must stop so that sampling gets its
    share, ``elapsed`` seconds into a search of ``budget``: at the pace so
    far (the declared or measured cost until :func:`refit_after` scenarios
    ran), the scenarios the rest of the budget fits are no more than
    :data:`SAMPLED_SHARE` of all that fit. A budget too short for the whole
    plan then still samples (the mistakes only sampling finds), and the
    targeted schedules it cuts are the later rounds: every kind comes once
    before any comes twice."""
    if outcome.sampled_planned <= 0 or outcome.planned is None:
        return False
    if outcome.searched >= refit_after(outcome):
        pace = elapsed / outcome.searched
    else:
        pace = outcome.scenario_seconds or 0.0
    if pace <= 0:
        return False
    left = max(budget - elapsed, 0.0) / pace
    fit = outcome.searched + left
    reserve = min(outcome.sampled_planned, max(1, int(fit * SAMPLED_SHARE)))
    return left <= reserve


def revise_plan(
    outcome: Draft, elapsed: float, budget: float, log: Callable[[str], None]
) -> float | None:
    """Once the search's pace replaces the plan's estimate
    (:func:`refit_after`), ``elapsed`` seconds into it: that pace (the
    sampling reserve follows it, :func:`left_for_sampling`), having said,
    if the scenarios ran slower than planned, how many now fit (once).
    None before and after."""
    if outcome.searched != refit_after(outcome) or outcome.planned is None:
        return None
    pace = elapsed / outcome.searched
    fit = budget_fit(outcome.planned, budget, pace)
    if fit is not None and fit < outcome.planned and fit < (outcome.fit or 0) * 0.9:
        log(
            f"harness: the first {outcome.searched} scenarios took {pace:.2g} s each: "
            f"about {fit} of the {outcome.planned} planned fit in the "
            f"{budget:g} s budget (to run them all: --budget "
            f"{math.ceil(outcome.planned * pace)})"
        )
    elif fit is not None and outcome.fit is not None and fit > outcome.fit * 1.5:
        log(
            f"harness: the first {outcome.searched} scenarios took {pace:.2g} s each, "
            "faster than planned (the plan's fault-free runs paid first-use costs): "
            + (
                f"all {outcome.planned} planned fit"
                if fit >= outcome.planned
                else f"about {fit} of the {outcome.planned} planned fit"
            )
            + f" in the {budget:g} s budget"
        )
    return pace
