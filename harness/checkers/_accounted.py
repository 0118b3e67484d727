"""``effects_accounted``: what the world applied and what the runtime says it did agree.

An oracle-free property: it compares the runtime's own account of a
completed run (its ledger, through the adapter's optional ``operations``
view, and its output) with the world's records, never with another run of
the runtime. A mistake on the fault-free path (a ledger that never records
the service's answer, entries left ``prepared`` after the call) is the same
in the oracle, so only the world can show it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..history import History
from ..model import Event, EventF, PropertyResult, RunState
from ._base import Findings, final_state, guarded, plural, short, vstr
from ._effects import Effect, foreign_answers, parse_effects

NAME = "effects_accounted"

#: the normalized ledger statuses of the ``operations`` view
STATUSES = frozenset({"pending", "in_doubt", "done", "failed"})


@dataclass(frozen=True)
class _Ref:
    """One reference the world handed out, and to whom."""

    index: int
    run_id: str | None
    tenant: str | None
    kind: str
    request_hash: str
    business_key: str | None


@dataclass(frozen=True)
class _Entry:
    """One ledger entry of the ``operations`` view."""

    kind: str
    status: str
    raw_status: str
    external_ref: str | None
    request_hash: str | None
    business_key: str | None

    def describe(self) -> str:
        ref = "no external ref" if self.external_ref is None else f"ref {self.external_ref}"
        return f"{self.kind} entry ({self.raw_status}, {ref})"


@guarded(NAME)
def check_effects_accounted(history: History, oracle: History | None) -> PropertyResult:
    """A completed run's ledger names every effect the world applied for it, and no other.

    A failure usually means: the runtime's ledger and the world disagree:
    an entry left prepared after the call, a reference never recorded, a
    call held as done that the world refused.

    Every effect the world applied for a completed run is in the runtime's
    account, and the account names no effect the world did not apply.

    Judged for runs that ended ``completed`` only (a cancelled, failed or
    waiting run may legitimately hold an unresolved entry), from the
    ``operations`` each ``final`` event carries (the adapter's view of the
    run's ledger: ``kind``, normalized ``status``, ``external_ref``, and
    optionally ``request_hash``) and the world's ``effect`` records.

    Promises, per completed run:

    - *applied, so recorded*: for every logical request the world applied
      as a new side effect for the run (kind and request hash; the effect
      ``applied`` and ``side_effect``), the ledger holds an entry with
      status ``done`` naming one of the external refs the world answered
      that request with (any attempt's: a zombie's, a redelivery's, a
      deduplicated repeat's -- how many times it happened is
      ``exactly_once_effects``' business), but not a repeat the world
      answered with another run's effect (a key two runs shared: the ref
      is that run's). An entry that names the ref but
      is not ``done`` (left ``prepared``, say) fails, as does one that
      names another ref or none. Where the world gave no ref, an entry of
      the same kind and request hash that is ``done`` suffices.
    - *recorded, so applied*: every ``done`` entry that names an external
      ref names one the world answered a call of this run with (with an
      effect of this run's own, not another run's deduplicated); or, for a
      request reconciled by a business key another run of the same tenant
      used, a ref the world gave that run for the same kind and business
      key (counted as ``shared_refs``). A ``done`` entry without a ref
      whose kind (and request hash, if given) the world never answered for
      the run fails: the runtime holds as performed a call that never
      happened (a rejected one, say).
    - *reported, so applied*: a string in the run's output that is an
      external ref the world handed out must be one of those above.

    ``unknown``: a completed run whose ``final`` event carries no
    ``operations`` list although the capability is declared, a malformed
    entry, and a world ref of this run that the ledger does not name while
    its entry of that kind names another run's ref under a shared business
    key (the runtime's business-key reconciliation cannot tell the two
    apart). Without the ``operations`` capability there is nothing to
    judge: evidence 0, so the search reports the property ``not_tested``.

    Cannot see: a run whose ledger is right but whose output leaves the ref
    out (an output key is not known to be a reference unless it names one);
    the order in which things happened; effects that bypassed the world.
    The oracle is not used.
    """
    f = Findings(NAME)
    f.zero("completed_runs", "applied_requests", "reflected", "done_entries", "shared_refs")
    decl = history.declaration()
    if decl is None or not decl.has_capability("operations"):
        return f.result(
            "The runtime does not declare the 'operations' capability (a view of its "
            "ledger): nothing to compare with the world"
        )
    effects, malformed = parse_effects(history)
    for e in malformed:
        f.unknown(
            f"effect #{e.index} lacks a kind, a request_hash or a boolean 'applied'", [e.index]
        )
    # An answer the world gave a run with another run's effect (a key two
    # runs shared) names that run's ref, not one of this run's own.
    foreign = frozenset(answer.index for answer, _ in foreign_answers(effects))
    refs = _world_refs(history)
    by_ref: dict[str, list[_Ref]] = {}
    for ref, r in refs:
        by_ref.setdefault(ref, []).append(r)
    for run_id, final in history.finals().items():
        if final_state(final) is not RunState.COMPLETED:
            f.count("runs_not_completed")
            continue
        raw = final.value.get("operations")
        if not isinstance(raw, list):
            f.unknown(
                f"run {run_id} completed, but its final event #{final.index} carries no "
                "operations list, though the capability is declared",
                [final.index],
            )
            continue
        entries = list(_entries(f, final, raw))
        f.count("completed_runs")
        mine = {
            ref: rs
            for ref, rs in by_ref.items()
            if any(r.run_id == run_id and r.index not in foreign for r in rs)
        }
        tenant = vstr(final, "tenant") or history.tenant_of(run_id)
        _applied_so_recorded(f, run_id, tenant, final, effects, mine, by_ref, entries)
        _recorded_so_applied(f, history, run_id, tenant, final, mine, by_ref, entries, foreign)
        _reported_so_applied(f, run_id, final, mine, by_ref, entries)
    return f.result(
        f"Every one of {plural(f.counts['applied_requests'], 'request')} the world applied "
        f"for {plural(f.counts['completed_runs'], 'completed run')} is in the run's ledger, "
        f"done, under the world's ref, and each of {_entries_noun(f.counts['done_entries'])} "
        "the ledger holds as done names a call the world answered",
        evidence=f.counts["applied_requests"] + f.counts["done_entries"],
    )


def _entries_noun(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _world_refs(history: History) -> Iterator[tuple[str, _Ref]]:
    """Every external ref the world answered a call with (any outcome)."""
    for e in history.by_f(EventF.EFFECT):
        ref, kind, digest = vstr(e, "external_ref"), vstr(e, "kind"), vstr(e, "request_hash")
        if ref is None or kind is None or digest is None:
            continue
        yield (
            ref,
            _Ref(
                e.index,
                vstr(e, "run_id"),
                vstr(e, "tenant"),
                kind,
                digest,
                vstr(e, "business_key"),
            ),
        )


def _entries(f: Findings, final: Event, raw: list[Any]) -> Iterator[_Entry]:
    for n, item in enumerate(raw):
        kind = item.get("kind") if isinstance(item, dict) else None
        status = item.get("status") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(kind, str) or status not in STATUSES:
            f.unknown(
                f"operation {n} of run {final.value.get('run_id')} (final #{final.index}) is "
                f"not an entry with a kind and a status among {', '.join(sorted(STATUSES))}: "
                f"{short(item)}",
                [final.index],
            )
            continue
        ref, digest, raw_status, key = (
            item.get("external_ref"),
            item.get("request_hash"),
            item.get("raw_status"),
            item.get("business_key"),
        )
        yield _Entry(
            kind=kind,
            status=str(status),
            raw_status=raw_status if isinstance(raw_status, str) else str(status),
            external_ref=ref if isinstance(ref, str) else None,
            request_hash=digest if isinstance(digest, str) else None,
            business_key=key if isinstance(key, str) else None,
        )


def _applied_so_recorded(
    f: Findings,
    run_id: str,
    tenant: str | None,
    final: Event,
    effects: list[Effect],
    mine: dict[str, list[_Ref]],
    by_ref: dict[str, list[_Ref]],
    entries: list[_Entry],
) -> None:
    groups: dict[tuple[str, str], list[Effect]] = {}
    for eff in effects:
        if eff.counted and eff.run_id == run_id:
            groups.setdefault(eff.request, []).append(eff)
    for (kind, digest), group in groups.items():
        f.count("applied_requests")
        wanted = {
            ref
            for ref, rs in mine.items()
            if any(r.kind == kind and r.request_hash == digest for r in rs)
        }
        witness = [g.index for g in group] + [final.index]
        naming = [e for e in entries if e.external_ref is not None and e.external_ref in wanted]
        if any(e.status == "done" for e in naming):
            f.count("reflected")
            continue
        what = f"the world applied {kind} request {digest[:12]} for run {run_id}"
        shown = ", ".join(sorted(wanted)) or "no ref"
        if naming:
            f.fail(
                f"{what} (ref {shown}), but the run completed with its ledger entry still "
                f"{naming[0].raw_status} ({naming[0].status}), not done",
                witness,
            )
            f.count("not_done")
            continue
        same = [
            e
            for e in entries
            if e.kind == kind and (e.request_hash is None or e.request_hash == digest)
        ]
        if not wanted and any(e.status == "done" for e in same):
            f.count("reflected")  # the world gave no ref: kind and request match
            continue
        shared = [e for e in same if _shared(by_ref, e, run_id, tenant)]
        if shared:
            f.unknown(
                f"{what} (ref {shown}); the run's ledger names {shared[0].external_ref}, "
                "which the world gave another run under the same business key, so which "
                "account is this run's cannot be told",
                witness,
            )
            continue
        if same:
            f.fail(
                f"{what} (ref {shown}), but the run completed with only "
                f"{'; '.join(e.describe() for e in same[:2])} in its ledger",
                witness,
            )
            f.count("ref_not_recorded")
            continue
        f.fail(
            f"{what} (ref {shown}), but the run completed with no {kind} entry in its ledger",
            witness,
        )
        f.count("missing_entries")


def _shared(by_ref: dict[str, list[_Ref]], entry: _Entry, run_id: str, tenant: str | None) -> bool:
    """The entry's ref was given to another run of this run's tenant for the
    same kind and the entry's business key (a lookup by business key finds
    whichever run's call came first)."""
    if entry.external_ref is None or entry.business_key is None:
        return False
    return any(
        o.run_id != run_id
        and o.tenant == tenant
        and o.kind == entry.kind
        and o.business_key == entry.business_key
        for o in by_ref.get(entry.external_ref, [])
    )


def _recorded_so_applied(
    f: Findings,
    history: History,
    run_id: str,
    tenant: str | None,
    final: Event,
    mine: dict[str, list[_Ref]],
    by_ref: dict[str, list[_Ref]],
    entries: list[_Entry],
    foreign: frozenset[int],
) -> None:
    answered = [
        e
        for e in history.by_run(run_id)
        if e.f is EventF.EFFECT and _answered(e) and e.index not in foreign
    ]
    for entry in entries:
        if entry.status != "done":
            continue
        f.count("done_entries")
        ref = entry.external_ref
        if ref is not None:
            if ref in mine:
                continue
            owners = by_ref.get(ref, [])
            if _shared(by_ref, entry, run_id, tenant):
                f.count("shared_refs")
                continue
            whose = (
                f"the world gave it to run {owners[0].run_id} (tenant {owners[0].tenant})"
                if owners
                else "the world never gave that ref"
            )
            f.fail(
                f"run {run_id} completed with its {entry.describe()} done, but {whose}",
                [final.index, *(o.index for o in owners[:1])],
            )
            f.count("foreign_refs")
            continue
        calls = [
            e
            for e in answered
            if e.value.get("kind") == entry.kind
            and (entry.request_hash is None or e.value.get("request_hash") == entry.request_hash)
        ]
        if calls:
            continue
        tried = [
            e.index
            for e in history.by_run(run_id)
            if e.f is EventF.EFFECT and e.value.get("kind") == entry.kind
        ]
        f.fail(
            f"run {run_id} completed with its {entry.describe()} done, but the world never "
            f"performed a {entry.kind} call for it"
            + (
                f" (it refused or never processed {plural(len(tried), 'attempt')})" if tried else ""
            ),
            [final.index, *tried[:3]],
        )
        f.count("done_but_never_applied")


def _answered(e: Event) -> bool:
    """The world processed the call (applied it, deduplicated it, or answered a
    read): what a runtime may rightly hold as done."""
    v = e.value
    return v.get("applied") is True or v.get("outcome") in (
        "applied",
        "deduplicated",
        "unknown_applied",
        "killed_after_apply",
    )


def _reported_so_applied(
    f: Findings,
    run_id: str,
    final: Event,
    mine: dict[str, list[_Ref]],
    by_ref: dict[str, list[_Ref]],
    entries: list[_Entry],
) -> None:
    accepted = set(mine) | {e.external_ref for e in entries if e.external_ref is not None}
    for path, text in _strings(final.value.get("output"), "output"):
        if text not in by_ref or text in accepted:
            continue
        owner = by_ref[text][0]
        f.fail(
            f"run {run_id} completed reporting {path} = {text!r}, a ref the world gave "
            f"run {owner.run_id} (tenant {owner.tenant}), not this run",
            [final.index, owner.index],
        )
        f.count("foreign_output_refs")


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(value, list):
        for n, v in enumerate(value):
            yield from _strings(v, f"{path}[{n}]")
