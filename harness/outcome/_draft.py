"""The outcome being filled while a run's scenarios execute: a
:class:`Draft`, which the session writes and freezes into an
:class:`~harness.outcome.Outcome` (see :mod:`harness.outcome._outcome`)."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .._settings import Settings
from ._outcome import Example, Outcome, ledger_entry
from ._parts import Cut, Plan, Tallies
from ._verdicts import Tally


def _copy_tally(t: Tally) -> Tally:
    """A copy of ``t`` that later results added to ``t`` leave unchanged."""
    return dataclasses.replace(
        t, counts=Counter(t.counts), idle=Counter(t.idle), unknowns=Counter(t.unknowns)
    )


@dataclass
class Draft:
    """The outcome being filled: the session's one working copy while
    scenarios run (:meth:`account` adds an example; the search writes its
    plan and cut here), frozen into an :class:`~harness.outcome.Outcome` by
    :meth:`freeze` -- at the end, for a partial report, and for each
    progress report."""

    adapter: str
    adapter_options: dict[str, Any]
    capabilities: list[str]
    settings: Settings
    seed: int | None
    examples: int = 0
    seconds: float = 0.0
    #: wall seconds of the slowest example, and how long examples take in all
    slowest: float = 0.0
    #: per property: every scenario's result, summed (see harness.outcome._verdicts)
    tallies: dict[str, Tally] = field(default_factory=dict)
    faults_armed: Counter[str] = field(default_factory=Counter)
    faults_fired: Counter[str] = field(default_factory=Counter)
    #: per fault kind: why it did not fire, with how often (see Coverage.unfired)
    faults_unfired: dict[str, Counter[str]] = field(default_factory=dict)
    #: per fault kind: why it was not tested where it was never armed (see
    #: Coverage.untested), with how often
    faults_untested: dict[str, Counter[str]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    #: the world's model over every scenario: calls and token counts
    model_usage: Counter[str] = field(default_factory=Counter)
    #: per failing property, in the order found: its (minimal) counterexample;
    #: one example may serve several properties
    counterexamples: dict[str, Example] = field(default_factory=dict)
    crash_points: list[str] = field(default_factory=list)
    #: the fault families switched on for this run
    families: list[str] = field(default_factory=list)
    #: per crash point site: how often armed and fired (summed over examples)
    sites_armed: Counter[str] = field(default_factory=Counter)
    sites_fired: Counter[str] = field(default_factory=Counter)
    #: every (fault, workflow, run state) combination an example fired
    combinations: set[tuple[str, str, str]] = field(default_factory=set)
    #: per fault kind, and per crash point as ``crash_point:SITE``: in how
    #: many examples it fired, and in how many of those a property failed
    fired_in: Counter[str] = field(default_factory=Counter)
    failed_after: Counter[str] = field(default_factory=Counter)
    #: monotonic time the search started, and seconds from then until the
    #: first failing example finished (None while nothing failed)
    started: float = field(default_factory=time.monotonic)
    first_failure_seconds: float | None = None
    first_failure_examples: int | None = None
    #: scenarios the search planned (targeted + sampled), and how many of
    #: them ran (shrinking aside); None: not a planned search (exhaustive...)
    planned: int | None = None
    searched: int = 0
    #: the whole search's plan, when this run is one shard of it (``planned``
    #: is then the shard's part)
    whole_plan: int | None = None
    #: the budget stopped the search before its plan ended
    budget_cut: bool = False
    #: the plan runs breadth-first (every kind of targeted schedule once
    #: before any twice, then a sampled share): a cut after every kind ran
    #: keeps its verdict. False (random kills, exhaustive): any cut is a gap
    breadth_first: bool = False
    #: of the plan, the sampled part, and how many sampled scenarios ran
    sampled_planned: int = 0
    sampled_searched: int = 0
    #: the search stopped at the first failure on request (--stop-on-first)
    stopped_on_first: bool = False
    #: the signal that stopped the run (SIGINT, SIGTERM), if one did
    interrupted: str | None = None
    #: what one scenario costs in real time, about (None: not known), and
    #: how that is known ("declared" by the adapter, "measured" from the
    #: fault-free runs); of the planned scenarios, how many were expected
    #: to fit in the budget, said before the search (None: not known)
    scenario_seconds: float | None = None
    scenario_cost: str | None = None
    fit: int | None = None
    #: the targeted schedules the budget left unrun, by name, in plan order,
    #: and the kinds of schedule (``targeted/WORKFLOW/KIND/...``) of which
    #: none ran
    not_run_targeted: list[str] = field(default_factory=list)
    unreached_kinds: list[str] = field(default_factory=list)
    #: the properties whose counterexample's shrinking stopped at its own
    #: budget (--shrink-budget) or never began: a smaller one may fail too
    not_fully_shrunk: list[str] = field(default_factory=list)
    #: per property: how many steps of its counterexample the last pass of
    #: shrinking deleted, one at a time, after Hypothesis's shrink (see
    #: ``harness.session._drop``); a property none was deleted for is absent
    dropped_steps: dict[str, int] = field(default_factory=dict)
    #: every executed example, in order, as :func:`ledger_entry` gives it
    #: (the run folder's ``scenarios.jsonl``): which scenarios ran, and
    #: whether a search spread over shards or jobs ran the same ones
    ledger: list[dict[str, Any]] = field(default_factory=list)
    #: the properties judged besides the built-in ones (a user's invariants),
    #: in order: name -> what the report says of it (``spec``, ``doc``,
    #: ``needs``, ``family``); the verdict rules read ``needs`` and ``family``
    user_properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: every (commit kind x fault) pair of the targeted plan: ``kind``,
    #: ``fault``, the ``schedule`` that aims it (None: none does) and ``why``
    #: not ("capability: ...", "trace: ...", "not in the plan"); see
    #: :meth:`commit_pair_coverage`
    commit_pairs: list[dict[str, str | None]] = field(default_factory=list)

    def freeze(self) -> Outcome:
        """The outcome as it stands, built once from frozen parts: copies,
        which no later scenario of the run changes. The failing examples
        kept are the counterexamples' (one example may serve several
        properties), in the order their properties were found failing."""
        failures = tuple({id(e): e for e in self.counterexamples.values()}.values())
        return Outcome(
            adapter=self.adapter,
            adapter_options=dict(self.adapter_options),
            capabilities=tuple(self.capabilities),
            settings=self.settings,
            seed=self.seed,
            crash_points=tuple(self.crash_points),
            families=tuple(self.families),
            user_properties={k: dict(v) for k, v in self.user_properties.items()},
            plan=Plan(
                planned=self.planned,
                whole_plan=self.whole_plan,
                breadth_first=self.breadth_first,
                sampled_planned=self.sampled_planned,
                scenario_seconds=self.scenario_seconds,
                scenario_cost=self.scenario_cost,
                fit=self.fit,
                commit_pairs=tuple(self.commit_pairs),
            ),
            sums=Tallies(
                examples=self.examples,
                searched=self.searched,
                sampled_searched=self.sampled_searched,
                slowest=self.slowest,
                tallies={k: _copy_tally(t) for k, t in self.tallies.items()},
                faults_armed=Counter(self.faults_armed),
                faults_fired=Counter(self.faults_fired),
                faults_unfired={k: Counter(v) for k, v in self.faults_unfired.items()},
                faults_untested={k: Counter(v) for k, v in self.faults_untested.items()},
                counts=Counter(self.counts),
                model_usage=Counter(self.model_usage),
                sites_armed=Counter(self.sites_armed),
                sites_fired=Counter(self.sites_fired),
                combinations=frozenset(self.combinations),
                fired_in=Counter(self.fired_in),
                failed_after=Counter(self.failed_after),
                ledger=tuple(self.ledger),
                started=self.started,
                first_failure_seconds=self.first_failure_seconds,
                first_failure_examples=self.first_failure_examples,
            ),
            cut=Cut(
                budget_cut=self.budget_cut,
                stopped_on_first=self.stopped_on_first,
                interrupted=self.interrupted,
                not_run_targeted=tuple(self.not_run_targeted),
                unreached_kinds=tuple(self.unreached_kinds),
                not_fully_shrunk=tuple(self.not_fully_shrunk),
                dropped_steps=dict(self.dropped_steps),
            ),
            failure=failures[0] if failures else None,
            failures=failures,
            counterexamples=dict(self.counterexamples),
            seconds=self.seconds,
        )

    def account(self, example: Example) -> None:
        """Add one executed example to the sums."""
        self.examples += 1
        self.ledger.append(ledger_entry(example))
        self.slowest = max(self.slowest, example.seconds)
        for r in example.results:
            self.tallies.setdefault(r.name, Tally()).add(r)
            for k, v in r.counts.items():
                self.counts[f"{r.name}.{k}"] += v
        cov = example.coverage
        self.faults_armed.update(cov.armed)
        self.faults_fired.update(cov.fired)
        for kind, why in cov.unfired.items():
            self.faults_unfired.setdefault(kind, Counter()).update(why)
        for kind, why in cov.untested.items():
            self.faults_untested.setdefault(kind, Counter()).update(why)
        self.sites_armed.update(cov.sites_armed)
        self.sites_fired.update(cov.sites_fired)
        self.model_usage.update(cov.model)
        fired = [k for k, n in cov.fired.items() if n]
        fired += [f"crash_point:{site}" for site, n in cov.sites_fired.items() if n]
        self.fired_in.update(fired)
        self.combinations |= example.combinations
        if example.failed:
            self.failed_after.update(fired)
            if self.first_failure_seconds is None:
                self.first_failure_seconds = time.monotonic() - self.started
                self.first_failure_examples = self.examples
