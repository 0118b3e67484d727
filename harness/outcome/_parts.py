"""The frozen parts an :class:`~harness.outcome.Outcome` is built from: the
search's :class:`Plan`, the :class:`Tallies` of every executed example, and
the :class:`Cut` (what stopped the search before its plan ended, and what
that left out). Each is made once, by :meth:`Draft.freeze
<harness.outcome.Draft.freeze>`, from copies: a later scenario of the run
changes none of them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._verdicts import Tally


@dataclass(frozen=True)
class Plan:
    """What the search planned, and what of it was expected to fit."""

    #: scenarios the search planned (targeted + sampled); None: not a
    #: planned search (exhaustive...)
    planned: int | None
    #: the whole search's plan, when this run is one shard of it (``planned``
    #: is then the shard's part)
    whole_plan: int | None
    #: the plan runs breadth-first (every kind of targeted schedule once
    #: before any twice, then a sampled share): a cut after every kind ran
    #: keeps its verdict. False (random kills, exhaustive): any cut is a gap
    breadth_first: bool
    #: of the plan, the sampled part
    sampled_planned: int
    #: what one scenario costs in real time, about (None: not known), and
    #: how that is known ("declared" by the adapter, "measured" from the
    #: fault-free runs); of the planned scenarios, how many were expected
    #: to fit in the budget, said before the search (None: not known)
    scenario_seconds: float | None
    scenario_cost: str | None
    fit: int | None
    #: every (commit kind x fault) pair of the targeted plan: ``kind``,
    #: ``fault``, the ``schedule`` that aims it (None: none does) and ``why``
    #: not ("capability: ...", "trace: ...", "not in the plan"); see
    #: :meth:`Outcome.commit_pair_coverage <harness.outcome.Outcome.commit_pair_coverage>`
    commit_pairs: tuple[dict[str, str | None], ...]


@dataclass(frozen=True)
class Tallies:
    """Every executed example, summed."""

    examples: int
    #: of the planned scenarios, how many ran (shrinking aside), and how
    #: many of those were sampled
    searched: int
    sampled_searched: int
    #: wall seconds of the slowest example
    slowest: float
    #: per property: every scenario's result, summed (see harness.outcome._verdicts)
    tallies: Mapping[str, Tally]
    faults_armed: Counter[str]
    faults_fired: Counter[str]
    #: per fault kind: why it did not fire, with how often (see Coverage.unfired)
    faults_unfired: Mapping[str, Counter[str]]
    #: per fault kind: why it was not tested where it was never armed (see
    #: Coverage.untested), with how often
    faults_untested: Mapping[str, Counter[str]]
    counts: Counter[str]
    #: the world's model over every scenario: calls and token counts
    model_usage: Counter[str]
    #: per crash point site: how often armed and fired (summed over examples)
    sites_armed: Counter[str]
    sites_fired: Counter[str]
    #: every (fault, workflow, run state) combination an example fired
    combinations: frozenset[tuple[str, str, str]]
    #: per fault kind, and per crash point as ``crash_point:SITE``: in how
    #: many examples it fired, and in how many of those a property failed
    fired_in: Counter[str]
    failed_after: Counter[str]
    #: every executed example, in order, as :func:`ledger_entry
    #: <harness.outcome._outcome.ledger_entry>` gives it (the run folder's
    #: ``scenarios.jsonl``)
    ledger: tuple[dict[str, Any], ...]
    #: monotonic time the search started, and seconds from then until the
    #: first failing example finished (None while nothing failed)
    started: float
    first_failure_seconds: float | None
    first_failure_examples: int | None


@dataclass(frozen=True)
class Cut:
    """What ended the search before its plan did, and what it left out."""

    #: the budget stopped the search before its plan ended
    budget_cut: bool
    #: the search stopped at the first failure on request (--stop-on-first)
    stopped_on_first: bool
    #: the signal that stopped the run (SIGINT, SIGTERM), if one did
    interrupted: str | None
    #: the targeted schedules the budget left unrun, by name, in plan order,
    #: and the kinds of schedule (``targeted/WORKFLOW/KIND/...``) of which
    #: none ran
    not_run_targeted: tuple[str, ...]
    unreached_kinds: tuple[str, ...]
    #: the properties whose counterexample's shrinking stopped at its own
    #: budget (--shrink-budget) or never began: a smaller one may fail too
    not_fully_shrunk: tuple[str, ...]
    #: per property: how many steps of its counterexample the last pass of
    #: shrinking deleted, one at a time, after Hypothesis's shrink (see
    #: ``harness.session._drop``); a property none was deleted for is absent
    dropped_steps: Mapping[str, int]
