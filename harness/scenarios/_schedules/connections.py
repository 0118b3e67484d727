"""Targeted schedules of the ``storage`` and ``network`` families: a worker's
store connections cut, reset, partitioned or slowed at its commits."""

from __future__ import annotations

from ...adapters import Capability, WorkflowSpec
from ...model import ContinueWorker, NetworkFault, Scenario, StorageFault
from .._profile import Commit
from ._common import _Aim, _interleave, _paused, _rounds, _run, _scenario

#: network fault schedules at most: a lost acknowledgement costs the worker
#: its network timeout (seconds, not the tenths a kill costs)
MAX_NETWORK = 10


#: network fault kinds on a reply, that only a proxy can inflict (Toxiproxy)
REPLY_KINDS = ("latency", "slow_reply", "cut_reply")


def _storage_cuts(a: _Aim) -> list[Scenario]:
    """The store's connections cut under a worker held inside the first commit
    after the decision (that transaction must die whole), then under one
    held between steps on the way to the first effect (its pooled
    connections die idle; the next use must recover). Every kind the
    deployment offers, at once."""
    kinds = a.u.offered_storage_kinds()
    if "storage" not in a.families or not kinds:
        return []
    cuts = [StorageFault(kind=k) for k in kinds]
    inside: list[Scenario] = []
    idle: list[Scenario] = []
    for wf in a.workflows:
        p = a.profile(wf)
        site_in = next(((s, n) for s, n in p.resume_sites() if s in a.in_txn), None)
        if site_in is not None:
            inside.append(
                _scenario(
                    f"{wf.name}/storage_cut_in_commit/{site_in[0]}@{site_in[1]}",
                    _run(wf),
                    *_rounds(p.resume_round),
                    _paused("s1", *site_in),
                    *cuts,
                    ContinueWorker(worker_id="s1"),
                )
            )
        for es in p.effect_sites[:1]:
            near = next(((s, n) for s, n in reversed(es.approach) if s in a.pausable), None)
            if near is not None:
                idle.append(
                    a.before(
                        wf,
                        es,
                        _paused("s1", *near),
                        *cuts,
                        ContinueWorker(worker_id="s1"),
                        name=f"storage_cut_idle/{es.effect}/{near[0]}@{near[1]}",
                    )
                )
    return _interleave([inside, idle])


def _network(a: _Aim) -> list[Scenario]:
    """Network faults on the worker's storage connection, at each kind of
    commit a fault-free run made: its acknowledgement lost (the commit
    reached the store, the worker cannot know) at the *intent* commit (the
    last before an effect's call), the *result* commit (the first after
    it), the *decision* commit (the first after an approval was delivered)
    and a plain *checkpoint* (the first commit that is none of those); the
    connection reset between two statements of the first commit after the
    decision (the first of all, with none); and a partition past the lease
    right before the first effect (:func:`_partitions`). The worker is
    paused at the commit's last in-transaction crash point (a lost
    acknowledgement) or at a middle one (a reset). Every variant once, on
    the first workflow where a fault-free run made that kind of commit,
    before any is tried on the next workflow: the decision's commit first
    (where most is at stake, and a commit that moves the run's status shows
    a commit written twice), then a reset and a partition, so a short plan
    fires every kind.

    Where the backend can (Toxiproxy: see ``Universe.network_kinds``), the
    first commit aimed at also gets its reply held back past the lease
    (``latency``: the commit still in flight when another worker may take
    the run), and the reset's position a reply in fragments
    (``slow_reply``) and a reply cut after a few bytes (``cut_reply``)."""
    if "network" not in a.families:
        return []
    offered = a.u.offered_network_kinds()
    order = (
        "decision", "reset", "partition", *REPLY_KINDS, "intent", "result", "checkpoint",
    )  # fmt: skip
    # per variant, per workflow: breadth-first across workflows within a variant
    by_variant: dict[str, list[list[Scenario]]] = {v: [] for v in order}
    for wf in a.workflows:
        mine: dict[str, list[Scenario]] = {v: [] for v in order}
        targets = _network_targets(a, wf)
        first_end = next(((c, site) for v, c, site in targets if v != "reset"), None)
        aimed: list[tuple[str, str, Commit, tuple[str, int]]] = []
        for variant, c, site in targets:
            kind = "reset_mid_transaction" if variant == "reset" else "commit_ack_lost"
            aimed.append((variant, kind, c, site))
            if variant == "reset":
                aimed += [(k, k, c, site) for k in ("slow_reply", "cut_reply")]
        if first_end is not None:
            aimed.append(("latency", "latency", *first_end))
        for variant, kind, c, site in aimed:
            if kind not in offered:
                continue  # never armed where it cannot fire (a Unix socket, the kernel)
            label = kind if kind == variant else f"{kind}/{variant}"
            name = f"{label}/r{c.round}/{site[0]}@{site[1]}"
            mine[variant].append(
                _scenario(
                    f"{wf.name}/{name}",
                    _run(wf),
                    *_rounds(c.round),
                    _paused("n1", *site),
                    NetworkFault(kind=kind, worker_id="n1"),
                )
            )
        mine["partition"] = _partitions(a, wf) if "partition" in offered else []
        for v in order:
            by_variant[v].append(mine[v])
    return _interleave([_interleave(by_variant[v]) for v in order])[:MAX_NETWORK]


