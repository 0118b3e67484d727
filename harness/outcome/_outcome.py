"""The frozen summary of one run: every executed example, summed.

The session fills a :class:`~harness.outcome.Draft` as it runs scenarios
(:meth:`Draft.account <harness.outcome.Draft.account>`) and freezes it into
an :class:`Outcome`, built once from frozen parts (:class:`Plan`,
:class:`Tallies`, :class:`Cut`); the report is built from it alone, never
from the engine that produced it. :meth:`Outcome.judgement` turns the sums
into each property's verdict over the whole search (see
:mod:`harness.outcome._verdicts`).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._settings import Settings
from ..model import PropertyResult, Scenario, Verdict
from ..runner import Coverage
from ._parts import Cut, Plan, Tallies
from ._verdicts import Judgement, Tally, judge


@dataclass
class Example:
    """One executed scenario and what the checkers said."""

    scenario: Scenario
    results: list[PropertyResult]
    folder: Path
    coverage: Coverage
    seconds: float
    #: the (fault, workflow, run state) combinations its history fired (see
    #: ``harness.session._coverage``): what the sampled search steers by
    combinations: frozenset[tuple[str, str, str]] = frozenset()

    @property
    def failed(self) -> bool:
        return any(r.verdict is Verdict.FAIL for r in self.results)

    @property
    def size(self) -> tuple[int, int]:
        return len(self.scenario.steps), len(self.scenario.model_dump_json())


@dataclass(frozen=True)
class Outcome:
    """Everything one ``harness run`` found, built once (by
    :meth:`Draft.freeze <harness.outcome.Draft.freeze>`) from frozen parts:
    the run's identity, its :class:`Plan`, :class:`Tallies` (``sums``) and
    :class:`Cut`, and its counterexamples. Every field of the parts reads
    through as an attribute of its own (``outcome.planned`` is
    ``outcome.plan.planned``)."""

    adapter: str
    adapter_options: Mapping[str, Any]
    capabilities: tuple[str, ...]
    settings: Settings
    seed: int | None
    crash_points: tuple[str, ...]
    #: the fault families switched on for this run
    families: tuple[str, ...]
    #: the properties judged besides the built-in ones (a user's invariants),
    #: in order: name -> what the report says of it (``spec``, ``doc``,
    #: ``needs``, ``family``); the verdict rules read ``needs`` and ``family``
    user_properties: Mapping[str, Mapping[str, Any]]
    plan: Plan
    sums: Tallies
    cut: Cut
    #: the main counterexample (that of the first property found failing)
    failure: Example | None
    #: every failing example kept: one counterexample per failing property
    failures: tuple[Example, ...]
    #: per failing property, in the order found: its (minimal) counterexample;
    #: one example may serve several properties
    counterexamples: Mapping[str, Example]
    seconds: float

    def judgement(self) -> Judgement:
        """Every property's verdict over the search (see :mod:`harness.outcome._verdicts`)."""
        messages = {
            name: next(
                (r.message for r in ex.results if r.name == name and r.verdict is Verdict.FAIL),
                "",
            )
            for name, ex in self.counterexamples.items()
        }
        judgement = judge(
            self.tallies,
            capabilities=self.capabilities,
            families=self.families,
            faults_armed=self.faults_armed,
            faults_fired=self.faults_fired,
            unfired=self.faults_unfired,
            fail_messages=messages,
            planned=self.planned,
            ran=self.searched,
            budget_cut=self.cut_leaves_gaps(),
            complete_search=not self.stopped_on_first,
            needs={
                name: (tuple(info.get("needs") or ()), info.get("family"))
                for name, info in self.user_properties.items()
            },
        )
        if self.cut_leaves_gaps():
            judgement.inconclusive.append(self.not_exercised())
        if self.interrupted:
            judgement.inconclusive.insert(
                0,
                f"{self.interrupted} stopped the run after {self.examples} scenarios: the "
                "search did not finish (counterexamples, if any, are not shrunk)",
            )
        return judgement

    def cut_leaves_gaps(self) -> bool:
        """Whether what the budget left unrun makes the run inconclusive.

        A budget that ends a breadth-first search early leaves it with fewer
        scenarios, not necessarily with a blind spot: the targeted schedules
        run breadth-first (every kind once before any twice) and a share of
        the budget is kept for sampling, so a cut plan has still tried every
        kind of fault it planned. It is a gap -- the run cannot earn a PASS --
        when a kind of targeted schedule had none of its schedules run, or a
        sampled part was planned and no sampled scenario ran, or nothing ran.
        Otherwise the report says how much did not run (:meth:`not_exercised`)
        beside a verdict the scenarios that ran have earned: a Jepsen test
        with a time limit, not a proof.
        """
        if not self.budget_cut or self.planned is None:
            return False
        return (
            not self.breadth_first
            or self.searched == 0
            or bool(self.unreached_kinds)
            or (self.sampled_planned > 0 and self.sampled_searched == 0)
        )

    def not_exercised(self) -> str:
        """What the budget left unrun, plainly: how many targeted and sampled
        scenarios, the kinds of targeted schedule none of which ran, and the
        budget that would run them all."""
        planned = self.planned or 0
        targeted = len(self.not_run_targeted)
        sampled = planned - self.searched - targeted
        parts = []
        if targeted:
            parts.append(f"{targeted} targeted schedule{'' if targeted == 1 else 's'}")
        if sampled > 0:
            parts.append(f"{sampled} sampled scenario{'' if sampled == 1 else 's'}")
        text = f"not exercised: {' and '.join(parts) or 'nothing'} of the plan did not run"
        if self.unreached_kinds:
            text += f", among them every schedule of {', '.join(self.unreached_kinds)}"
        if self.searched:
            # at the pace the budget ran: it spent all of itself on those that ran
            need = math.ceil(self.settings.budget_seconds * planned / self.searched)
            text += f"; about --budget {need} would run them all"
        return text

    def commit_pair_coverage(self) -> list[dict[str, str | None]]:
        """Each (commit kind x fault) pair with its ``status``: ``covered``
        (its schedule ran), ``budget`` (the budget cut it), ``shard``
        (another shard's or job's part), ``not_offered`` (no schedule can
        aim it: ``why``), ``not_planned`` (its schedule is past the plan's
        targeted share)."""
        ran = {e.get("name") for e in self.ledger}
        cut = set(self.not_run_targeted)
        out: list[dict[str, str | None]] = []
        for pair in self.commit_pairs:
            name, why = pair.get("schedule"), pair.get("why")
            if name is None:
                status = "not_planned" if why == "not in the plan" else "not_offered"
            elif name in ran:
                status = "covered"
            elif name in cut:
                status = "budget"
            else:
                status = "shard"
            out.append({**pair, "status": status})
        return out

    def excused(self) -> dict[str, int]:
        """Runs the comparisons with the fault-free run left out, by the
        fault that excused them (``resume_equivalence``'s ``excused_by_KIND``
        counts), and those a fault named without the evidence
        (``not_excused``), summed over the scenarios."""
        prefix = "resume_equivalence."
        out: dict[str, int] = {}
        for key, n in sorted(self.counts.items()):
            if not key.startswith(prefix) or not n:
                continue
            key = key[len(prefix) :]
            if key.startswith("excused_by_"):
                out[key.removeprefix("excused_by_")] = n
            elif key.startswith("not_excused_"):
                out["not_excused"] = out.get("not_excused", 0) + n
        return out

    # -- read through: the plan ------------------------------------------------
    @property
    def planned(self) -> int | None:
        return self.plan.planned

    @property
    def whole_plan(self) -> int | None:
        return self.plan.whole_plan

    @property
    def breadth_first(self) -> bool:
        return self.plan.breadth_first

    @property
    def sampled_planned(self) -> int:
        return self.plan.sampled_planned

    @property
    def scenario_seconds(self) -> float | None:
        return self.plan.scenario_seconds

    @property
    def scenario_cost(self) -> str | None:
        return self.plan.scenario_cost

    @property
    def fit(self) -> int | None:
        return self.plan.fit

    @property
    def commit_pairs(self) -> tuple[dict[str, str | None], ...]:
        return self.plan.commit_pairs

    # -- read through: the sums (Tallies) -----------------------------------------
    @property
    def examples(self) -> int:
        return self.sums.examples

    @property
    def searched(self) -> int:
        return self.sums.searched

    @property
    def sampled_searched(self) -> int:
        return self.sums.sampled_searched

    @property
    def slowest(self) -> float:
        return self.sums.slowest

    @property
    def tallies(self) -> Mapping[str, Tally]:
        return self.sums.tallies

    @property
    def faults_armed(self) -> Counter[str]:
        return self.sums.faults_armed

    @property
    def faults_fired(self) -> Counter[str]:
        return self.sums.faults_fired

    @property
    def faults_unfired(self) -> Mapping[str, Counter[str]]:
        return self.sums.faults_unfired

    @property
    def faults_untested(self) -> Mapping[str, Counter[str]]:
        return self.sums.faults_untested

    @property
    def counts(self) -> Counter[str]:
        return self.sums.counts

    @property
    def model_usage(self) -> Counter[str]:
        return self.sums.model_usage

    @property
    def sites_armed(self) -> Counter[str]:
        return self.sums.sites_armed

    @property
    def sites_fired(self) -> Counter[str]:
        return self.sums.sites_fired

    @property
    def combinations(self) -> frozenset[tuple[str, str, str]]:
        return self.sums.combinations

    @property
    def fired_in(self) -> Counter[str]:
        return self.sums.fired_in

    @property
    def failed_after(self) -> Counter[str]:
        return self.sums.failed_after

    @property
    def ledger(self) -> tuple[dict[str, Any], ...]:
        return self.sums.ledger

    @property
    def started(self) -> float:
        return self.sums.started

    @property
    def first_failure_seconds(self) -> float | None:
        return self.sums.first_failure_seconds

    @property
    def first_failure_examples(self) -> int | None:
        return self.sums.first_failure_examples

    # -- read through: the cut ------------------------------------------------
    @property
    def budget_cut(self) -> bool:
        return self.cut.budget_cut

    @property
    def stopped_on_first(self) -> bool:
        return self.cut.stopped_on_first

    @property
    def interrupted(self) -> str | None:
        return self.cut.interrupted

    @property
    def not_run_targeted(self) -> tuple[str, ...]:
        return self.cut.not_run_targeted

    @property
    def unreached_kinds(self) -> tuple[str, ...]:
        return self.cut.unreached_kinds

    @property
    def not_fully_shrunk(self) -> tuple[str, ...]:
        return self.cut.not_fully_shrunk

    @property
    def dropped_steps(self) -> Mapping[str, int]:
        return self.cut.dropped_steps


def ledger_entry(example: Example) -> dict[str, Any]:
    """One line of ``scenarios.jsonl``: the scenario's ``id`` (the start of
    the SHA-256 of its JSON: equal ids, equal scenarios), its name, the
    fault kinds it armed, the properties it failed, and the SHA-256 of its
    history (equal in every run of the scenario, the ``race`` family
    excepted: two workers racing on purpose)."""
    text = example.scenario.model_dump_json()
    history = example.folder / "history.jsonl"
    return {
        "id": hashlib.sha256(text.encode()).hexdigest()[:16],
        "name": example.scenario.name,
        "faults": sorted(k for k, n in example.coverage.armed.items() if n),
        "failed": [r.name for r in example.results if r.verdict is Verdict.FAIL],
        "history": hashlib.sha256(history.read_bytes()).hexdigest() if history.is_file() else None,
    }
