"""One search of :meth:`Engine.run <harness.session.Engine.run>`, in phases.

The plan (regressions, then the targeted schedules, then a sampled share;
each shard's part of it), the aimed phase (the regressions and the
targeted schedules, in plan order), the sampled phase (Hypothesis draws
from the run's seed), and the shrink phase (one counterexample per failing
property). A :class:`Search` lives for one run: everything it learns (the
first failure of each property, which scenarios failed what, when to stop)
is its own, and it leaves the engine what it found as a
:class:`~harness.outcome.Draft`, which the engine freezes into the run's
:class:`~harness.outcome.Outcome`.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from hypothesis import given, reject, seed

from .._errors import HarnessError
from .._settings import Settings
from .._signals import check_interrupted
from ..adapters._contract import Adapter
from ..model import Scenario
from ..outcome import Draft, Example
from ..scenarios import Universe, schedule_kind, targeted_plan
from ._draws import Done, Stream, hypothesis_settings, own_draws, repeat
from ._plan import (
    budget_fit,
    drawn_by,
    fault_seconds,
    left_for_sampling,
    pair_room,
    plan_budget,
    revise_plan,
    shard_plan,
    targeted_cap,
)
from ._shared import PlanQueue
from ._shrink import Shrink, failed_properties

#: what the budget's cut of the targeted schedules says as sampling starts
_SAMPLING_STARTS = (
    "harness: the budget left fits about the sampled share of the plan: "
    "{} targeted schedules will not run, "
    "sampling starts now (the report will say what did not run)"
)


class Host(Protocol):
    """What a search uses of its engine."""

    adapter: Adapter
    settings: Settings
    seed: int
    #: False: no shrinking (the detection benchmark)
    shrink: bool

    def new_outcome(self, universe: Universe) -> Draft: ...

    def execute(self, scenario: Scenario) -> Example: ...

    def account(self, outcome: Draft, example: Example) -> None: ...

    def keep_last(self, example: Example) -> None: ...

    def oracle(self, scenario: Scenario) -> Path: ...

    def scenario_cost(self) -> tuple[float | None, str]: ...

    def over_budget(self) -> bool: ...


class Search:
    """The search of ``universe`` by ``engine``, begun at ``started``:
    ``regressions`` (scenario files) first, each once, on top of the plan;
    with a ``queue`` (a job of ``--jobs N``), the plan's scenarios this job
    takes from it; ``log`` receives the plan's notices."""

    def __init__(
        self,
        engine: Host,
        universe: Universe,
        regressions: Sequence[Scenario] = (),
        *,
        started: float,
        queue: PlanQueue | None = None,
        log: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self.engine = engine
        self.settings = engine.settings
        self.universe = universe
        self.regressions = regressions
        self.started = started
        self.queue = queue
        self.log = log
        self.outcome = engine.new_outcome(universe)
        #: per property, the first failing example and whether it was sampled
        self.first: dict[str, tuple[Example, bool]] = {}
        #: per scenario (its JSON) run: the properties it failed (so the
        #: shrink pass replays the search without re-running)
        self.known: dict[str, frozenset[str]] = {}
        #: every failing example run, in order
        self.failures: list[Example] = []
        #: the search stops: the budget spent, every property failed, the
        #: first failure with ``stop_on_first``, the queue's plan run out
        self.stop = False
        #: with a queue: the plan indices this search took, run or not, and
        #: the sampled one taken and not yet drawn
        self.taken = 0
        self.pending: int | None = None
        #: how many scenarios the sampled phase drew (run or not), and how
        #: many of them it skipped as repeats of a scenario drawn before
        self.sampled_draws = 0
        self.sampled_repeats = 0
        #: the search's measured seconds a scenario, once the plan was
        #: re-fitted to its pace (see _plan.revise_plan); None before
        self.refit_seconds: float | None = None
        #: the plan's aimed scenarios (regressions and targeted), and this
        #: shard's part of them; set by _plan
        self.whole: list[Scenario] = []
        self.aimed: list[Scenario] = []
        #: the sampled stream of the whole plan (every shard draws it)
        self.stream = Stream(universe, 0)
        #: schedules past the targeted share that the plan runs for the
        #: (commit kind x fault) pairs the share does not reach; set by _plan
        self.pairs_added = 0

    def run(self) -> Draft:
        """The plan, the aimed phase, the sampled phase, the shrink phase
        (see :meth:`Engine.run <harness.session.Engine.run>`)."""
        self._plan()
        if self.queue is not None:
            self._queued()
        else:
            self._aimed()
            if self._sampling_left():
                self._sampled(first=len(self.whole))
        self._shrink()
        return self._finish()

    # -- the plan ------------------------------------------------------------

    def _plan(self) -> None:
        """The whole plan, this shard's part of it, and what of it fits the
        budget (said before the search)."""
        s, outcome = self.settings, self.outcome
        targets, added = (
            targeted_plan(self.universe, targeted_cap(s), pair_room(s)) if s.targeted else ([], 0)
        )
        self.whole = [*self.regressions, *targets]
        # A shard runs its part of the same plan (every shard computes it
        # alike); the pairs past the targeted share make it longer.
        outcome.whole_plan = s.max_examples + len(self.regressions) + added
        self.pairs_added = added
        # Hypothesis draws the whole plan's sampled stream in every shard.
        self.stream = Stream(self.universe, outcome.whole_plan - len(self.whole))
        # With a queue, the static part is only what the jobs expect to run
        # (the plan's notice and its budget estimate); the queue decides.
        self.aimed, outcome.planned = shard_plan(self.whole, outcome.whole_plan, s.shard)
        outcome.sampled_planned = max(outcome.planned - len(self.aimed), 0)
        outcome.breadth_first = True
        self._warm_up()
        cost = self.engine.scenario_cost()
        waits = fault_seconds(self.engine.adapter)
        plan_budget(
            outcome, len(self.aimed), cost, s.budget_seconds, self.log, waits, self.pairs_added
        )

    def _warm_up(self) -> None:
        """Before a measured plan: the first planned scenario's oracle (its
        fault-free run, which that scenario runs first anyway: cached, so
        it costs nothing more and changes no history), so that the estimate
        has a run that did not pay the first-use costs (see
        :func:`~._plan.scenario_cost`) -- an adapter of one workflow has
        none else."""
        if self.queue is not None:  # a job of --jobs N: the parent measured
            return
        if self.aimed and getattr(self.engine.adapter, "scenario_seconds", None) is None:
            self.engine.oracle(self.aimed[0])

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _left_for_sampling(self) -> bool:
        """Whether the targeted schedules stop here, the rest of the budget
        being sampling's (:func:`~._plan.left_for_sampling`)."""
        return left_for_sampling(self.outcome, self._elapsed(), self.settings.budget_seconds)

    def _over_budget(self) -> bool:
        """Whether the budget is spent, a search running at least one scenario."""
        return self.engine.over_budget() and self.outcome.searched > 0

    def _sampling_left(self) -> bool:
        """Whether the sampled phase runs after the aimed one. A search runs
        at least one scenario (an empty aimed phase goes on to sample one,
        whatever the budget says); a budget spent with the sampled part still
        to run is a cut (:meth:`Draft.cut_leaves_gaps` then says whether it
        leaves a gap), never a plan that ended."""
        remaining = (self.outcome.planned or 0) - self.outcome.searched
        if self.stop or remaining <= 0:
            return False
        if self._over_budget():
            self.outcome.budget_cut = True
            return False
        return True

    # -- the aimed phase: regressions, then the targeted schedules -------------

    def _aimed(self) -> None:
        """This shard's part of the aimed scenarios, in plan order, until the
        search stops, the budget is spent or what it leaves is sampling's."""
        outcome, aimed = self.outcome, self.aimed
        k, n = self.settings.shard or (1, 1)
        for j, scenario in enumerate(aimed):
            if self._over_budget():
                outcome.budget_cut = True
                break
            if self._left_for_sampling():
                outcome.budget_cut = True
                self.log(_SAMPLING_STARTS.format(len(aimed) - outcome.searched))
                break
            self._step(scenario, sampled=False, index=k - 1 + j * n)
            if self.stop:
                break
        if outcome.budget_cut:
            outcome.not_run_targeted = [sc.name for sc in aimed[outcome.searched :]]
            self._unreached(aimed[: outcome.searched])

    def _unreached(self, ran: Sequence[Scenario]) -> None:
        """The kinds of targeted schedule none of whose schedules ran."""
        outcome = self.outcome
        done = {schedule_kind(sc.name) for sc in ran}
        unrun = {schedule_kind(n) for n in outcome.not_run_targeted}
        outcome.unreached_kinds = sorted(k for k in unrun - done if k)

    # -- a job of --jobs N: the plan from the queue ----------------------------

    def _queued(self) -> None:
        """The search of one job of ``--jobs N``: the scenarios of the whole
        plan (the aimed ones, then the sampled stream) that this job takes
        from the queue, each when it is ready for one. Whichever job runs a
        scenario, it is the same scenario with the same history; a job that
        runs cheaper ones runs more, and the jobs end together.

        The budget is the run's: a job that finds it spent takes every index
        left (no job runs them; this one reports those it skipped), and one
        whose budget left fits only the sampled share skips the targeted
        schedules no job has taken yet. Afterwards the job's plan is what it
        took, run or skipped: the jobs' plans add up to the whole one."""
        outcome, whole = self.outcome, self.whole
        ran = self._queued_aimed()
        if outcome.budget_cut and outcome.not_run_targeted:
            self._unreached(ran)
        if not self.stop and self.pending is not None:
            self._sampled(first=len(whole))
        outcome.planned = self.taken
        outcome.sampled_planned = max(self.taken - len(ran), 0)
        outcome.fit = budget_fit(self.taken, self.settings.budget_seconds, outcome.scenario_seconds)

    def _queued_aimed(self) -> list[Scenario]:
        """The aimed scenarios this job takes from the queue, until the
        search stops or the queue hands out a sampled index; those it ran."""
        outcome, whole = self.outcome, self.whole
        ran: list[Scenario] = []
        while True:
            if self._over_budget():
                outcome.budget_cut = True
                self._take(whole, floor=outcome.whole_plan or 0)
                break
            if self._left_for_sampling():
                outcome.budget_cut = True
                before = len(outcome.not_run_targeted)
                self._take(whole, floor=len(whole))
                self.log(_SAMPLING_STARTS.format(len(outcome.not_run_targeted) - before))
                break
            i = self._take(whole)
            if i >= len(whole):
                break  # the sampled part's (pending), or the plan's end
            ran.append(whole[i])
            self._step(whole[i], sampled=False, index=i)
            if self.stop:
                break
        return ran

    def _take(self, aimed: Sequence[Scenario], floor: int = 0) -> int:
        """The next index of the plan from the queue (at least ``floor``:
        the ones below it that no job took are this job's to skip, named in
        ``outcome.not_run_targeted`` when targeted). An index of the
        sampled stream is kept as ``pending`` until it is drawn; one past
        the plan means the plan has run out."""
        assert self.queue is not None
        outcome = self.outcome
        plan = outcome.whole_plan or 0
        first, i = self.queue.take(floor)
        skipped = range(first, min(i, plan))
        outcome.not_run_targeted += [aimed[j].name for j in skipped if j < len(aimed)]
        self.taken += len(skipped) + (1 if i < plan else 0)
        self.pending = i if len(aimed) <= i < plan else None
        return i

    # -- the sampled phase -------------------------------------------------------

    def _mine(self, index: int, first: int) -> bool:
        """Whether this search runs the sampled scenario drawn ``index``-th,
        the plan's ``first + index``-th: its shard's (:func:`drawn_by`), or,
        with a queue, the one this job took (``pending``)."""
        if self.queue is None:
            return drawn_by(self.settings.shard, index)
        if self.pending is None:
            self._take((), floor=0)
            if self.pending is None:  # the plan has run out
                self.stop = True
                return False
        if first + index < self.pending:
            return False
        self.pending = None
        return True

    def _sampled(self, first: int = 0) -> None:
        """The sampled part of the search: generation only, never raising, so
        every property goes on being judged after a failure. The ``i``-th
        scenario drawn is the plan's ``first + i``-th (:meth:`_mine`). Once
        the search stops (its budget spent, the plan run out, every property
        failed), the draws stop too: Hypothesis is ended (:class:`Done`),
        not left to generate the rest of the stream for nothing.

        A draw whose steps repeat a scenario drawn before is not run and not
        counted (:func:`repeat`): Hypothesis draws many (about a fifth of
        a ``ci`` profile's sampled scenarios on the reference runtime: its
        first, simplest examples, and draws that differ only in choices no
        step reads), and a repeat finds nothing its first run did not."""
        outcome = self.outcome
        drawn = itertools.count()
        seen: set[str] = set()

        @hypothesis_settings(self.stream.draws, shrink=False)
        @given(self.stream.strategy())
        def probe(scenario: Scenario) -> None:
            if self.stop:
                raise Done
            if repeat(seen, scenario):
                self.sampled_repeats += 1
                reject()
            index = next(drawn)
            self.sampled_draws = index + 1
            if not self._mine(index, first):
                if self.stop:
                    raise Done
                return
            # As in the aimed phase: a search runs at least one scenario.
            if self._over_budget():
                outcome.budget_cut = True
                self.stop = True
                if self.queue is not None:  # the run's budget: no job runs the rest
                    self._take((), floor=outcome.whole_plan or 0)
                raise Done
            try:
                self._step(scenario, sampled=True, index=first + index)
            except HarnessError as exc:
                # Raised out of Hypothesis it would be taken for a failing
                # example (replayed, shrunk): stop, and raise it after.
                fatal.append(exc)
                self.stop = True
                raise Done from None
            if self.stop:
                raise Done

        fatal: list[HarnessError] = []
        self.sampled_draws = self.sampled_repeats = 0
        with own_draws(), contextlib.suppress(Done):
            seed(self.engine.seed)(probe)()
        if fatal:
            raise fatal[0]

    # -- one scenario of the plan ----------------------------------------------

    def _step(self, scenario: Scenario, *, sampled: bool, index: int) -> Example:
        """Run the plan's scenario at ``index`` (kept in its ledger line: the
        jobs of a run, or the shards of a matrix, ran the plan in some
        order, and their merge lists it in the plan's)."""
        check_interrupted()
        outcome = self.outcome
        example = self._run(scenario)
        outcome.ledger[-1]["index"] = index
        outcome.searched += 1
        outcome.sampled_searched += sampled
        pace = revise_plan(outcome, self._elapsed(), self.settings.budget_seconds, self.log)
        if pace is not None:
            self.refit_seconds = pace
        self._learn(example, sampled)
        return example

    def _learn(self, example: Example, sampled: bool) -> None:
        """What a scenario of the plan tells the search: the properties it
        failed first, and whether the search stops."""
        outcome = self.outcome
        for name in failed_properties(example):
            if name not in self.first:
                self.first[name] = (example, sampled)
        if example.failed and self.settings.stop_on_first:
            outcome.stopped_on_first = True
            self.stop = True
        if self.first and set(self.first) >= set(outcome.tallies):
            self.stop = True  # every property has failed: nothing left to learn
        if self.stop and self.queue is not None:
            # The run stops, not this job alone: no job runs the rest.
            self._take(self.whole, floor=outcome.whole_plan or 0)

    def _run(self, scenario: Scenario) -> Example:
        """Execute and account for one example, remembering which properties
        it failed (so the shrink pass replays the search without re-running)."""
        example = self.engine.execute(scenario)
        self.engine.account(self.outcome, example)
        self.known[scenario.model_dump_json()] = frozenset(failed_properties(example))
        if example.failed:
            self.failures.append(example)
        else:
            self.engine.keep_last(example)
        return example

    # -- the shrink phase, and what the search leaves ----------------------------

    def _shrink(self) -> None:
        """One counterexample per failing property, a sampled one shrunk
        (:class:`~._shrink.Shrink`)."""
        shrink = Shrink(
            self.outcome,
            self.stream,
            self.engine.seed,
            settings=self.settings,
            started=self.started,
            known=self.known,
            failures=self.failures,
            run=self._run,
            capabilities=self.engine.adapter.capabilities,
        )
        shrink.all(self.first, self.stream.draws, enabled=self.engine.shrink)

    def _finish(self) -> Draft:
        """The outcome, the folders of failing examples no counterexample
        kept deleted."""
        outcome = self.outcome
        kept = {id(ex) for ex in outcome.counterexamples.values()}
        for ex in self.failures:
            if id(ex) not in kept:
                shutil.rmtree(ex.folder, ignore_errors=True)
        outcome.seconds = time.monotonic() - self.started
        return outcome
