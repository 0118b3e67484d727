"""The engine: execute scenarios, search, shrink, keep the evidence.

One *example* is a scenario executed in a fresh environment, its history
checked by every property against the history of the same workload run
without faults (the oracle, cached per workload; each tenant's runs in a
deployment of their own, see ``_oracle``): the :mod:`._executor`'s job.
The search (:mod:`._search`, one per run) runs the targeted schedules, then
Hypothesis-sampled scenarios (swarms of fault kinds: a stream that depends
on the seed and the plan's size only, never on what ran; :mod:`._draws`),
judging every property over all of them, then shrinks one counterexample
per failing property (:mod:`._shrink`); its plan and budget are
:mod:`._plan`'s arithmetic. What it found is summed in an
:class:`~harness.outcome.Outcome`.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._janitor import scratch_dir, sweep_folders
from .._settings import Settings
from .._signals import shielded
from ..adapters._contract import Adapter
from ..checkers import Property
from ..model import Scenario
from ..outcome import Draft, Example, Outcome
from ..scenarios import Universe
from ._executor import Executor
from ._oracle import Agreement
from ._plan import scenario_cost
from ._search import Search
from ._shared import PlanQueue, SharedOracles


class Engine:
    """Runs scenarios against one adapter and searches for failures.

    Its jobs, in order of use: :meth:`oracle` (the fault-free history of a
    workload, cached), :meth:`execute` (one scenario, checked: the
    :class:`~._executor.Executor`'s), :meth:`run` (the search: targeted,
    sampled, shrunk; a :class:`~._search.Search` of its own each time),
    :meth:`account` (an example into the outcome, with progress). Examples
    live in a scratch folder (swept by the janitor if the process dies)
    until :meth:`close`.
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
        #: the plan's scenarios handed out to the jobs of the run as they
        #: ask (--jobs N), instead of the static split of ``shard``
        self._queue = queue
        #: receives the plan's one-line notices (what fits the budget)
        self._log = log or (lambda _line: None)
        #: False: stop at the first failing example (the detection benchmark)
        self.shrink = shrink
        self.settings = settings
        self._own_workdir = workdir is None
        if workdir is None:
            sweep_folders()  # what harness processes killed before us left behind
        self.workdir = workdir or scratch_dir()
        self.executor = Executor(
            adapter,
            self.workdir,
            agreement=Agreement(settings.determinism_runs, log=self._log),
            budget_left=self._budget_left,
            shared=shared,
            properties=self.properties,
        )
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
        #: the outcome being filled (for a partial report if interrupted)
        self.outcome: Draft | None = None
        #: the search of the last (or current) :meth:`run`; None before
        self.search: Search | None = None
        self._started = time.monotonic()

    # -- one example ---------------------------------------------------------

    @property
    def agreement(self) -> Agreement:
        """Whether each workflow's fault-free runs agree (see _oracle.Agreement)."""
        return self.executor.agreement

    @property
    def fault_free_seconds(self) -> list[float]:
        """Seconds of every fault-free run so far (the probe's first): what
        a scenario costs, when the adapter does not say (see :meth:`scenario_cost`)."""
        return self.executor.fault_free_seconds

    @fault_free_seconds.setter
    def fault_free_seconds(self, seconds: list[float]) -> None:
        self.executor.fault_free_seconds = seconds

    def oracle(self, scenario: Scenario) -> Path:
        """History of the scenario's workload without faults (cached; see
        :meth:`Executor.oracle <._executor.Executor.oracle>`)."""
        return self.executor.oracle(scenario)

    def execute(self, scenario: Scenario, folder: Path | None = None) -> Example:
        """One scenario, run in ``folder`` (else a new one of the workdir)
        and judged by every property."""
        return self.executor.execute(scenario, folder)

    def _budget_left(self) -> float:
        return self.settings.budget_seconds - (time.monotonic() - self._started)

    # -- the search ------------------------------------------------------------

    def new_outcome(self, universe: Universe) -> Draft:
        self.outcome = Draft(
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
        first = self.search.first if self.search is not None else {}
        for name, (example, _) in first.items():
            outcome.counterexamples.setdefault(name, example)
        outcome.seconds = time.monotonic() - outcome.started
        return outcome.freeze()

    def keep_last(self, example: Example) -> None:
        """Keep ``example``'s folder as the run's sample history; drop the previous."""
        previous = self.last_example
        if previous is not None and previous is not example:
            shutil.rmtree(previous.folder, ignore_errors=True)
        self.last_example = example

    def run(
        self,
        universe: Universe,
        regressions: Sequence[Scenario] = (),
        *,
        commit_pairs: Sequence[dict[str, str | None]] = (),
    ) -> Outcome:
        """Search: the targeted schedules, then Hypothesis-sampled scenarios,
        judging every property over all of them; then shrink one
        counterexample per failing property.

        The search goes on after a failure until every property has failed,
        the plan ends or the budget does (``stop_on_first`` in the settings:
        at the first failure). A property first failed by a sampled
        scenario is shrunk by Hypothesis, replaying the same search from its
        seed (the scenarios before it come from a cache, not run again);
        then every counterexample, a targeted schedule's too, loses each
        step the same failure does not need (:mod:`._drop`).

        ``regressions`` (scenario files: counterexamples kept from earlier
        runs) run first, each once, on top of the plan.

        With ``shard`` (K, N) in the settings, only shard K's part of that
        plan runs (:func:`~._plan.shard_plan`): of the sampled stream, which
        every shard draws alike, the scenarios :func:`~._plan.drawn_by`
        gives it. With a :class:`PlanQueue` as well (a job of ``--jobs
        N``), the part is not fixed in advance: each scenario of the plan
        goes to the job that takes it first, the sampled ones by their index
        in the one stream every job draws.

        Each run is a :class:`~._search.Search` of its own (its phases are
        its methods): nothing of one run's search carries over to the next.
        ``commit_pairs`` (the targeted plan's commit-fault pairs) go into
        the outcome as they are.
        """
        self._started = time.monotonic()
        self.search = Search(
            self,
            universe,
            regressions,
            started=self._started,
            queue=self._queue,
            log=self._log,
        )
        draft = self.search.run()
        draft.commit_pairs = list(commit_pairs)
        return draft.freeze()

    @property
    def sampled_draws(self) -> int:
        """How many scenarios the last sampled phase drew (run or not)."""
        return 0 if self.search is None else self.search.sampled_draws

    @property
    def sampled_repeats(self) -> int:
        """Sampled draws skipped as repeats of a scenario drawn before."""
        return 0 if self.search is None else self.search.sampled_repeats

    @property
    def refit_seconds(self) -> float | None:
        """The last search's measured seconds a scenario, once the plan was
        re-fitted to its pace; None before."""
        return None if self.search is None else self.search.refit_seconds

    @property
    def failures(self) -> list[Example]:
        """The failing examples the last search ran."""
        return [] if self.search is None else self.search.failures

    def scenario_cost(self) -> tuple[float | None, str]:
        """What one scenario costs in real time, about, and how that is
        known (see :func:`~._plan.scenario_cost`): declared by the adapter,
        measured from the fault-free runs so far, or unknown."""
        return scenario_cost(self.adapter, self.fault_free_seconds)

    def over_budget(self) -> bool:
        """Whether the run has spent its --budget (counted from the engine's start)."""
        return time.monotonic() - self._started > self.settings.budget_seconds

    def account(self, outcome: Draft, example: Example) -> None:
        """Add ``example`` to ``outcome``, then report progress (the
        outcome as it stands, frozen)."""
        outcome.account(example)
        if self._progress is not None:
            self._progress(outcome.freeze())

    def close(self) -> None:
        if self._own_workdir:
            with shielded():
                shutil.rmtree(self.workdir, ignore_errors=True)


def property_info(p: Property) -> dict[str, Any]:
    """What an outcome (and its report) keeps of a user's property."""
    return {"spec": p.spec, "doc": p.doc, "needs": list(p.needs), "family": p.family}
