"""The targeted schedules of the ``storage`` and ``network`` families: a worker's
store connections cut, reset, partitioned or slowed at its commits; and the
two families' sampled-search episodes."""

from __future__ import annotations

from hypothesis import strategies as st

from ...adapters import Capability, WorkflowSpec
from ...model import (
    ContinueWorker,
    CrashSpec,
    NetworkFault,
    NetworkKind,
    RunSpec,
    RunWorker,
    Scenario,
    Step,
    StorageFault,
)
from ...vocabulary import AT_EFFECT_NETWORK_KINDS, NETWORK_KINDS
from .._profile import Commit
from .._universe import Universe
from ._common import _Aim, _interleave, _paused, _rounds, _run, _scenario
from ._draws import _approved_first, _effects, _kind
from ._registry import category, episode_of
from ._swarm import Swarm

#: network fault schedules at most: a lost acknowledgement costs the worker
#: its network timeout (seconds, not the tenths a kill costs)
MAX_NETWORK = 10


#: network fault kinds on a reply, that only a proxy can inflict (Toxiproxy)
REPLY_KINDS = ("latency", "slow_reply", "cut_reply")


@category("storage", place=180)
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


@category("network", place=190)
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
        "decision", "reset", "partition", "after_apply", *REPLY_KINDS, "intent", "result",
        "checkpoint",
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
        mine["partition"] = _partitions(a, wf, first_end) if "partition" in offered else []
        if "partition_after_apply" in offered:
            mine["after_apply"] = _partitions_after_apply(a, wf)
        for v in order:
            by_variant[v].append(mine[v])
    return _interleave([_interleave(by_variant[v]) for v in order])[:MAX_NETWORK]


def _partitions_after_apply(a: _Aim, wf: WorkflowSpec) -> list[Scenario]:
    """For a runtime without crash points: the world holds the worker right
    after applying each effect the workflow makes (in the order its
    fault-free run made them, where profiled; else as declared), and the
    worker is cut off from its runtime's server or database before it can
    report the result; another worker runs; then it heals. Temporal's lost
    activity completion: the server times the activity out and retries it."""
    sites = a.profile(wf).effect_sites
    rounds = {es.effect: es.round for es in sites}
    effects = [es.effect for es in sites] or list(wf.effects)
    return [
        _scenario(
            f"{wf.name}/partition_after_apply/{eff}",
            _run(wf),
            *_rounds(rounds.get(eff, 0)),
            NetworkFault(kind="partition_after_apply", worker_id="n1", effect=eff),
        )
        for eff in effects
    ]


def _partitions(
    a: _Aim, wf: WorkflowSpec, inside: tuple[Commit, tuple[str, int]] | None = None
) -> list[Scenario]:
    """A worker partitioned from the store at the boundary nearest before
    the workflow's first effect, past its lease, while another takes over:
    back, it is a zombie about to call (needs the clock). Without the clock,
    through the worker's own proxies (:func:`_routed`): held ``inside`` the
    first commit aimed at, right before its COMMIT (no lease to outlive:
    its sessions were its hold on the run, and no pause point needed)."""
    if Capability.CLOCK not in a.u.capabilities:
        if inside is None or not _routed(a.u):
            return []
        c, site = inside
        return [
            _scenario(
                f"{wf.name}/partition/r{c.round}/{site[0]}@{site[1]}",
                _run(wf),
                *_rounds(c.round),
                _paused("n1", *site),
                NetworkFault(kind="partition", worker_id="n1"),
            )
        ]
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


@episode_of("storage")
def _storage_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    return _storage_steps(draw, u, runs, n)


def _storage_steps(draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int) -> list[Step]:
    """Hold a worker, cut its storage connections, let it go on.

    Held *inside* a transaction (a crash point that is not a pause point), the
    cut kills the transaction: nothing of that checkpoint may be committed.
    Held *between* steps, its pooled connections die while idle: the next use
    must notice and carry on with fresh ones. Either way the run must end as
    if nothing happened.
    """
    # Held where the workload's runs actually pass (the site profile): a
    # pause that never fires leaves no worker holding a connection, and the
    # cut then finds nothing to cut (armed, never fired).
    reached = u.reached(runs, (*u.in_transaction_points(), *u.pause_points))
    inside = tuple(s for s in u.in_transaction_points() if s in reached) or (
        u.in_transaction_points()
    )
    idle = tuple(s for s in u.pause_points if s in reached) or u.pause_points
    variants = [v for v, ok in (("in_transaction", inside), ("idle", idle)) if ok]
    variant = draw(st.sampled_from(variants))
    site = draw(st.sampled_from(inside if variant == "in_transaction" else idle))
    nth = draw(st.integers(min_value=1, max_value=min(3, reached.get(site, 3))))
    kinds = draw(
        st.lists(st.sampled_from(u.offered_storage_kinds()), min_size=1, max_size=2, unique=True)
    )
    return [
        RunWorker(worker_id=f"s{n}", crash=CrashSpec(site=site, nth=nth, action="pause")),
        *(StorageFault(kind=k) for k in kinds),
        ContinueWorker(worker_id=f"s{n}"),
    ]


def _offered_network_kinds(u: Universe) -> tuple[str, ...]:
    """The network kinds ``u`` can arm: those its connections let a backend
    inflict (every kernel kind when not probed)."""
    return u.offered_network_kinds() or NETWORK_KINDS


