"""Excuses from evidence: which runs a fault may legitimately have changed.

A fault event names in its ``runs`` the runs whose outcome it *may*
change (a clock jump, the runs whose wait it lets pass its deadline; a
memory plant, its tenant's runs; an outage, the runs it turned away). The
comparisons with the fault-free run (``resume_equivalence``,
``state_equivalence``, ``context_rebuild``) leave an excused run out. A
name alone is not an excuse: it is taken only where the history shows the
fault could have reached the run's outcome, by the rule of its kind:

- ``clock``, ``lease_wait`` (a jump of virtual time): a run that holds an
  approval the jump lets expire stays excused (expiry is checked when the
  approval is used, so a decision that came in time may still lapse). A
  run named for a *wait's deadline* is excused only if nothing it waited
  for had durably arrived before the jump: no run it spawned (a
  ``created`` transition whose ``detail.parent_run_id`` names it) ended,
  and no genuine message to it (a decision, an event, an operator's
  answer) was accepted, after its last transition. What arrived before
  the deadline must be taken: a runtime that times the wait out anyway
  is judged, not excused.
- ``memory`` (a planted record): a run is excused only if a context it
  built after the plant lists a record at the planted (namespace, key),
  or another run of its tenant read it and the run read memory after the
  plant (what that run wrote may carry the plant on). An adapter whose
  contexts list no memory cannot show a read: its runs stay excused.
- ``outage`` (a service turned every call away): the runs one of whose
  calls it refused; a call it refused for no run the scenario submitted
  (a child's, or one without a run id) keeps its tenant's runs excused.
- ``operator_cancel``: the cancelled run, if the cancel took effect.
- ``migration`` (another code version read the run): every run it names
  (``migration_safety`` judges them).

A fault of any other kind that names runs keeps its name as an excuse: a
kind with no rule is never held to one it was not written for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..history import History
from ..model import OPERATOR_ANSWER, Event, EventF
from ._base import Findings, final_state, vstr, vstrs

#: message variants that speak for whom they claim (what a run waits for)
GENUINE_VARIANTS = frozenset({"valid", "duplicate", OPERATOR_ANSWER})


@dataclass(frozen=True)
class Excuses:
    """Per run, the faults that excuse it (kind, event index), and those
    that named it without the evidence to (kind, event index, why)."""

    runs: Mapping[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    refused: Mapping[str, tuple[tuple[str, int, str], ...]] = field(default_factory=dict)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self.runs

    def by(self, run_id: str) -> str:
        """The kind of the first fault that excuses ``run_id``."""
        return self.runs[run_id][0][0]


def excused_runs(history: History, *, except_kind: str | None = None) -> Excuses:
    """Which runs each fault excuses, by the evidence of ``history`` (see the
    module docstring); faults of ``except_kind`` are left out."""
    ev = _Evidence(history)
    runs: dict[str, list[tuple[str, int]]] = {}
    refused: dict[str, list[tuple[str, int, str]]] = {}
    for e in history.faults():
        kind = e.value.get("kind")
        if not isinstance(kind, str) or kind == except_kind:
            continue
        for run_id in vstrs(e, "runs") or []:
            why = ev.no_excuse(kind, e, run_id)
            if why is None:
                runs.setdefault(run_id, []).append((kind, e.index))
            else:
                refused.setdefault(run_id, []).append((kind, e.index, why))
    return Excuses(
        runs={r: tuple(v) for r, v in runs.items()},
        refused={r: tuple(v) for r, v in refused.items() if r not in runs},
    )


def count_excuses(excuses: Excuses, named: Iterable[str], f: Findings) -> None:
    """Count, for each of the ``named`` runs, the fault that excused it
    (``excused_by_KIND``) or, named without the evidence, the first fault
    that named it (``not_excused_KIND``): the report's "excused: N, by what"."""
    for run_id in named:
        if run_id in excuses.runs:
            f.count(f"excused_by_{excuses.by(run_id)}")
        elif run_id in excuses.refused:
            f.count(f"not_excused_{excuses.refused[run_id][0][0]}")


