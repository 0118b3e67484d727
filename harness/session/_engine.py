"""The engine: execute scenarios, search, shrink, keep the evidence.

One *example* is a scenario executed in a fresh environment, its history
checked by every property against the history of the same workload run
without faults (the oracle, cached per workload; each tenant's runs in a
deployment of their own, see ``_oracle``). The search runs the targeted
schedules, then Hypothesis-sampled scenarios (swarms of fault kinds: a
stream that depends on the seed and the plan's size only, never on what
ran), judging every property over all of them, then shrinks one
counterexample per failing property. What it found is summed in an
:class:`~harness.outcome.Outcome`.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import random
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, seed, settings
from hypothesis.strategies import SearchStrategy

from .._errors import HarnessError, UsageError
from .._janitor import scratch_dir, sweep_folders
from .._settings import Settings
from .._signals import check_interrupted, shielded
from ..adapters._contract import Adapter
from ..checkers import Property, check_properties
from ..history import History
from ..model import RunSpec, Scenario, Verdict
from ..nemesis import worker_timeout
from ..outcome import Example, Outcome
from ..runner import RunResult, run_scenario
from ..scenarios import Universe, sampled_stream, schedule_kind, targeted
from ._coverage import combinations
from ._oracle import Agreement, merge_histories, tenant_parts
from ._shared import PlanQueue, SharedOracles


class _Found(Exception):
    """Raised inside the Hypothesis test to mark a failing example."""


class _Done(BaseException):
    """Raised inside the sampled phase's Hypothesis test to end the run: the
    search stopped (budget spent, plan run out, every property failed), so
    no further scenario is worth drawing. A BaseException, so that
    Hypothesis neither takes it for a failing example (replayed, shrunk)
    nor catches it: it leaves ``@given`` at once."""


#: the share of a plan kept for Hypothesis-sampled scenarios when the
#: targeted schedules alone would fill it: sampling finds what no schedule
#: aims at (issue 11 measured mistakes only the sampled phase found), so a
#: long targeted list must not crowd it out
SAMPLED_SHARE = 0.2
#: the fewest sampled draws of a plan whose stream is seeded with the
#: targeted schedules (see Engine._stream): the ci profile's 30 are
SEEDED_FROM = 30


def targeted_cap(s: Settings) -> int:
    """How many targeted schedules a plan of ``s.max_examples`` runs: all
    but :data:`SAMPLED_SHARE` of it (rounded down, so a plan of 1-4 is all
    targeted)."""
    return s.max_examples - int(s.max_examples * SAMPLED_SHARE)


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
#: after a kill) are not in it: an adapter that has them declares
#: ``scenario_seconds``
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


class Engine:
    """Runs scenarios against one adapter and searches for failures.

    Its jobs, in order of use: :meth:`oracle` (the fault-free history of a
    workload, cached), :meth:`execute` (one scenario, checked), :meth:`run`
    (the search: targeted, sampled, shrunk), :meth:`account` (an example into
    the outcome, with progress). Examples live in a scratch folder (swept by
    the janitor if the process dies) until :meth:`close`.
    """

    def __init__(
        self,
        adapter: Adapter,
        settings: Settings,
        *,
        workdir: Path | None = None,
        progress: Callable[[Outcome], None] | None = None,
        shrink: bool = True,
        log: Callable[[str], None] | None = None,
        shared: SharedOracles | None = None,
        queue: PlanQueue | None = None,
        properties: Sequence[Property] = (),
    ) -> None:
        self.adapter = adapter
        #: the user's invariants, judged after the built-in properties
        self.properties = tuple(properties)
        #: fault-free histories shared with the other jobs of the run (--jobs N)
        self._shared = shared
        #: the plan's scenarios handed out to the jobs of the run as they
        #: ask (--jobs N), instead of the static split of ``shard``
        self._queue = queue
        #: with a queue: the plan indices this engine took, run or not, and
        #: the sampled one taken and not yet drawn
        self._taken = 0
        self._pending: int | None = None
        #: the targeted part of the plan a queued job takes from
        self._aimed: Sequence[Scenario] = ()
        #: receives the plan's one-line notices (what fits the budget)
        self._log = log or (lambda _line: None)
        #: seconds of every fault-free run so far (the probe's first): what
        #: a scenario costs, when the adapter does not say (see plan_budget)
        self.fault_free_seconds: list[float] = []
        #: the search's measured seconds a scenario, once REFIT_AFTER ran
        #: (see _refit); None before
        self.refit_seconds: float | None = None
        #: False: stop at the first failing example (the detection benchmark)
        self.shrink = shrink
        self.settings = settings
        self._own_workdir = workdir is None
        if workdir is None:
            sweep_folders()  # what harness processes killed before us left behind
        self.workdir = workdir or scratch_dir()
        self._oracles: dict[str, Path] = {}
        #: whether each workflow's fault-free runs agree (see _oracle.Agreement)
        self.agreement = Agreement(settings.determinism_runs, log=self._log)
        #: one tenant's fault-free runs, by what runs (shared by workloads)
        self._tenant_oracles: dict[str, Path] = {}
        self._n = 0
        self._progress = progress
        self.last_example: Example | None = None
        # Every run has a seed, so every run can be repeated with --seed. A
        # derandomized profile (ci) uses a fixed one unless told otherwise.
        if settings.seed is not None:
            self.seed = settings.seed
        elif settings.derandomize:
            self.seed = 0
        else:
            self.seed = random.SystemRandom().randrange(2**32)
        self.failures: list[Example] = []
        #: the outcome being filled (for a partial report if interrupted)
        self.outcome: Outcome | None = None
        self._started = time.monotonic()
        self._first: dict[str, tuple[Example, bool]] = {}
        self._known: dict[str, frozenset[str]] = {}
        self._stop = False
        #: when shrinking must stop (set as it begins: see shrink_deadline)
        self._shrink_deadline: float | None = None
        #: how many scenarios the last sampled phase drew (run or not)
        self.sampled_draws = 0
        #: sampled draws skipped as repeats of a scenario drawn before
        self.sampled_repeats = 0
        #: the whole plan's sampled draws (see _stream)
        self._draws = 0
        #: the universe and its targeted schedules, the sampled stream's seeds
        self._corpus: tuple[Universe, tuple[Scenario, ...]] | None = None

    # -- one example ---------------------------------------------------------

    def oracle(self, scenario: Scenario) -> Path:
        """History of the scenario's workload without faults (cached).

        Each tenant's runs run in a deployment of their own, and the
        histories are merged into one (:func:`merge_histories`): a run's
        fault-free result then depends on its own tenant's data only, so a
        runtime that lets one tenant's data change another's result differs
        from its oracle instead of agreeing with it.
        """
        free = scenario.fault_free(self._migrated_input)
        key = _key(free)
        if key not in self._oracles:
            parts = tenant_parts(free)
            folder = self.workdir / f"oracle-{len(self._oracles)}"
            if len(parts) == 1:
                self._oracles[key] = self._run_oracle(free, folder)
            else:
                paths = [(t, self._tenant_oracle(part)) for t, part in parts]
                self._oracles[key] = merge_histories(paths, folder / "oracle.jsonl")
        return self._oracles[key]

    def _tenant_oracle(self, part: Scenario) -> Path:
        key = _key(part)
        if key not in self._tenant_oracles:
            folder = self.workdir / f"tenant-oracle-{len(self._tenant_oracles)}"
            self._tenant_oracles[key] = self._run_oracle(part, folder)
        return self._tenant_oracles[key]

    def _run_oracle(self, free: Scenario, folder: Path) -> Path:
        key = _key(free)
        kept = None if self._shared is None else self._shared.get(key)
        if kept is not None:
            return kept  # another job (or the parent's probe) ran it

        def again(k: int) -> Path:
            # Not a sample of what a scenario costs: the plan's estimate
            # stays what it was (see scenario_cost).
            return self._run_free(free, folder / f"again-{k}").history_path

        result = self._run_free(free, folder)
        self.fault_free_seconds.append(result.seconds)
        path = self.agreement.settle(free, result.history_path, again)
        if self._shared is not None:
            self._shared.put(key, path)
        return path

    def _run_free(self, free: Scenario, folder: Path) -> RunResult:
        return run_scenario(
            self.adapter,
            free,
            folder,
            history_name="oracle.jsonl",
            worker_timeout=self._worker_timeout(),
        )

    def _migrated_input(self, run: RunSpec) -> dict[str, Any]:
        """A run an older release accepted, as the oracle submits it to today's
        code: the adapter's optional ``migrated_input``, else its input as is."""
        hook = getattr(self.adapter, "migrated_input", None)
        if hook is None or run.code_version is None:
            return dict(run.input)
        return dict(hook(run.workflow, run.input, run.code_version))

    def execute(self, scenario: Scenario, folder: Path | None = None) -> Example:
        self._n += 1
        folder = folder or self.workdir / f"example-{self._n}"
        oracle_path = self.oracle(scenario)
        result = run_scenario(self.adapter, scenario, folder, worker_timeout=self._worker_timeout())
        shutil.copyfile(oracle_path, folder / "oracle.jsonl")
        (folder / "scenario.json").write_text(scenario.model_dump_json(indent=2))
        history = History.load(result.history_path)
        oracle = History.load(oracle_path)
        results = check_properties(history, oracle, self.properties)
        return Example(
            scenario, results, folder, result.coverage, result.seconds, combinations(history)
        )

    # -- the search ------------------------------------------------------------

    def new_outcome(self, universe: Universe) -> Outcome:
        self.outcome = Outcome(
            adapter=self.adapter.name,
            adapter_options=self.adapter.describe(),
            capabilities=sorted(c.value for c in self.adapter.capabilities),
            settings=self.settings,
            seed=self.seed,
            crash_points=list(universe.crash_points),
            families=list(universe.enabled()),
            user_properties={p.name: property_info(p) for p in self.properties},
        )
        return self.outcome

    def partial(self, signal_name: str) -> Outcome | None:
        """What the search found before ``signal_name`` stopped it: the first
        failing example per property, unshrunk (None: no search had begun)."""
        outcome = self.outcome
        if outcome is None:
            return None
        outcome.interrupted = signal_name
        for name, (example, _) in self._first.items():
            outcome.counterexamples.setdefault(name, example)
        outcome.failures = list({id(e): e for e in outcome.counterexamples.values()}.values())
        outcome.failure = outcome.failures[0] if outcome.failures else None
        outcome.seconds = time.monotonic() - outcome.started
        return outcome

    def keep_last(self, example: Example) -> None:
        """Keep ``example``'s folder as the run's sample history; drop the previous."""
        previous = self.last_example
        if previous is not None and previous is not example:
            shutil.rmtree(previous.folder, ignore_errors=True)
        self.last_example = example

    def run(self, universe: Universe, regressions: Sequence[Scenario] = ()) -> Outcome:
        """Search: the targeted schedules, then Hypothesis-sampled scenarios,
        judging every property over all of them; then shrink one
        counterexample per failing property.

        The search goes on after a failure until every property has failed,
        the plan ends or the budget does (``stop_on_first`` in the settings:
        at the first failure). A property first failed by a targeted
        schedule keeps that schedule (one run, one fault: nothing to
        shrink); one first failed by a sampled scenario is shrunk by
        Hypothesis, replaying the same search from its seed (the scenarios
        before it come from a cache, not run again).

        ``regressions`` (scenario files: counterexamples kept from earlier
        runs) run first, each once, on top of the plan.

        With ``shard`` (K, N) in the settings, only shard K's part of that
        plan runs (:func:`shard_plan`): of the sampled stream, which every
        shard draws alike, the scenarios :func:`drawn_by` gives it. With a
        :class:`PlanQueue` as well (a job of ``--jobs N``), the part is not
        fixed in advance: each scenario of the plan goes to the job that
        takes it first (:meth:`_search_queued`), the sampled ones by their
        index in the one stream every job draws.
        """
        s = self.settings
        outcome = self.new_outcome(universe)
        started = time.monotonic()
        self._started = started
        whole = [*regressions, *(targeted(universe) if s.targeted else [])[: targeted_cap(s)]]
        # A shard runs its part of the same plan (every shard computes it alike).
        outcome.whole_plan = s.max_examples + len(regressions)
        # Hypothesis draws the whole plan's sampled stream in every shard.
        draws = outcome.whole_plan - len(whole)
        self._draws = draws
        # With a queue, the static part is only what the jobs expect to run
        # (the plan's notice and its budget estimate); the queue decides.
        aimed, outcome.planned = shard_plan(whole, outcome.whole_plan, s.shard)
        outcome.sampled_planned = max(outcome.planned - len(aimed), 0)
        outcome.breadth_first = True
        self._warm_up(aimed)
        self._plan_budget(outcome, len(aimed))
        #: per property, the first failing example and whether it was sampled
        self._first = {}
        self._known = {}
        self._stop = False
        self._shrink_deadline = None
        self._taken, self._pending = 0, None

        if self._queue is not None:
            self._search_queued(outcome, universe, whole, draws)
            self._shrink_all(outcome, universe, draws)
            return self._finish(outcome, started)
        k, n = s.shard or (1, 1)
        for j, scenario in enumerate(aimed):
            if self.over_budget() and outcome.searched > 0:
                outcome.budget_cut = True
                break
            if self._left_for_sampling(outcome):
                outcome.budget_cut = True
                self._log(
                    f"harness: the budget left fits about the sampled share of the plan: "
                    f"{len(aimed) - outcome.searched} targeted schedules will not run, "
                    "sampling starts now (the report will say what did not run)"
                )
                break
            self._search_step(outcome, scenario, sampled=False, index=k - 1 + j * n)
            if self._stop:
                break
        if outcome.budget_cut:
            outcome.not_run_targeted = [sc.name for sc in aimed[outcome.searched :]]
            ran = {schedule_kind(sc.name) for sc in aimed[: outcome.searched]}
            unrun = {schedule_kind(n) for n in outcome.not_run_targeted}
            outcome.unreached_kinds = sorted(k for k in unrun - ran if k)
        remaining = outcome.planned - outcome.searched
        if not self._stop and not self.over_budget() and remaining > 0:
            self._sample(outcome, universe, draws, first=len(whole))
        self._shrink_all(outcome, universe, draws)
        return self._finish(outcome, started)

    def _search_queued(
        self, outcome: Outcome, universe: Universe, aimed: Sequence[Scenario], draws: int
    ) -> None:
        """The search of one job of ``--jobs N``: the scenarios of the whole
        plan (``aimed``, then the sampled stream) that this job takes from
        the queue, each when it is ready for one. Whichever job runs a
        scenario, it is the same scenario with the same history; a job that
        runs cheaper ones runs more, and the jobs end together.

        The budget is the run's: a job that finds it spent takes every index
        left (no job runs them; this one reports those it skipped), and one
        whose budget left fits only the sampled share skips the targeted
        schedules no job has taken yet. Afterwards the job's plan is what it
        took, run or skipped: the jobs' plans add up to the whole one."""
        ran: list[Scenario] = []
        self._aimed = aimed
        while True:
            if self.over_budget() and outcome.searched > 0:
                outcome.budget_cut = True
                self._take(outcome, aimed, floor=outcome.whole_plan or 0)
                break
            if self._left_for_sampling(outcome):
                outcome.budget_cut = True
                before = len(outcome.not_run_targeted)
                self._take(outcome, aimed, floor=len(aimed))
                self._log(
                    f"harness: the budget left fits about the sampled share of the plan: "
                    f"{len(outcome.not_run_targeted) - before} targeted schedules will not run, "
                    "sampling starts now (the report will say what did not run)"
                )
                break
            i = self._take(outcome, aimed)
            if i >= len(aimed):
                break  # the sampled part's (pending), or the plan's end
            ran.append(aimed[i])
            self._search_step(outcome, aimed[i], sampled=False, index=i)
            if self._stop:
                break
        if outcome.budget_cut and outcome.not_run_targeted:
            done = {schedule_kind(sc.name) for sc in ran}
            unrun = {schedule_kind(n) for n in outcome.not_run_targeted}
            outcome.unreached_kinds = sorted(k for k in unrun - done if k)
        if not self._stop and self._pending is not None:
            self._sample(outcome, universe, draws, first=len(aimed))
        outcome.planned = self._taken
        outcome.sampled_planned = max(self._taken - len(ran), 0)
        outcome.fit = budget_fit(
            self._taken, self.settings.budget_seconds, outcome.scenario_seconds
        )

    def _take(self, outcome: Outcome, aimed: Sequence[Scenario], floor: int = 0) -> int:
        """The next index of the plan from the queue (at least ``floor``:
        the ones below it that no job took are this job's to skip, named in
        ``outcome.not_run_targeted`` when targeted). An index of the
        sampled stream is kept as ``_pending`` until it is drawn; one past
        the plan means the plan has run out."""
        assert self._queue is not None
        plan = outcome.whole_plan or 0
        first, i = self._queue.take(floor)
        skipped = range(first, min(i, plan))
        outcome.not_run_targeted += [aimed[j].name for j in skipped if j < len(aimed)]
        self._taken += len(skipped) + (1 if i < plan else 0)
        self._pending = i if len(aimed) <= i < plan else None
        return i

    def scenario_cost(self) -> tuple[float | None, str]:
        """What one scenario costs in real time, about, and how that is
        known: the adapter's ``scenario_seconds`` (``declared``), else
        :data:`MEASURED_RUNS` times the median fault-free run so far
        (``measured``), the first run of all left out when there are others
        (it pays the first-use costs: the fork server's start, first
        imports), else ``(None, "unknown")``."""
        declared = getattr(self.adapter, "scenario_seconds", None)
        if declared is not None:
            if (
                isinstance(declared, bool)
                or not isinstance(declared, (int, float))
                or not math.isfinite(declared)
                or declared < 0
            ):
                raise UsageError(
                    f"adapter {self.adapter.name!r} declares scenario_seconds={declared!r}: "
                    "it must be the real seconds one scenario takes, a number >= 0 (say "
                    "scenario_seconds = 3.5), or left out to have the harness measure it"
                )
            return float(declared), "declared"
        if self.fault_free_seconds:
            warm = self.fault_free_seconds[1:] or self.fault_free_seconds
            return MEASURED_RUNS * statistics.median(warm), "measured"
        return None, "unknown"

    def _warm_up(self, aimed: Sequence[Scenario]) -> None:
        """Before a measured plan: the first planned scenario's oracle (its
        fault-free run, which that scenario runs first anyway: cached, so
        it costs nothing more and changes no history), so that the estimate
        has a run that did not pay the first-use costs (see
        :meth:`scenario_cost`) -- an adapter of one workflow has none else."""
        if self._queue is not None:  # a job of --jobs N: the parent measured
            return
        if aimed and getattr(self.adapter, "scenario_seconds", None) is None:
            self.oracle(aimed[0])

    def _plan_budget(self, outcome: Outcome, aimed: int) -> None:
        """Say before the search how many planned scenarios fit in the budget
        (kept in the outcome, for the report), and what to do if not all do."""
        budget = self.settings.budget_seconds
        planned = outcome.planned or 0
        cost, source = self.scenario_cost()
        outcome.scenario_seconds, outcome.scenario_cost = cost, source
        outcome.fit = budget_fit(planned, budget, cost)
        sampled = max(planned - aimed, 0)
        head = f"harness: plan: {planned} scenarios ({aimed} targeted, {sampled} sampled)"
        if cost is None or outcome.fit is None:
            self._log(f"{head}; the {budget:g} s budget may cut it short (cost not known)")
            return
        how = (
            "declared by the adapter"
            if source == "declared"
            else f"measured: {MEASURED_RUNS:g} x the median fault-free run"
        )
        at = f"at about {cost:.2g} s a scenario ({how})"
        if outcome.fit >= planned:
            self._log(f"{head}; {at}, all fit in the {budget:g} s budget")
            return
        self._log(
            f"{head}; {at}, about {outcome.fit} fit in the {budget:g} s budget: the other "
            f"{planned - outcome.fit} will not run, and the report will say which. Every "
            "kind of targeted schedule comes once before any comes twice, and about "
            f"{SAMPLED_SHARE:.0%} of what fits is kept for sampling; a kind that never runs "
            "makes the run inconclusive. "
            f"To run them all: --budget {math.ceil(planned * cost)}"
        )

    def _left_for_sampling(self, outcome: Outcome) -> bool:
        """Whether the targeted schedules must stop so that sampling gets its
        share: at the pace so far (the declared or measured cost until
        :data:`REVISE_AFTER` scenarios ran), the scenarios the rest of the
        budget fits are no more than :data:`SAMPLED_SHARE` of all that fit.
        A budget too short for the whole plan then still samples (the
        mistakes only sampling finds), and the targeted schedules it cuts are
        the later rounds: every kind comes once before any comes twice."""
        if outcome.sampled_planned <= 0 or outcome.planned is None:
            return False
        elapsed = time.monotonic() - self._started
        if outcome.searched >= self._refit_after(outcome):
            pace = elapsed / outcome.searched
        else:
            pace = outcome.scenario_seconds or 0.0
        if pace <= 0:
            return False
        left = max(self.settings.budget_seconds - elapsed, 0.0) / pace
        fit = outcome.searched + left
        reserve = min(outcome.sampled_planned, max(1, int(fit * SAMPLED_SHARE)))
        return left <= reserve

    @staticmethod
    def _refit_after(outcome: Outcome) -> int:
        """After how many scenarios the search's pace replaces the plan's
        estimate: :data:`REFIT_AFTER` for a measured one, :data:`REVISE_AFTER`
        for a declared one."""
        return REFIT_AFTER if outcome.scenario_cost == "measured" else REVISE_AFTER

    def _revise_plan(self, outcome: Outcome) -> None:
        """Once the search's pace replaces the plan's estimate
        (:meth:`_refit_after`): keep it (``refit_seconds``; the sampling
        reserve follows it, :meth:`_left_for_sampling`) and, if the
        scenarios ran slower than planned, say how many now fit (once)."""
        if outcome.searched != self._refit_after(outcome) or outcome.planned is None:
            return
        pace = (time.monotonic() - self._started) / outcome.searched
        self.refit_seconds = pace
        fit = budget_fit(outcome.planned, self.settings.budget_seconds, pace)
        if fit is not None and fit < outcome.planned and fit < (outcome.fit or 0) * 0.9:
            self._log(
                f"harness: the first {outcome.searched} scenarios took {pace:.2g} s each: "
                f"about {fit} of the {outcome.planned} planned fit in the "
                f"{self.settings.budget_seconds:g} s budget (to run them all: --budget "
                f"{math.ceil(outcome.planned * pace)})"
            )
        elif fit is not None and outcome.fit is not None and fit > outcome.fit * 1.5:
            self._log(
                f"harness: the first {outcome.searched} scenarios took {pace:.2g} s each, "
                "faster than planned (the plan's fault-free runs paid first-use costs): "
                + (
                    f"all {outcome.planned} planned fit"
                    if fit >= outcome.planned
                    else f"about {fit} of the {outcome.planned} planned fit"
                )
                + f" in the {self.settings.budget_seconds:g} s budget"
            )

    def _worker_timeout(self) -> float:
        return worker_timeout(self.settings.budget_seconds - (time.monotonic() - self._started))

    def over_budget(self) -> bool:
        """Whether the run has spent its --budget (counted from the engine's start)."""
        return time.monotonic() - self._started > self.settings.budget_seconds

    def _hypothesis_settings(self, max_examples: int, shrink: bool) -> settings:
        # No hypothesis.target() either (issue 15): even without Phase.target
        # its scores decide which of Hypothesis's mutations are kept
        # (generate_mutations_from keeps one only if no score drops), so the
        # sampled stream would depend on what each scenario did, and a shard
        # (a job of --jobs N) that runs only part of it could not draw the
        # stream every N shares. Before that, target() only recorded (Hypothesis's
        # statistics). With it, past half the examples Hypothesis hill-climbs
        # from the best-scoring example of each label, mutating its choices:
        # measured on the reference runtime (ci, --no-targeted, seeds 0-2) it
        # reached fewer combinations (84/85/69 against 91/115/98) and fewer
        # distinct scenarios (110/93/88 against 114/115/121), so it is off.
        # The shrink pass must replay the search's phases to reach its
        # examples: keep the two in step if this changes.
        phases = (Phase.generate,)
        return settings(
            max_examples=max_examples,
            derandomize=False,
            database=None,
            deadline=None,
            report_multiple_bugs=False,
            verbosity=Verbosity.quiet,
            phases=(*phases, Phase.shrink) if shrink else phases,
            suppress_health_check=list(HealthCheck),
        )

    def _stream(self, universe: Universe, draws: int) -> SearchStrategy[Scenario]:
        """The sampled stream (:func:`~harness.scenarios.sampled_stream`):
        swarm scenarios, and every targeted schedule of ``universe`` as a
        seed corpus (the whole list, not the plan's head), made once. A plan
        that samples fewer than :data:`SEEDED_FROM` scenarios (``draws``, the
        whole plan's: every shard knows it) samples swarms only: a few
        draws are worth most as the widest mix of families, the targeted
        head having just run the seeds."""
        if draws < SEEDED_FROM:
            return sampled_stream(universe, ())
        if self._corpus is None or self._corpus[0] is not universe:
            self._corpus = (universe, tuple(targeted(universe)))
        return sampled_stream(universe, self._corpus[1])

    def _sample(self, outcome: Outcome, universe: Universe, remaining: int, first: int = 0) -> None:
        """The sampled part of the search: generation only, never raising, so
        every property goes on being judged after a failure. The ``i``-th
        scenario drawn is the plan's ``first + i``-th; with a queue, it runs
        if this job took that index (``_pending``). Once the search stops
        (its budget spent, the plan run out, every property failed), the
        draws stop too: Hypothesis is ended (:class:`_Done`), not left to
        generate the rest of ``remaining`` for nothing.

        A draw whose steps repeat a scenario drawn before is not run and not
        counted (:func:`_repeat`): Hypothesis draws many (about a fifth of
        a ``ci`` profile's sampled scenarios on the reference runtime: its
        first, simplest examples, and draws that differ only in choices no
        step reads), and a repeat finds nothing its first run did not."""

        drawn = itertools.count()
        seen: set[str] = set()

        def mine(index: int) -> bool:
            if self._queue is None:
                return drawn_by(self.settings.shard, index)
            if self._pending is None:
                self._take(outcome, (), floor=0)
                if self._pending is None:  # the plan has run out
                    self._stop = True
                    return False
            if first + index < self._pending:
                return False
            self._pending = None
            return True

        @self._hypothesis_settings(remaining, shrink=False)
        @given(self._stream(universe, self._draws))
        def probe(scenario: Scenario) -> None:
            if self._stop:
                raise _Done
            if _repeat(seen, scenario):
                self.sampled_repeats += 1
                reject()
            index = next(drawn)
            self.sampled_draws = index + 1
            if not mine(index):
                if self._stop:
                    raise _Done
                return
            # As in the targeted loop: a search runs at least one scenario.
            if self.over_budget() and outcome.searched > 0:
                outcome.budget_cut = True
                self._stop = True
                if self._queue is not None:  # the run's budget: no job runs the rest
                    self._take(outcome, (), floor=outcome.whole_plan or 0)
                raise _Done
            try:
                self._search_step(outcome, scenario, sampled=True, index=first + index)
            except HarnessError as exc:
                # Raised out of Hypothesis it would be taken for a failing
                # example (replayed, shrunk): stop, and raise it after.
                fatal.append(exc)
                self._stop = True
                raise _Done from None
            if self._stop:
                raise _Done

        fatal: list[HarnessError] = []
        self.sampled_draws = self.sampled_repeats = 0
        with contextlib.suppress(_Done):
            seed(self.seed)(probe)()
        if fatal:
            raise fatal[0]

    def _search_step(
        self, outcome: Outcome, scenario: Scenario, *, sampled: bool, index: int
    ) -> Example:
        """Run the plan's scenario at ``index`` (kept in its ledger line: the
        jobs of a run, or the shards of a matrix, ran the plan in some
        order, and their merge lists it in the plan's)."""
        check_interrupted()
        example = self._run_cached(outcome, scenario)
        outcome.ledger[-1]["index"] = index
        outcome.searched += 1
        outcome.sampled_searched += sampled
        self._revise_plan(outcome)
        for name in self._failed(example):
            if name not in self._first:
                self._first[name] = (example, sampled)
        if example.failed and self.settings.stop_on_first:
            outcome.stopped_on_first = True
            self._stop = True
        if self._first and set(self._first) >= set(outcome.tallies):
            self._stop = True  # every property has failed: nothing left to learn
        if self._stop and self._queue is not None:
            # The run stops, not this job alone: no job runs the rest.
            self._take(outcome, self._aimed, floor=outcome.whole_plan or 0)
        return example

    @staticmethod
    def _failed(example: Example) -> list[str]:
        return [r.name for r in example.results if r.verdict is Verdict.FAIL]

    def _run_cached(self, outcome: Outcome, scenario: Scenario) -> Example:
        """Execute and account for one example, remembering which properties
        it failed (so the shrink pass replays the search without re-running)."""
        example = self.execute(scenario)
        self.account(outcome, example)
        self._known[scenario.model_dump_json()] = frozenset(self._failed(example))
        if example.failed:
            self.failures.append(example)
        else:
            self.keep_last(example)
        return example

    def _shrink_all(self, outcome: Outcome, universe: Universe, sampled_max: int) -> None:
        """One counterexample per failing property, in the order found; a
        counterexample that fails a later property too serves it as well."""
        for name, (first, sampled) in self._first.items():
            shared = next(
                (ex for ex in outcome.counterexamples.values() if name in self._failed(ex)),
                None,
            )
            if shared is not None:
                outcome.counterexamples[name] = shared
                continue
            best = first
            if sampled and self.shrink:
                if self._shrink_deadline is None:
                    self._shrink_deadline = shrink_deadline(
                        time.monotonic(), self._started, self.settings
                    )
                if self._shrink_over():
                    outcome.not_fully_shrunk.append(name)
                else:
                    best = self._shrink(outcome, universe, name, sampled_max) or first
            outcome.counterexamples[name] = best

    def _shrink_over(self) -> bool:
        """Whether shrinking has spent its own budget (see :func:`shrink_deadline`)."""
        return self._shrink_deadline is not None and time.monotonic() >= self._shrink_deadline

    def _shrink(
        self, outcome: Outcome, universe: Universe, name: str, max_examples: int
    ) -> Example | None:
        """Replay the sampled search from its seed up to the first scenario
        that fails ``name`` (every earlier one is known: nothing re-runs),
        then let Hypothesis shrink it. The smallest failing example seen."""
        best: list[Example] = []
        state = {"found": False, "cut": False}
        seen: set[str] = set()

        @self._hypothesis_settings(max_examples, shrink=True)
        @given(self._stream(universe, self._draws))
        def probe(scenario: Scenario) -> None:
            # Replaying the search, skip its repeats as it did (the same
            # draws follow); once shrinking, every candidate is judged.
            if not state["found"] and _repeat(seen, scenario):
                reject()
            key = scenario.model_dump_json()
            known = self._known.get(key)
            if known is None:
                # Before the first failure is replayed, a scenario the search
                # never ran means the replay diverged: run nothing new.
                if not state["found"]:
                    return
                if self._shrink_over():
                    state["cut"] = True
                    return
                example = self._run_cached(outcome, scenario)
                known = self._known[key]
                if name in known and (not best or example.size < best[0].size):
                    best[:] = [example]
            elif name in known:
                # Run by the search already: the first failure being replayed,
                # or a smaller failing one the search drew later, that the
                # shrinker has now reached.
                ran = [e for e in self.failures if e.scenario == scenario][:1]
                if ran and (not best or ran[0].size < best[0].size):
                    best[:] = ran
            if name in known:
                state["found"] = True
                raise _Found

        try:
            seed(self.seed)(probe)()
        except _Found:
            pass
        except HarnessError:
            raise  # an adapter error, an interruption: not Hypothesis's to absorb
        except Exception as exc:  # Flaky and friends: our own record still holds
            outcome.counts["hypothesis_" + type(exc).__name__] += 1
        if state["cut"]:
            outcome.not_fully_shrunk.append(name)
        return best[0] if best else None

    def _finish(self, outcome: Outcome, started: float) -> Outcome:
        kept = {id(ex) for ex in outcome.counterexamples.values()}
        for ex in self.failures:
            if id(ex) not in kept:
                shutil.rmtree(ex.folder, ignore_errors=True)
        outcome.failures = list({id(ex): ex for ex in outcome.counterexamples.values()}.values())
        if outcome.failures:
            outcome.failure = outcome.failures[0]
        outcome.seconds = time.monotonic() - started
        return outcome

    def account(self, outcome: Outcome, example: Example) -> None:
        """Add ``example`` to ``outcome``, then report progress."""
        outcome.account(example)
        if self._progress is not None:
            self._progress(outcome)

    def close(self) -> None:
        if self._own_workdir:
            with shielded():
                shutil.rmtree(self.workdir, ignore_errors=True)


def property_info(p: Property) -> dict[str, Any]:
    """What an outcome (and its report) keeps of a user's property."""
    return {"spec": p.spec, "doc": p.doc, "needs": list(p.needs), "family": p.family}


def _repeat(seen: set[str], scenario: Scenario) -> bool:
    """Whether ``scenario``'s steps were drawn before (its name, the swarm it
    was drawn from, aside); remembers them. A pure function of the draws so
    far, so every shard (and the shrink pass's replay) skips alike."""
    key = _key(scenario)
    if key in seen:
        return True
    seen.add(key)
    return False


def _key(scenario: Scenario) -> str:
    """A fault-free scenario's cache key: what runs (submissions and seed),
    not its name, so the targeted schedules of one workflow, and the shrinks
    of one example, share one fault-free run."""
    return scenario.model_copy(update={"name": ""}).model_dump_json()
