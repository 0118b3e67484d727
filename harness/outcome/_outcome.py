"""The frozen summary of one run: every executed example, summed.

The session fills an :class:`Outcome` as it runs scenarios
(:meth:`Outcome.account`); the report is built from it alone, never from the
engine that produced it. :meth:`Outcome.judgement` turns the sums into each
property's verdict over the whole search (see :mod:`harness.outcome._verdicts`).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._settings import Settings
from ..model import PropertyResult, Scenario, Verdict
from ..runner import Coverage
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


@dataclass
class Outcome:
    """Everything one ``harness run`` found."""

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
    #: the main counterexample (that of the first property found failing)
    failure: Example | None = None
    #: every failing example kept: one counterexample per failing property
    failures: list[Example] = field(default_factory=list)
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
