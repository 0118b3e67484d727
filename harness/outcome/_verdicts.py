"""Verdicts over a whole search: what every scenario's checkers said, summed.

One scenario's checker says ``pass``, ``fail`` or ``unknown`` about one
history, and how much it had to judge (``evidence``). A search's verdict on
a property is earned over every scenario:

- ``fail``: it failed in at least one scenario;
- ``pass``: at least one scenario *exercised* it (evidence > 0) and none
  failed;
- ``not_tested``: no scenario could exercise it: the adapter does not declare
  the capability it needs, the profile switched its fault family off, or the
  family was armed and never fired (that last one makes the run
  inconclusive);
- ``unknown``: it should have been judged and could not be; also when some
  scenario compared it with fault-free runs that disagree with each other
  (a nondeterministic workflow: see ``harness.session._oracle``), whatever
  the others showed.

The run's verdict is ``fail`` if a property failed, else ``unknown``
(inconclusive, exit code 3) if any reason in :attr:`Judgement.inconclusive`
holds, else ``pass``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..checkers import BUILTIN
from ..checkers._base import DISAGREED
from ..model import PropertyResult, Verdict
from ..vocabulary import KIND_FAMILY, Capability

#: The capability without which a property has nothing to judge (from the
#: built-in properties' records, ``harness.checkers.BUILTIN``).
NEEDS_CAPABILITY: dict[str, Capability] = {
    p.name: Capability(p.needs[0]) for p in BUILTIN.values() if p.needs
}

#: The fault family (and the fault kind it arms) a property is exercised by.
NEEDS_FAMILY: dict[str, str] = {p.name: p.family for p in BUILTIN.values() if p.family}


@dataclass
class Tally:
    """One property's results over every scenario of a search."""

    scenarios: int = 0
    exercised: int = 0
    failed: int = 0
    unknown: int = 0
    evidence: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    #: why a scenario had nothing to judge / could not judge, most common first
    idle: Counter[str] = field(default_factory=Counter)
    unknowns: Counter[str] = field(default_factory=Counter)
    #: the last result that judged something (shown on a pass)
    last_judged: PropertyResult | None = None

    def add(self, r: PropertyResult) -> None:
        self.scenarios += 1
        self.counts.update(r.counts)
        self.evidence += r.evidence
        if r.verdict is Verdict.FAIL:
            self.failed += 1
            self.exercised += 1  # a failure is always judged on something
        elif r.verdict is Verdict.UNKNOWN:
            self.unknown += 1
            self.unknowns[r.message] += 1
        elif r.evidence > 0:
            self.exercised += 1
            self.last_judged = r
        else:
            self.idle[r.message] += 1


@dataclass(frozen=True)
class PropertyVerdict:
    """A property's verdict over the search, with an aggregate message."""

    name: str
    verdict: Verdict
    message: str
    #: scenarios that judged it, and scenarios run
    exercised: int
    scenarios: int
    counts: dict[str, int]
    #: for ``not_tested`` and ``unknown``: why, in a few words
    reason: str | None = None
    #: scenarios that failed it, and that could not judge it
    failed: int = 0
    unknown: int = 0


@dataclass
class Judgement:
    properties: dict[str, PropertyVerdict]
    #: why the run is inconclusive (empty: it is not)
    inconclusive: list[str]

    @property
    def verdict(self) -> Verdict:
        if any(p.verdict is Verdict.FAIL for p in self.properties.values()):
            return Verdict.FAIL
        if self.inconclusive:
            return Verdict.UNKNOWN
        return Verdict.PASS


def _top(c: Counter[str]) -> str:
    return c.most_common(1)[0][0] if c else ""


def _of(n: int, total: int, noun: str = "scenario") -> str:
    return f"{n} of {total} {noun}{'' if total == 1 else 's'}"


#: the cause of a fault that was armed and left no record of why it did not
#: fire: a world rule or a crash point whose call or site no worker reached
NOT_REACHED = "the runtime never reached where it was aimed"


def never_fired(
    kinds: Iterable[str], armed: int, unfired: Mapping[str, Mapping[str, int]] | None
) -> str:
    """Why faults of ``kinds``, armed ``armed`` times, never fired: each
    cause the history recorded (the nemesis's ``reason``), most frequent
    first, with how often; those with none recorded were not reached."""
    causes: Counter[str] = Counter()
    for kind in kinds:
        causes.update(dict((unfired or {}).get(kind, {})))
    unexplained = armed - sum(causes.values())
    parts = [f"{why} ({n} of {armed})" for why, n in causes.most_common()]
    if unexplained > 0:
        hint = "check the workflows' declared effect kinds and crash points"
        count = f"{unexplained} of {armed}; " if causes else ""
        parts.append(f"{NOT_REACHED} ({count}{hint})")
    return "; ".join(parts)


