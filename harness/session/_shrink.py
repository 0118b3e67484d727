"""The shrink phase of a search: one counterexample per failing property.

One first failed by a sampled scenario is shrunk by replaying the
sampled search from its seed up to that scenario (every earlier one from
the search's record, not run again), then letting Hypothesis shrink it.
Once every sampled one is, every counterexample -- a targeted schedule's
or a regression's too, which Hypothesis never drew -- loses the steps its
failures do not need, one at a time (:mod:`._drop`): a targeted zombie
schedule continues its paused worker right before the final quiesce,
which would continue it anyway. All within shrinking's own budget, the
pass with what Hypothesis left of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from hypothesis import given, reject, seed

from .._errors import HarnessError
from .._settings import Settings
from ..model import Scenario, Verdict
from ..outcome import Draft, Example
from ..vocabulary import Capability
from ._draws import Found, Stream, hypothesis_settings, own_draws, repeat
from ._drop import deletions
from ._plan import shrink_deadline


def failed_properties(example: Example) -> list[str]:
    """The properties ``example`` failed, in the order they were judged."""
    return [r.name for r in example.results if r.verdict is Verdict.FAIL]


class Shrink:
    """The shrink phase of one search: its ``stream`` drawn from
    ``search_seed`` as the sampled phase drew it, ``known`` (a scenario's
    JSON: the properties it failed) and ``failures`` (its failing examples)
    as the search left them, and ``run`` to execute and account for a new
    candidate (which adds it to ``known`` and, failing, to ``failures``);
    ``capabilities``: the adapter's (what a shorter candidate must still
    validate against). Shrinking has a budget of its own
    (:func:`shrink_deadline`, from the search's ``started``), set when it
    first shrinks."""

    def __init__(
        self,
        outcome: Draft,
        stream: Stream,
        search_seed: int,
        *,
        settings: Settings,
        started: float,
        known: Mapping[str, frozenset[str]],
        failures: Sequence[Example],
        run: Callable[[Scenario], Example],
        capabilities: Iterable[Capability] = (),
    ) -> None:
        self.outcome = outcome
        self.stream = stream
        self.seed = search_seed
        self.settings = settings
        self.started = started
        self.known = known
        self.failures = failures
        self.run = run
        self.capabilities = frozenset(capabilities)
        #: when shrinking must stop (set as it begins: see shrink_deadline)
        self._deadline: float | None = None

    def all(
        self, first: Mapping[str, tuple[Example, bool]], max_examples: int, *, enabled: bool
    ) -> None:
        """One counterexample per failing property (``first``: the first
        example that failed it, and whether it was sampled), in the order
        found; a counterexample that fails a later property too serves it as
        well. A sampled one is shrunk by Hypothesis; once every one is,
        each counterexample (a targeted schedule's, a regression's too)
        loses the steps its failures do not need (:meth:`drop_steps`), with
        what the budget has left: the pass never takes time from
        Hypothesis's shrinking. ``enabled``: shrinking at all."""
        outcome = self.outcome
        for name, (example, sampled) in first.items():
            shared = next(
                (ex for ex in outcome.counterexamples.values() if name in failed_properties(ex)),
                None,
            )
            if shared is not None:
                outcome.counterexamples[name] = shared
                continue
            best = example
            if sampled and enabled:
                self._begin()
                if self._over():
                    self._cut(name)
                else:
                    best = self.shrink(name, max_examples) or example
            outcome.counterexamples[name] = best
        if enabled:
            self._drop_all()
        self._adopt_late_failures()

    def _adopt_late_failures(self) -> None:
        """A property that first failed in a shrink-phase run (a candidate
        shrunk for another property failed it too) is failed by the
        tallies like any other, so it gets a counterexample like any other:
        the first failing example that failed it (unshrunk, as found), never
        a FAIL with nothing to replay."""
        outcome = self.outcome
        for example in self.failures:
            for name in failed_properties(example):
                if name not in outcome.counterexamples:
                    outcome.counterexamples[name] = example

    def _begin(self) -> None:
        """Shrinking begins (if it has not): its deadline is set."""
        if self._deadline is None:
            self._deadline = shrink_deadline(time.monotonic(), self.started, self.settings)

    def _drop_all(self) -> None:
        """The step-deleting pass over each counterexample once, in the
        order found; a shorter one serves every property the longer did."""
        outcome = self.outcome
        done: set[int] = set()
        for example in list(outcome.counterexamples.values()):
            if id(example) in done:
                continue
            done.add(id(example))
            serves = [n for n, ex in outcome.counterexamples.items() if ex is example]
            self._begin()
            best, dropped = self.drop_steps(serves, example)
            for name in serves:
                outcome.counterexamples[name] = best
                if dropped:
                    outcome.dropped_steps[name] = dropped

    def _cut(self, name: str) -> None:
        """Shrinking ``name``'s counterexample stopped at the budget."""
        if name not in self.outcome.not_fully_shrunk:
            self.outcome.not_fully_shrunk.append(name)

    def _over(self) -> bool:
        """Whether shrinking has spent its own budget (see :func:`shrink_deadline`)."""
        return self._deadline is not None and time.monotonic() >= self._deadline

    def shrink(self, name: str, max_examples: int) -> Example | None:
        """Replay the sampled search from its seed up to the first scenario
        that fails ``name`` (every earlier one is known: nothing re-runs),
        then let Hypothesis shrink it. The smallest failing example seen."""
        best: list[Example] = []
        state = {"found": False, "cut": False}
        seen: set[str] = set()

        @hypothesis_settings(max_examples, shrink=True)
        @given(self.stream.strategy())
        def probe(scenario: Scenario) -> None:
            # Replaying the search, skip its repeats as it did (the same
            # draws follow); once shrinking, every candidate is judged.
            if not state["found"] and repeat(seen, scenario):
                reject()
            key = scenario.model_dump_json()
            known = self.known.get(key)
            if known is None:
                # Before the first failure is replayed, a scenario the search
                # never ran means the replay diverged: run nothing new.
                if not state["found"]:
                    return
                if self._over():
                    state["cut"] = True
                    return
                example = self.run(scenario)
                known = self.known[key]
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
                raise Found

        try:
            with own_draws():
                seed(self.seed)(probe)()
        except Found:
            pass
        except HarnessError:
            raise  # an adapter error, an interruption: not Hypothesis's to absorb
        except Exception as exc:  # Flaky and friends: our own record still holds
            self.outcome.counts["hypothesis_" + type(exc).__name__] += 1
        if state["cut"]:
            self._cut(name)
        return best[0] if best else None

    def drop_steps(self, names: Sequence[str], example: Example) -> tuple[Example, int]:
        """``example`` without the steps its failures of ``names`` do not
        need, and how many went: each shorter scenario of
        :func:`~._drop.deletions` (one step fewer, the last first) is
        judged as Hypothesis's candidates are -- one run, known ones not run
        again -- and replaces the counterexample when it fails every one of
        ``names`` too; then its own deletions are tried, until none does or
        the budget is spent (``names`` are then not fully shrunk). The same
        failures: a deletion is kept only on a run that failed them, so what
        is reported is that run, witness and all, whatever the runtime's
        races did to the deletions that did not fail."""
        best, dropped = example, 0
        tried: set[str] = set()
        progress = True
        while progress:
            progress = False
            for candidate in deletions(best.scenario, self.capabilities):
                key = candidate.model_dump_json()
                if key in tried:
                    continue
                tried.add(key)
                if key not in self.known and self._over():
                    for name in names:
                        self._cut(name)
                    break
                failing = self._judged(names, candidate, key)
                if failing is not None:
                    best, dropped, progress = failing, dropped + 1, True
                    break  # the next deletions are the shorter scenario's
        return best, dropped

    def _judged(self, names: Sequence[str], scenario: Scenario, key: str) -> Example | None:
        """The example of ``scenario`` (JSON ``key``) that failed every one
        of ``names``: the search's, if it ran ``scenario`` (not run again),
        else a new run of it; None if it did not fail them all."""
        known = self.known.get(key)
        if known is None:
            example = self.run(scenario)
            return example if set(names) <= set(failed_properties(example)) else None
        if not set(names) <= known:
            return None
        return next((e for e in self.failures if e.scenario == scenario), None)
