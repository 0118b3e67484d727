"""``legal_transitions``: every checkpointed state change is legal, ordered, unforked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..history import History
from ..model import Event, EventF, PropertyResult
from ._base import Findings, guarded, plural, short, vint, vstr

NAME = "legal_transitions"

#: actions that mark a run (un)parked without changing its status
_PARK_ACTIONS = frozenset({"parked", "unparked"})


@dataclass(frozen=True)
class _Transition:
    index: int
    run_id: str
    src: str | None
    dst: str
    version: int
    action: str | None


@guarded(NAME)
def check_legal_transitions(history: History, oracle: History | None) -> PropertyResult:
    """The runtime's checkpointed transitions obey its own state machine.

    A failure usually means: two writers committed over one another (a
    write without a version check or a fencing token), or one change was
    split over two commits or applied twice.

    Promises, per run and in history order: each ``transition`` goes from a
    status to one of its declared successors (``declaration.transitions``,
    raw statuses; ``from`` null is a creation and always allowed; an action
    ``parked``/``unparked`` whose ``from`` equals ``to`` is an allowed
    self-loop); ``state_version`` strictly increases; each ``from`` equals the
    previous ``to`` (a break means a lost or stale write, a second creation
    is a break too); no two transitions of a run share a ``state_version``
    (a fork: two writers both succeeded from one version). Without a
    declared table (null, or no declaration) only versions and chaining are
    checked, and the message says so. The oracle is not used.

    Cannot see: transitions the runtime never reported, or whether a legal
    transition was the right one. A run's first observed transition may
    start anywhere (observation may begin late). Runs submitted with no
    transition recorded at all give ``unknown`` (the adapter reports none).
    """
    f = Findings(NAME)
    f.zero("transitions", "runs")
    decl = history.declaration()
    table = decl.transitions if decl is not None else None
    if decl is not None and decl.problems:
        f.unknown(f"the declaration is malformed ({'; '.join(decl.problems)})", [decl.index])
    if table is None:
        f.note("No transition table was declared, so only versions and chaining were checked")
    runs: dict[str, list[_Transition]] = {}
    recorded = history.by_f(EventF.TRANSITION)
    if not recorded and history.submitted_ok():
        f.unknown("runs were submitted but the history holds no transition events")
    for e in recorded:
        t = _parse(e)
        if t is None:
            f.unknown(
                f"transition #{e.index} lacks a run_id, a 'to' status or an integer state_version",
                [e.index],
            )
            continue
        runs.setdefault(t.run_id, []).append(t)
        f.count("transitions")
        if table is not None:
            _check_edge(f, t, table)
    f.count("runs", len(runs))
    for chain in runs.values():
        _check_chain(f, chain)
    return f.result(
        f"{plural(f.counts['transitions'], 'transition')} of {plural(f.counts['runs'], 'run')} "
        + ("were legal, " if table is not None else "")
        + "strictly versioned, chained and unforked",
        evidence=f.counts["transitions"],
    )


def _parse(e: Event) -> _Transition | None:
    run_id, dst, version = vstr(e, "run_id"), vstr(e, "to"), vint(e, "state_version")
    src = e.value.get("from")
    if (
        run_id is None
        or dst is None
        or version is None
        or not (src is None or isinstance(src, str))
    ):
        return None
    return _Transition(e.index, run_id, src, dst, version, vstr(e, "action"))


def _check_edge(f: Findings, t: _Transition, table: Mapping[str, frozenset[str]]) -> None:
    if t.src is None or (t.action in _PARK_ACTIONS and t.src == t.dst):
        return
    successors = table.get(t.src)
    if successors is None:
        f.fail(
            f"run {t.run_id} left status {t.src!r}, which the declared table does not know "
            f"(transition #{t.index} to {t.dst!r})",
            [t.index],
        )
    elif t.dst not in successors:
        allowed = ", ".join(sorted(successors)) or "nothing (terminal)"
        f.fail(
            f"run {t.run_id} went {t.src} -> {t.dst} (transition #{t.index}, version "
            f"{t.version}), but {t.src} may only go to {allowed}",
            [t.index],
        )


def _check_chain(f: Findings, chain: list[_Transition]) -> None:
    seen: dict[int, _Transition] = {}
    prev: _Transition | None = None
    for t in chain:
        twin = seen.get(t.version)
        if twin is not None:
            f.fail(
                f"run {t.run_id} forked: transitions #{twin.index} ({_edge(twin)}) and "
                f"#{t.index} ({_edge(t)}) both wrote state_version {t.version}",
                [twin.index, t.index],
            )
            f.count("forks")
        elif prev is not None and t.version < prev.version:
            f.fail(
                f"run {t.run_id}'s state_version went back from {prev.version} "
                f"(#{prev.index}) to {t.version} (#{t.index}): a stale write",
                [prev.index, t.index],
            )
            f.count("stale_writes")
        elif prev is not None and t.src != prev.dst:
            what = "was created again" if t.src is None else f"continued from {short(t.src)}"
            f.fail(
                f"run {t.run_id}'s chain broke: #{prev.index} left it {prev.dst} (version "
                f"{prev.version}) but #{t.index} {what} (version {t.version}): a lost or "
                "stale write",
                [prev.index, t.index],
            )
            f.count("chain_breaks")
        seen.setdefault(t.version, t)
        prev = t


def _edge(t: _Transition) -> str:
    return f"{t.src} -> {t.dst}"