def judge(
    tallies: Mapping[str, Tally],
    *,
    capabilities: Iterable[str],
    families: Iterable[str],
    faults_armed: Mapping[str, int],
    faults_fired: Mapping[str, int],
    unfired: Mapping[str, Mapping[str, int]] | None = None,
    fail_messages: Mapping[str, str] | None = None,
    planned: int | None = None,
    ran: int | None = None,
    budget_cut: bool = False,
    complete_search: bool = True,
    needs: Mapping[str, tuple[Sequence[str], str | None]] | None = None,
) -> Judgement:
    """Every property's verdict over the search, and why the run is
    inconclusive, if it is.

    ``families``: the fault families the run had switched on (after the
    profile and the adapter's capabilities). ``unfired``: per fault kind,
    why it did not fire, with how often (every "never fired" names it).
    ``fail_messages``: per failed property, the counterexample's message.
    ``planned``/``ran``/``budget_cut``: the search's plan, how much of it
    ran, and whether the budget stopped it.
    ``complete_search`` False (the search stopped at the first failure on
    request) leaves the properties no scenario failed as they are, and says
    they were judged only up to there.
    ``needs``: per property that is not built in (a user's invariant), the
    capabilities it needs and the fault family that exercises it, judged by
    the same rules as the built-in ones'.
    """
    caps = set(capabilities)
    fams = set(families)
    fail_messages = fail_messages or {}
    out: dict[str, PropertyVerdict] = {}
    inconclusive: list[str] = []
    for name, t in tallies.items():

        def verdict(
            v: Verdict, message: str, reason: str | None = None, *, t: Tally = t, name: str = name
        ) -> PropertyVerdict:
            return PropertyVerdict(
                name,
                v,
                message,
                t.exercised,
                t.scenarios,
                dict(sorted(t.counts.items())),
                reason=reason,
                failed=t.failed,
                unknown=t.unknown,
            )

        if t.failed:
            msg = fail_messages.get(name, "")
            out[name] = verdict(
                Verdict.FAIL, f"{msg} (failed in {_of(t.failed, t.scenarios)} run)".strip()
            )
            continue
        wants, family = (needs or {}).get(name, ((), NEEDS_FAMILY.get(name)))
        cap = NEEDS_CAPABILITY.get(name)
        lacking = [c for c in ([cap.value] if cap is not None else list(wants)) if c not in caps]
        if t.exercised == 0 and lacking:
            noun = "capability" if len(lacking) == 1 else "capabilities"
            reason = f"the adapter does not declare the {' and '.join(lacking)} {noun}"
            out[name] = verdict(Verdict.NOT_TESTED, f"Not tested: {reason}.", reason)
            continue
        if t.exercised == 0 and family is not None and family not in fams:
            reason = f"the {family} fault family was switched off for this run"
            out[name] = verdict(Verdict.NOT_TESTED, f"Not tested: {reason}.", reason)
            continue
        if t.exercised == 0 and family is not None and faults_fired.get(family, 0) == 0:
            armed = faults_armed.get(family, 0)
            reason = (
                f"the {family} fault family was armed {armed} times and never fired: "
                + never_fired([family], armed, unfired)
                if armed
                else f"no scenario armed the {family} fault family"
            )
            out[name] = verdict(Verdict.NOT_TESTED, f"Not tested: {reason}.", reason)
            inconclusive.append(f"{name} was not tested: {reason}")
            continue
        if t.exercised == 0:
            why = _top(t.unknowns) or _top(t.idle) or "no scenario ran"
            reason = f"no scenario gave it anything to judge ({why.rstrip('.')})"
            if t.unknown:
                reason = f"it could not be judged in {_of(t.unknown, t.scenarios)}: {why}"
            out[name] = verdict(Verdict.UNKNOWN, f"Unknown: {reason}.", reason)
            inconclusive.append(f"{name} could not be judged: {reason}")
            continue
        if t.counts.get(DISAGREED):
            # Judged against fault-free runs that disagree with each other in
            # some scenarios: what held elsewhere says nothing of those.
            why = _top(t.unknowns).rstrip(".")
            reason = (
                f"in {_of(t.counts[DISAGREED], t.scenarios)} it was compared with fault-free "
                f"runs that disagree with each other ({why})"
            )
            out[name] = verdict(
                Verdict.UNKNOWN,
                f"Unknown: held in the {t.exercised} other scenarios that exercised it, but "
                f"{reason}.",
                reason,
            )
            inconclusive.append(f"{name} could not be judged: {reason}")
            continue
        last = t.last_judged.message if t.last_judged is not None else ""
        msg = (
            f"Held in each of the {t.exercised} scenarios that exercised it "
            f"({t.scenarios} run). {last}"
        )
        if t.unknown:
            msg += (
                f" It could not be judged in {_of(t.unknown, t.scenarios)} "
                f"({_top(t.unknowns).rstrip('.')})."
            )
        if not complete_search:
            msg += " The search stopped at the first failure (--stop-on-first)."
        out[name] = verdict(Verdict.PASS, msg.strip())
    by_family: dict[str, list[str]] = {}
    for kind in faults_armed:
        by_family.setdefault(KIND_FAMILY.get(kind, kind), []).append(kind)
    for family, kinds in sorted(by_family.items()):
        armed = sum(faults_armed[k] for k in kinds)
        if armed and not any(faults_fired.get(k, 0) for k in kinds):
            inconclusive.append(
                f"the {family} fault family ({', '.join(sorted(kinds))}) was armed {armed} "
                f"times and never fired: {never_fired(kinds, armed, unfired)}"
            )
    if planned is not None and ran == 0:
        # Nothing was judged: green here would be a PASS nothing earned.
        inconclusive.append(
            "no scenario ran, so no property was judged: raise --budget (or --max-examples)"
        )
    if budget_cut and planned is not None and ran is not None:
        inconclusive.append(
            f"the budget ended the search: ran {ran} of {planned} planned scenarios; "
            "raise --budget or use --profile dev"
        )
    return Judgement(out, inconclusive)