@episode_of("network", offered=_offered_network_kinds, marks=(NetworkFault,))
def _network_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    # Drawn as before the proxy's kinds existed when the swarm allows none
    # of them: the stream of an adapter whose faults run on netfilter rules
    # stays as it was.
    allowed = swarm.kinds_of("network")
    pool = NETWORK_KINDS if set(allowed) <= set(NETWORK_KINDS) else None
    kind = _kind(draw, swarm, "network", pool)
    offered = _offered_network_kinds(u)
    # a swarm made without the universe's kinds: only what the backend can do
    kind = kind if kind in offered else offered[0]
    if kind in AT_EFFECT_NETWORK_KINDS:
        return _after_apply_steps(draw, u, runs, n)
    return _network_steps(draw, u, runs, n, kind)


def _after_apply_steps(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int
) -> list[Step]:
    """A worker held by the world right after applying a call of an effect
    the runs make (mostly the first from now; sometimes a later one: a
    retry, another run's), then cut off from its runtime's server or
    database while another worker runs; healed. Maybe after the runs'
    decisions."""
    effects = _effects(u, runs) or sorted({e for wf in u.workflows for e in wf.effects})
    effect = draw(st.sampled_from(effects))
    nth = draw(st.sampled_from((1, 1, 1, 2)))
    return [
        *_approved_first(draw, u, [r.run_id for r in runs], n),
        NetworkFault(kind="partition_after_apply", worker_id=f"n{n}", effect=effect, nth=nth),
    ]


def _network_sites(u: Universe, runs: tuple[RunSpec, ...], kind: str) -> dict[str, int]:
    """Where a worker is paused for a network fault of ``kind``, with hit
    bounds: for a lost acknowledgement, the last in-transaction crash point
    of each commit the workload's fault-free runs made (right before the
    COMMIT); for a reset, the other in-transaction points (between two
    statements); for a partition, the pause points. Without a profile,
    every in-transaction point; without any, the pause points (between
    steps: the next commit is hit)."""
    if kind == "partition":
        # Held between steps, holding the run's lease (see _network_episode).
        return u.reached(runs, u.pause_points) or _network_sites(u, runs, "reset_mid_transaction")
    in_txn = frozenset(u.in_transaction_points())
    ends: set[str] = set()
    for r in runs:
        p = u.profiles.get(r.workflow)
        if p is not None:
            ends.update(c.last[0] for c in p.commits(in_txn))
    reached = u.reached(runs, tuple(in_txn))
    if kind == "commit_ack_lost":
        aimed = {s: n for s, n in reached.items() if s in ends}
    else:
        aimed = {s: n for s, n in reached.items() if s not in ends}
    if aimed:
        return aimed
    if in_txn:
        return reached or dict.fromkeys(sorted(in_txn), 3)
    return u.reached(runs, u.pause_points) or dict.fromkeys(u.pause_points, 3)


def _routed(u: Universe) -> bool:
    """Whether the workers reach their stores through proxies of their own
    (the Toxiproxy backend, an adapter with ``routes_workers``): only then
    are a reply's kinds offered. A partition there closes the worker's
    sessions, so a runtime without a clock has no lease left to outlive."""
    return set(REPLY_KINDS) <= set(u.offered_network_kinds())


def _network_steps(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, kind: str
) -> list[Step]:
    """Pause a worker inside a commit, then lose that commit's
    acknowledgement or reset its connection (see :mod:`harness.nemesis._network`);
    or pause it between steps and partition it from the store past its
    lease while another worker takes over (with the clock, or workers routed
    through proxies of their own, whose partition needs no lease to run
    out: else a lost acknowledgement instead). Maybe after the runs'
    decisions, so it lands on the resume's commits."""
    if kind == "partition" and Capability.CLOCK not in u.capabilities and not _routed(u):
        kind = "commit_ack_lost"
    # A reply held back, and a COMMIT lost on its way, are aimed where an
    # acknowledgement is lost (right before a COMMIT); a fragmented or cut
    # reply where a reset is (between two statements).
    aim = {"latency": "commit_ack_lost", "slow_reply": "reset_mid_transaction"}
    aim["commit_lost"] = "commit_ack_lost"
    aim["cut_reply"] = "reset_mid_transaction"
    sites = _network_sites(u, runs, aim.get(kind, kind))
    if not sites:  # nowhere to hold the worker between steps: inside a commit
        kind = "commit_ack_lost"
        sites = _network_sites(u, runs, kind)
    site = draw(st.sampled_from(sorted(sites)))
    later = list(range(2, min(sites[site], 6) + 1))
    nth = draw(st.sampled_from([1] * max(1, len(later)) + later))
    kinds: dict[str, NetworkKind] = {
        "commit_ack_lost": "commit_ack_lost",
        "reset_mid_transaction": "reset_mid_transaction",
        "partition": "partition",
        "latency": "latency",
        "slow_reply": "slow_reply",
        "cut_reply": "cut_reply",
        "commit_lost": "commit_lost",
        "partition_after_apply": "partition_after_apply",
    }
    return [
        *_approved_first(draw, u, [r.run_id for r in runs], n),
        RunWorker(worker_id=f"n{n}", crash=CrashSpec(site=site, nth=nth, action="pause")),
        NetworkFault(kind=kinds[kind], worker_id=f"n{n}"),
    ]
