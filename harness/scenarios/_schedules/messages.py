"""The targeted schedules of the ``message`` family: bad and misdirected decisions,
deliveries while a worker holds the run, another tenant's events, the same
run for another tenant; and its sampled-search episode."""

from __future__ import annotations

from hypothesis import strategies as st

from ...model import (
    Approve,
    ContinueWorker,
    CrashSpec,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Step,
    Submit,
)
from .._universe import TENANTS, Universe
from ._common import _Aim, _paused, _rounds, _run, _scenario
from ._draws import _kind, _run_ids
from ._registry import category, episode_of
from ._swarm import Swarm


@category("message", place=30)
def _messages(a: _Aim) -> list[Scenario]:
    """The decision delivered twice (same message id); and, for the first
    gated workflow, decisions the runtime must refuse at the door.

    A refused message carries the *opposite* of the approver's decision: the
    approver (asked at the final Quiesce) rejects while the forged, wrong-role
    or wrong-params message approves, so a runtime that trusts it performs an
    effect nobody genuinely approved. A message carrying the same decision
    the approver gives would leave a trusting runtime and a checking one
    indistinguishable. Then once the other way round: the approver approves,
    a forged message rejects (a trusting runtime cancels the run).

    A decision genuinely signed for another approval of the run's tenant
    (``misdirected``): the twin run's, same workflow and input, so the same
    role and parameters; only the approval it answers differs. It carries
    the decision the twin's approver gives (approved) to a run whose
    approver rejects, so a runtime that checks signature, tenant, role and
    parameters but not which approval a decision answers refunds a
    customer nobody approved.

    A message of another tenant naming the run (``cross_tenant``): the
    decision that tenant's approver genuinely signed, with its own key,
    carrying the opposite decision; and, for each workflow whose fault-free
    run hands off and waits (a child's result, a message), the event it
    waits on, sent by another tenant while it waits (the worker killed right
    after the first commit that hands off, as ``_wait_deadlines``). Neither
    may move the run.
    """
    if "message" not in a.families:
        return []
    gated = [wf for wf in a.workflows if wf.needs_approval]
    twice = [
        _scenario(
            f"{wf.name}/duplicate_decision",
            _run(wf),
            RunWorker(worker_id="w1"),
            Approve(run_id="r1", copies=2),
        )
        for wf in gated
    ]
    refused = [
        _scenario(
            f"{wf.name}/{variant}_decision",
            _run(wf).model_copy(update={"decision": "rejected"}),
            RunWorker(worker_id="w1"),
            Approve(run_id="r1", variant=variant, decision="opposite"),
        )
        for wf in gated[:1]
        for variant in ("forged", "wrong_role", "wrong_params", "cross_tenant")
    ]
    # The decision the approver genuinely signed for another run's approval
    # (same tenant, workflow and input, so the same role and parameters),
    # addressed to this run, which the approver will reject.
    refused += [
        _scenario(
            f"{wf.name}/misdirected_decision",
            _run(wf).model_copy(update={"decision": "rejected"}),
            Submit(run=_run(wf).model_copy(update={"run_id": "r2"})),
            RunWorker(worker_id="w1"),
            Approve(run_id="r1", variant="misdirected", decision="opposite", signed_for="r2"),
        )
        for wf in gated[:1]
    ]
    refused += [
        _scenario(
            f"{wf.name}/forged_rejection",
            _run(wf),
            RunWorker(worker_id="w1"),
            Approve(run_id="r1", variant="forged", decision="opposite"),
        )
        for wf in gated[:1]
    ]
    # The approver's genuine opposite decision right behind the first: the
    # first counts, whichever the plan is.
    changed = [
        _scenario(
            f"{wf.name}/changed_mind/{planned}",
            _run(wf).model_copy(update={"decision": planned}),
            RunWorker(worker_id="w1"),
            Approve(run_id="r1", variant="changed_mind"),
        )
        for wf in gated[:1]
        for planned in ("rejected", "approved")
    ]
    return twice[:1] + refused + changed + _cross_tenant_events(a) + twice[1:]