class _Evidence:
    """What the history shows, indexed once for every fault's rule."""

    def __init__(self, history: History) -> None:
        self.h = history
        self.submitted = set(history.submissions())
        decl = history.declaration()
        self.sees_reads = decl is not None and decl.has_capability("context")
        # run -> its transitions, in order; parent run -> the runs it spawned
        self.transitions: dict[str, list[Event]] = {}
        self.children: dict[str, list[str]] = {}
        for t in history.by_f(EventF.TRANSITION):
            run_id = vstr(t, "run_id")
            if run_id is None:
                continue
            self.transitions.setdefault(run_id, []).append(t)
            detail = t.value.get("detail")
            parent = detail.get("parent_run_id") if isinstance(detail, dict) else None
            if t.value.get("from") is None and isinstance(parent, str):
                self.children.setdefault(parent, []).append(run_id)
        self.finals = history.finals()
        # approvals the runtime recorded, by run
        self.approvals: dict[str, list[Event]] = {}
        for a in history.by_f(EventF.APPROVAL):
            run_id = vstr(a, "run_id")
            if run_id is not None:
                self.approvals.setdefault(run_id, []).append(a)
        # Runs a decision was delivered to (for an approval of theirs): with
        # no approval record at all (an adapter that shows none), such a
        # run named by a clock jump may hold an approval it lets expire.
        self.decided = (
            set()
            if self.approvals
            else {
                str(e.value.get("run_id"))
                for e in history.by_f(EventF.DELIVER)
                if e.type == "invoke" and e.value.get("approval_id") is not None
            }
        )
        self.deliveries = _genuine_deliveries(history)
        # run -> (index, [(namespace, key)...], lists memory?) of its contexts
        self.reads: dict[str, list[tuple[int, set[tuple[str, str]], bool]]] = {}
        for c in history.by_f(EventF.CONTEXT):
            run_id = vstr(c, "run_id")
            inner = c.value.get("context")
            records = inner.get("memory") if isinstance(inner, dict) else None
            keys = {
                (str(r.get("namespace")), str(r.get("key")))
                for r in (records if isinstance(records, list) else [])
                if isinstance(r, dict)
            }
            if run_id is not None:
                self.reads.setdefault(run_id, []).append((c.index, keys, isinstance(records, list)))

    def no_excuse(self, kind: str, fault: Event, run_id: str) -> str | None:
        """Why ``fault`` does not excuse ``run_id`` (None: it does)."""
        if kind in ("clock", "lease_wait"):
            return self._clock(fault, run_id)
        if kind == "memory":
            return self._memory(fault, run_id)
        if kind == "outage":
            return self._outage(fault, run_id)
        if kind == "operator_cancel":
            if fault.value.get("fired", True) is False:
                return "the cancel did not take effect"
            return None
        return None

    # -- clock ---------------------------------------------------------------

    def _clock(self, fault: Event, run_id: str) -> str | None:
        if run_id in self.decided:
            return None  # a decision's expiry cannot be told from a wait's deadline
        for a in self.approvals.get(run_id, []):
            expires = a.value.get("expires_at")
            if isinstance(expires, int | float) and float(expires) <= fault.time:
                return None  # an approval the jump lets expire
        before = [t.index for t in self.transitions.get(run_id, []) if t.index < fault.index]
        since = before[-1] if before else -1
        for child in self.children.get(run_id, []):
            ended = self._ended_at(child)
            if ended is not None and since < ended < fault.index:
                return (
                    f"run {child}, which it spawned, ended (#{ended}) before the clock passed "
                    "its deadline"
                )
        for index in self.deliveries.get(run_id, []):
            if since < index < fault.index:
                return f"a genuine message to it was accepted (#{index}) before its deadline passed"
        return None

    def _ended_at(self, run_id: str) -> int | None:
        """The index of ``run_id``'s transition into the terminal state it
        ended in (None: it did not end, or no such transition)."""
        final = self.finals.get(run_id)
        state = final_state(final) if final is not None else None
        if final is None or state is None or not state.terminal:
            return None
        raw = final.value.get("raw_status")
        into = [t.index for t in self.transitions.get(run_id, []) if t.value.get("to") == raw]
        return into[0] if into else None

    # -- memory --------------------------------------------------------------

    def _memory(self, fault: Event, run_id: str) -> str | None:
        planted = self._planted(fault)
        if planted is None or not self.sees_reads:
            return None
        after = [
            (keys, listed) for i, keys, listed in self.reads.get(run_id, []) if i > fault.index
        ]
        if not any(listed for _, listed in after):
            # No context after the plant that lists what it read: nothing
            # shows the run did not read the plant.
            return None
        if any(planted in keys for keys, _ in after):
            return None
        tenant = vstr(fault, "tenant")
        others_read = any(
            r != run_id
            and self.h.tenant_of(r) == tenant
            and any(i > fault.index and planted in keys for i, keys, _ in contexts)
            for r, contexts in self.reads.items()
        )
        if others_read and any(keys for keys, _ in after):
            return None  # it read memory another run may have written from the plant
        ns, key = planted
        return f"no context it built after the plant lists the planted {ns}/{key}"

    def _planted(self, fault: Event) -> tuple[str, str] | None:
        """(namespace, key) of the record this memory fault planted: the
        ``memory`` event recorded right before it."""
        for i in range(fault.index - 1, max(-1, fault.index - 4), -1):
            e = self.h.event(i)
            if e is not None and e.f == EventF.MEMORY:
                ns, key = vstr(e, "namespace"), vstr(e, "key")
                return (ns, key) if ns is not None and key is not None else None
        return None

    # -- outage --------------------------------------------------------------

    def _outage(self, fault: Event, run_id: str) -> str | None:
        touched = set(vstrs(fault, "touched") or [])
        if run_id in touched:
            return None
        refused = fault.value.get("refused")
        attributed = (
            sum(n for per in refused.values() if isinstance(per, dict) for n in per.values())
            if isinstance(refused, dict)
            else None
        )
        calls = fault.value.get("calls")
        if touched - self.submitted or attributed != calls:
            return None  # a call refused for a run not submitted here: its tenant's
        return "the outage refused none of its calls"


def _genuine_deliveries(history: History) -> dict[str, list[int]]:
    """run -> indexes of the accepted deliveries of genuine messages to it."""
    variant: dict[str, str] = {}
    out: dict[str, list[int]] = {}
    for e in history.by_f(EventF.DELIVER):
        mid = vstr(e, "message_id")
        run_id = vstr(e, "run_id")
        if mid is None or run_id is None:
            continue
        if e.type == "invoke":
            variant[f"{run_id}/{mid}"] = str(e.value.get("variant"))
        elif (
            e.type == "ok"
            and e.value.get("accepted") is not False
            and variant.get(f"{run_id}/{mid}") in GENUINE_VARIANTS
        ):
            out.setdefault(run_id, []).append(e.index)
    return out
