"""The shrink phase of a search: one counterexample per failing property.

One first failed by a targeted schedule keeps it (one run, one fault:
nothing to shrink); one first failed by a sampled scenario is shrunk by
replaying the sampled search from its seed up to that scenario (every
earlier one from the search's record, not run again), then letting
Hypothesis shrink it, within shrinking's own budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from hypothesis import given, reject, seed

from .._errors import HarnessError
from .._settings import Settings
from ..model import Scenario, Verdict
from ..outcome import Example, Outcome
from ._draws import Found, Stream, hypothesis_settings, repeat
from ._plan import shrink_deadline


def failed_properties(example: Example) -> list[str]:
    """The properties ``example`` failed, in the order they were judged."""
    return [r.name for r in example.results if r.verdict is Verdict.FAIL]


class Shrink:
    """The shrink phase of one search: its ``stream`` drawn from
    ``search_seed`` as the sampled phase drew it, ``known`` (a scenario's
    JSON: the properties it failed) and ``failures`` (its failing examples)
    as the search left them, and ``run`` to execute and account for a new
    candidate (which adds it to ``known`` and, failing, to ``failures``).
    Shrinking has a budget of its own (:func:`shrink_deadline`, from the
    search's ``started``), set when it first shrinks."""

    def __init__(
        self,
        outcome: Outcome,
        stream: Stream,
        search_seed: int,
        *,
        settings: Settings,
        started: float,
        known: Mapping[str, frozenset[str]],
        failures: Sequence[Example],
        run: Callable[[Scenario], Example],
    ) -> None:
        self.outcome = outcome
        self.stream = stream
        self.seed = search_seed
        self.settings = settings
        self.started = started
        self.known = known
        self.failures = failures
        self.run = run
        #: when shrinking must stop (set as it begins: see shrink_deadline)
        self._deadline: float | None = None

    def all(
        self, first: Mapping[str, tuple[Example, bool]], max_examples: int, *, enabled: bool
    ) -> None:
        """One counterexample per failing property (``first``: the first
        example that failed it, and whether it was sampled), in the order
        found; a counterexample that fails a later property too serves it as
        well. Only a sampled one is shrunk (``enabled``: at all)."""
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
                if self._deadline is None:
                    self._deadline = shrink_deadline(time.monotonic(), self.started, self.settings)
                if self._over():
                    outcome.not_fully_shrunk.append(name)
                else:
                    best = self.shrink(name, max_examples) or example
            outcome.counterexamples[name] = best

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
            seed(self.seed)(probe)()
        except Found:
            pass
        except HarnessError:
            raise  # an adapter error, an interruption: not Hypothesis's to absorb
        except Exception as exc:  # Flaky and friends: our own record still holds
            self.outcome.counts["hypothesis_" + type(exc).__name__] += 1
        if state["cut"]:
            self.outcome.not_fully_shrunk.append(name)
        return best[0] if best else None