#: delivery-while-held schedules at most (one per gated workflow)
MAX_HELD_DELIVERIES = 2


@category("message", place=70)
def _deliveries_while_held(a: _Aim) -> list[Scenario]:
    """A message delivered while a worker holds the run between its inbox
    read and the commit that acknowledges what it read. The run waits for
    its decision; a message it must ignore (a forged decision) comes first,
    so the worker that next claims the run reads it and commits its
    acknowledgement; that worker is paused at the last pause point before
    the first commit of the round that follows a decision in the fault-free
    run (after its read, before its acknowledging commit), the approver's
    valid decision is delivered, and the worker goes on, its commit
    succeeding. The decision was never read: it must still be pending
    after that commit, and the run must take it. A runtime that
    acknowledges the run's whole pending inbox, not the messages it read,
    loses it unseen (the run then waits for ever, or times out). The
    ignored message carries the approver's own decision, so a runtime that
    wrongly trusts it ends the same: this schedule tests the acknowledgement
    only. Gated workflows first-decision rounds, a few."""
    if "message" not in a.families or not a.pausable:
        return []
    out: list[Scenario] = []
    for wf in a.workflows:
        p = a.profile(wf)
        r = p.resume_round
        if not wf.needs_approval or r < 1 or r >= len(p.rounds):
            continue
        trace = p.rounds[r]
        first = next((i for i, (site, _) in enumerate(trace) if site in a.in_txn), len(trace))
        held = next((trace[i] for i in reversed(range(first)) if trace[i][0] in a.pausable), None)
        if held is None:
            continue
        out.append(
            _scenario(
                f"{wf.name}/deliver_while_held/r{r}/{held[0]}@{held[1]}",
                _run(wf),
                *_rounds(r - 1),
                RunWorker(worker_id=f"p{r - 1}"),
                Approve(run_id="r1", variant="forged"),
                _paused("h1", *held),
                Approve(run_id="r1"),
                ContinueWorker(worker_id="h1"),
            )
        )
    return out[:MAX_HELD_DELIVERIES]


def _cross_tenant_events(a: _Aim) -> list[Scenario]:
    """Another tenant sends the event a run waits on (see :func:`_messages`)."""
    if "crash" not in a.families or not a.in_txn:
        return []
    out: list[Scenario] = []
    for wf in a.workflows:
        c = next((c for c in a.profile(wf).commits(a.in_txn) if c.handoff and c.after), None)
        if c is None or c.after is None:
            continue
        out.append(
            _scenario(
                f"{wf.name}/cross_tenant_event/r{c.round}/{c.last[0]}@{c.last[1]}",
                _run(wf),
                *_rounds(c.round),
                RunWorker(worker_id="w1", crash=CrashSpec(site=c.after[0], nth=c.after[1])),
                Approve(run_id="r1", variant="cross_tenant", decision="opposite"),
            )
        )
    return out


@category("message", place=50)
def _tenant_twins(a: _Aim) -> list[Scenario]:
    """The same run for a second tenant, submitted once the first tenant's
    has ended, without any fault: a runtime that lets one tenant's data
    reach another's run (a cache keyed by content, a deduplication or a
    memory read that forgets the tenant) changes the second run, and the
    oracle, one deployment per tenant, shows it. With the cross-tenant
    families (``memory``, ``message``): isolation is what they test."""
    if not {"memory", "message"} & a.families or len(TENANTS) < 2:
        return []
    out = []
    for wf in a.workflows:
        first = _run(wf)
        twin = first.model_copy(update={"run_id": "r2", "tenant": TENANTS[1]})
        out.append(
            _scenario(
                f"{wf.name}/tenant_twin/{TENANTS[1]}",
                first,
                Quiesce(),  # the first run to its end, its decisions delivered
                Submit(run=twin),
                RunWorker(worker_id="t1"),
            )
        )
    return out


