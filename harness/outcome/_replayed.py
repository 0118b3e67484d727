"""What ``harness replay`` says of each property: the run's words, for one scenario.

A replay runs one scenario again, and its checkers judge that one history.
Its labels follow the rules a run's verdicts follow (:func:`judge`), so that
a replay never says more than the run did: a property the adapter gives
nothing to judge (a capability not declared, a fault family switched off)
is ``not_tested`` with the run's reason, not ``pass``; one the replayed
run's report said was ``not_tested`` stays so (unless it fails now); a pass
on no evidence in this one scenario is ``idle`` (the property held
vacuously here, whatever the run found elsewhere).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..model import Verdict
from ..vocabulary import KIND_FAMILY
from ._outcome import Example
from ._verdicts import NEEDS_FAMILY, Tally, judge


@dataclass(frozen=True)
class Replayed:
    """One property's line in a replay: ``label`` (``fail``, ``unknown``,
    ``pass``, ``idle`` or ``not_tested``) and the message shown beside it."""

    name: str
    label: str
    message: str


def replay_labels(
    example: Example,
    capabilities: Iterable[str],
    families: Iterable[str] | None = None,
    recorded: Mapping[str, tuple[str, str | None]] | None = None,
) -> list[Replayed]:
    """Each of ``example``'s results as a replay shows it.

    ``capabilities``: the adapter's; ``families``: the fault families the
    replayed run had switched on (None: not known, as for a scenario file:
    every family counts as on); ``recorded``: per property, the verdict the
    replayed run reported and its reason (a run folder's report.json).
    """
    fams = (
        set(families)
        if families is not None
        else set(KIND_FAMILY.values()) | set(NEEDS_FAMILY.values())
    )
    tallies: dict[str, Tally] = {}
    for r in example.results:
        tallies.setdefault(r.name, Tally()).add(r)
    cov = example.coverage
    judged = judge(
        tallies,
        capabilities=capabilities,
        families=fams,
        faults_armed=cov.armed,
        faults_fired=cov.fired,
        unfired=cov.unfired,
    ).properties
    out: list[Replayed] = []
    for r in example.results:
        if r.verdict in (Verdict.FAIL, Verdict.UNKNOWN):
            out.append(Replayed(r.name, r.verdict.value, r.message))
            continue
        j = judged.get(r.name)
        family = NEEDS_FAMILY.get(r.name)
        # Not armed in this one scenario says nothing of the run: that is idle.
        unarmed = family is not None and family in fams and not _armed(cov.armed, family)
        if j is not None and j.verdict is Verdict.NOT_TESTED and not unarmed:
            out.append(Replayed(r.name, "not_tested", j.reason or j.message))
            continue
        verdict, reason = (recorded or {}).get(r.name, ("", None))
        if verdict == Verdict.NOT_TESTED.value:
            out.append(Replayed(r.name, "not_tested", f"{reason or 'not tested'} (in the run)"))
            continue
        out.append(Replayed(r.name, "pass" if r.evidence > 0 else "idle", r.message))
    return out


def _armed(armed: Mapping[str, int], family: str) -> bool:
    return any(n for kind, n in armed.items() if KIND_FAMILY.get(kind, kind) == family)