def _partitions(a: _Aim, wf: WorkflowSpec) -> list[Scenario]:
    """A worker partitioned from the store at the boundary nearest before
    the workflow's first effect, past its lease, while another takes over:
    back, it is a zombie about to call (needs the clock)."""
    if Capability.CLOCK not in a.u.capabilities:
        return []
    out = []
    for es in a.profile(wf).effect_sites[:1]:
        near = next(((s, n) for s, n in reversed(es.approach) if s in a.pausable), None)
        if near is not None:
            out.append(
                a.before(
                    wf,
                    es,
                    _paused("n1", *near),
                    NetworkFault(kind="partition", worker_id="n1"),
                    name=f"partition/before/{es.effect}/{near[0]}@{near[1]}",
                )
            )
    return out


def _network_targets(a: _Aim, wf: WorkflowSpec) -> list[tuple[str, Commit, tuple[str, int]]]:
    """(variant, commit, paused at) for each kind of commit of ``wf``'s
    fault-free run, each commit once (see :func:`_network`)."""
    p = a.profile(wf)
    commits = list(p.commits(a.in_txn))
    if not commits:
        return []
    out: list[tuple[str, Commit, tuple[str, int]]] = []
    used: set[tuple[int, tuple[str, int]]] = set()

    def add(variant: str, c: Commit | None) -> None:
        if c is not None and (c.round, c.last) not in used:
            used.add((c.round, c.last))
            out.append((variant, c, c.last))

    decided = next((c for c in commits if c.round == p.resume_round), None)
    if wf.needs_approval and p.resume_round > 0:
        add("decision", decided)
    for es in p.effect_sites:
        trace = p.rounds[es.round] if es.round < len(p.rounds) else ()
        at = len(es.approach) - 1
        if not trace or trace[: at + 1] != es.approach:
            continue  # the killed run went another way: no position to aim from
        ends = {c.last: c for c in commits if c.round == es.round}
        before = [ends[s] for s in trace[:at] if s in ends]
        after = [ends[s] for s in trace[at + 1 :] if s in ends]
        add("intent", before[-1] if before else None)
        add("result", after[0] if after else None)
    add("checkpoint", next((c for c in commits if (c.round, c.last) not in used), None))
    # The reset: between two statements of the first commit after the
    # decision (or of the first commit), at its middle crash point.
    first = decided or commits[0]
    trace = p.rounds[first.round]
    end = trace.index(first.last)
    start = end
    while start > 0 and trace[start - 1][0] in a.in_txn:
        start -= 1
    span = trace[start : end + 1]
    out.append(("reset", first, span[(len(span) - 1) // 2]))
    return out