@episode_of("message")
def _message_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    variant = _kind(draw, swarm, "message")
    if variant == "while_held":
        return _held_delivery(draw, u, runs, n)
    if variant == "misdirected":
        return _misdirected(draw, u, runs, n)
    # An invalid message may carry the opposite of the approver's
    # decision: a runtime that trusts it then does what was refused.
    opposite = variant not in ("valid", "changed_mind") and draw(st.booleans())
    return [
        RunWorker(worker_id=f"w{n}"),
        Approve(
            run_id=draw(st.sampled_from(_run_ids(runs))),
            variant=variant,
            decision="opposite" if opposite else "planned",
            copies=draw(st.integers(min_value=1, max_value=3)),
            fresh_copies=draw(st.integers(min_value=0, max_value=1)),
        ),
    ]


def _gated(u: Universe, runs: tuple[RunSpec, ...]) -> list[RunSpec]:
    """The runs whose workflow waits for an approval."""
    return [r for r in runs for wf in u.workflows if wf.name == r.workflow and wf.needs_approval]


def _misdirected(draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int) -> list[Step]:
    """A decision genuinely signed for another run's approval, addressed to
    a run of the same tenant: its identical twin's (same role and
    parameters: only the approval differs), submitted here when the
    workload has none, or another gated run of the tenant's. Its decision
    may be the opposite of the addressee's approver's. Without a gated
    run, a valid decision."""
    gated = _gated(u, runs)
    if not gated:
        return [RunWorker(worker_id=f"w{n}"), Approve(run_id=draw(st.sampled_from(runs)).run_id)]
    pairs = [(a, b) for a in gated for b in gated if a.run_id != b.run_id and a.tenant == b.tenant]
    twins = [(a, b) for a, b in pairs if (a.workflow, a.input) == (b.workflow, b.input)]
    submit: list[Step] = []
    if twins or (pairs and bool(draw(st.booleans()))):
        to, signer = draw(st.sampled_from(twins or pairs))
    else:
        to = draw(st.sampled_from(gated))
        # A run id no other step uses: the workload's are r1..rN.
        signer = to.model_copy(update={"run_id": f"r{len(runs) + 1}x{n}"})
        submit = [Submit(run=signer)]
    return [
        *submit,
        RunWorker(worker_id=f"w{n}"),
        Approve(
            run_id=to.run_id,
            variant="misdirected",
            decision="opposite" if draw(st.booleans()) else "planned",
            signed_for=signer.run_id,
        ),
    ]


def _held_delivery(draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int) -> list[Step]:
    """The approver's decision delivered while a worker holds the run
    between its inbox read and the commit that acknowledges what it read
    (as the targeted ``deliver_while_held``): the runs brought to their
    waits, a message to ignore (a forged decision) makes the run claimable,
    the next worker is paused at a pause point the runs pass, the valid
    decision arrives, the worker goes on. Without pause points, a valid
    decision."""
    run_id = draw(st.sampled_from([r.run_id for r in _gated(u, runs)] or [runs[0].run_id]))
    # Where the runs pass, if the site profile says; else any pause point.
    reached = u.reached(runs, u.pause_points) or dict.fromkeys(u.pause_points, 1)
    if not reached:
        return [RunWorker(worker_id=f"w{n}"), Approve(run_id=run_id)]
    site = draw(st.sampled_from(sorted(reached)))
    nth = draw(st.integers(min_value=1, max_value=min(reached[site], 3)))
    return [
        RunWorker(worker_id=f"w{n}"),
        Approve(run_id=run_id, variant="forged"),
        RunWorker(worker_id=f"h{n}", crash=CrashSpec(site=site, nth=nth, action="pause")),
        Approve(run_id=run_id),
        ContinueWorker(worker_id=f"h{n}"),
    ]
