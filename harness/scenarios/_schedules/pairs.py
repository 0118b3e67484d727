"""The commit-fault pairs: every (commit kind x fault) pair the fault-free trace
offers, one schedule each (see ``harness.scenarios._targeted``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...adapters import WorkflowSpec
from ...model import (
    Approve,
    Cancel,
    ContinueWorker,
    CrashSpec,
    NetworkFault,
    RunWorker,
    Scenario,
    StorageFault,
)
from .._profile import COMMIT_KINDS, Commit
from .._universe import Universe
from ._common import _Aim, _aim, _keyed, _paused, _rounds, _run, _scenario

# -- faults at every commit ------------------------------------------------------

#: every fault that can hit a commit, in the order a plan tries them
COMMIT_FAULTS = (
    "kill_inside",
    "kill_after",
    "operator_write",
    "delivery_while_held",
    "storage_cut",
    "reset",
    "ack_lost",
    "commit_lost",
)


@dataclass(frozen=True)
class CommitFaultPair:
    """One (commit kind x fault) pair of a plan: the schedule that aims the
    fault at a commit of that kind (None: not offered, and ``why``)."""

    kind: str
    fault: str
    scenario: Scenario | None = None
    #: why no schedule aims it: "capability: ..." (the adapter or this
    #: deployment lacks what the fault needs) or "trace: ..." (no fault-free
    #: run made a commit of that kind)
    why: str | None = None


def commit_fault_pairs(u: Universe) -> list[CommitFaultPair]:
    """Every (commit kind x fault) pair (:data:`~harness.scenarios._profile.COMMIT_KINDS`
    x :data:`COMMIT_FAULTS`), each with one schedule aimed at the first
    workflow whose fault-free run made a commit of that kind (for an
    effect's intent, sent-mark and result: the first whose effect a second
    call harms most, :data:`REPEAT_HARM`), or with why none is. Per commit,
    where each fault lands:

    - ``kill_inside``: the worker killed at the commit's middle in-transaction
      crash point (the transaction must die whole);
    - ``kill_after``: the worker killed at the first crash point after the
      commit (what it made durable must be enough to go on from: a commit
      that records half of a step -- a message acknowledged, what it
      decided not yet written -- loses the other half);
    - ``operator_write``: an operator cancels the run while the worker holds
      it at the commit's door (the last pause point before the transaction:
      the run read, its commit not begun), and the worker goes on; its
      commit must not write over the cancellation. Inside the transaction
      is not offered: the cancel would wait on the worker's lock, and the
      worker on the harness;
    - ``delivery_while_held``: the approver's decision delivered while the
      worker holds the run at the door of the commit that acknowledges what
      it read (after a forged decision it must ignore): only where the run
      reads a decision (``decision``, ``inbox_ack``);
    - ``storage_cut``: the store's connections cut under the worker held at
      the middle in-transaction crash point;
    - ``reset``: the worker's storage connection reset there;
    - ``ack_lost``: the commit's acknowledgement lost (the worker held at
      its last in-transaction crash point);
    - ``commit_lost``: the commit itself lost on its way, the connection
      ended (held there too; Toxiproxy only): to the worker the same as a
      lost acknowledgement, but nothing was written.

    Pairs come breadth-first: each fault's pairs interleaved with every
    other fault's, so a plan cut short has tried every fault."""
    a = _aim(u)
    storage = u.offered_storage_kinds() if "storage" in a.families else ()
    network = u.offered_network_kinds() if "network" in a.families else ()
    needs: dict[str, str | None] = {
        "kill_inside": None
        if "crash" in a.families and a.in_txn
        else "crash points inside a transaction (crash family)",
        "kill_after": None
        if "crash" in a.families and a.in_txn
        else "crash points inside a transaction, to tell a commit's end (crash family)",
        "operator_write": None
        if "operator" in a.families
        else "an operator's cancel and pause points (operator family)",
        "delivery_while_held": None
        if "message" in a.families and a.pausable
        else "approvals and pause points (message family)",
        "storage_cut": None
        if storage
        else "storage faults this deployment offers (a server's sessions to cut: Postgres, Redis)",
        "reset": None
        if "reset_mid_transaction" in network
        else "network faults on a TCP storage connection (reset_mid_transaction)",
        "ack_lost": None
        if "commit_ack_lost" in network
        else "network faults on a TCP storage connection (commit_ack_lost)",
        "commit_lost": None
        if "commit_lost" in network
        else "network faults through a proxy on a TCP storage connection (commit_lost)",
    }
    by_fault: list[list[CommitFaultPair]] = []
    for fault in COMMIT_FAULTS:
        mine = []
        for kind in COMMIT_KINDS:
            missing = needs[fault]
            if missing is not None:
                mine.append(CommitFaultPair(kind, fault, why=f"capability: {missing}"))
                continue
            if fault == "delivery_while_held" and kind not in ("decision", "inbox_ack"):
                mine.append(
                    CommitFaultPair(
                        kind, fault, why="trace: the run reads no message at this commit"
                    )
                )
                continue
            found = _pair_schedule(a, kind, fault, storage)
            if isinstance(found, str):
                mine.append(CommitFaultPair(kind, fault, why=found))
            else:
                mine.append(CommitFaultPair(kind, fault, scenario=found))
        by_fault.append(mine)
    longest = max(len(g) for g in by_fault)
    return [g[i] for i in range(longest) for g in by_fault if i < len(g)]


#: the commit kinds that belong to one effect (its intent, sent-mark, result)
EFFECT_COMMITS = ("intent", "sent_mark", "result")
#: what a second call of an effect does, worst first: forbidden outright
#: (``at_most_once``), a second effect where the service cannot tell
#: (``exactly_once`` without idempotency keys), absorbed by the service's
#: keys (``exactly_once``), allowed (``at_least_once``, undeclared)
REPEAT_HARM = ("at_most_once", "exactly_once_unkeyed", "exactly_once", "at_least_once")


def _repeat_harm(a: _Aim, eff: str) -> int:
    promise = a.u.delivery.get(eff, "at_least_once")
    if promise == "exactly_once" and not _keyed(eff):
        promise = "exactly_once_unkeyed"
    return REPEAT_HARM.index(promise) if promise in REPEAT_HARM else len(REPEAT_HARM)


#: the network fault kind of each network fault at a commit
_NET: dict[str, Literal["commit_ack_lost", "reset_mid_transaction", "commit_lost"]] = {
    "reset": "reset_mid_transaction",
    "ack_lost": "commit_ack_lost",
    "commit_lost": "commit_lost",
}


def _pair_schedule(a: _Aim, kind: str, fault: str, storage: tuple[str, ...]) -> Scenario | str:
    """The schedule aiming ``fault`` at the first commit of ``kind``, or why
    there is none ("trace: ...")."""
    candidates: list[tuple[WorkflowSpec, Commit, bool]] = []
    harm: dict[tuple[str, Commit], int] = {}
    for wf in a.workflows:
        p = a.profile(wf)
        kinds = p.commit_kinds(a.in_txn, gated=wf.needs_approval)
        candidates += [(wf, c, c in kinds["decision"]) for c in kinds.get(kind, [])]
        for c, eff in p.commit_effects(a.in_txn, gated=wf.needs_approval).items():
            harm[(wf.name, c)] = _repeat_harm(a, eff)
    if kind == "inbox_ack":
        # a message that is not the decision first: the decision has its own kind
        candidates.sort(key=lambda x: x[2])
    if kind in EFFECT_COMMITS:
        # An effect's own commits where a call made twice is a violation
        # first: a fault there that a runtime takes for a success (or a
        # failure) shows as a second call only where one was promised.
        candidates.sort(key=lambda x: harm.get((x[0].name, x[1]), len(REPEAT_HARM)))
    for wf, c, _ in candidates:
        p = a.profile(wf)
        trace = p.rounds[c.round]
        end = trace.index(c.last)
        start = end
        while start > 0 and trace[start - 1][0] in a.in_txn:
            start -= 1
        span = trace[start : end + 1]
        mid = span[(len(span) - 1) // 2]
        door = trace[start - 1] if start > 0 and trace[start - 1][0] in a.pausable else None
        name = f"{wf.name}/commit_fault/{kind}/{fault}/r{c.round}"
        if fault == "kill_inside":
            crash = CrashSpec(site=mid[0], nth=mid[1])
            return _scenario(
                f"{name}/{mid[0]}@{mid[1]}",
                _run(wf),
                *_rounds(c.round),
                RunWorker(worker_id="w1", crash=crash),
            )
        if fault == "kill_after":
            if c.after is None:
                continue  # the run ends with it: nothing after it to kill at
            return _scenario(
                f"{name}/{c.after[0]}@{c.after[1]}",
                _run(wf),
                *_rounds(c.round),
                RunWorker(worker_id="w1", crash=CrashSpec(site=c.after[0], nth=c.after[1])),
            )
        if fault in ("reset", "ack_lost", "commit_lost"):
            at = mid if fault == "reset" else c.last
            net = _NET[fault]
            return _scenario(
                f"{name}/{at[0]}@{at[1]}",
                _run(wf),
                *_rounds(c.round),
                _paused("n1", *at),
                NetworkFault(kind=net, worker_id="n1"),
            )
        if fault == "storage_cut":
            return _scenario(
                f"{name}/{mid[0]}@{mid[1]}",
                _run(wf),
                *_rounds(c.round),
                _paused("s1", *mid),
                *(StorageFault(kind=k) for k in storage),
                ContinueWorker(worker_id="s1"),
            )
        if door is None:
            continue  # nowhere to hold the worker before this commit
        if fault == "operator_write":
            return _scenario(
                f"{name}/{door[0]}@{door[1]}",
                _run(wf),
                *_rounds(c.round),
                _paused("o1", *door),
                Cancel(run_id="r1"),
                ContinueWorker(worker_id="o1"),
            )
        if fault == "delivery_while_held" and wf.needs_approval and c.round >= 1:
            return _scenario(
                f"{name}/{door[0]}@{door[1]}",
                _run(wf),
                *_rounds(c.round - 1),
                RunWorker(worker_id=f"p{c.round - 1}"),
                Approve(run_id="r1", variant="forged"),
                _paused("h1", *door),
                Approve(run_id="r1"),
                ContinueWorker(worker_id="h1"),
            )
    if not candidates:
        return f"trace: no fault-free run made a {kind.replace('_', '-')} commit"
    return f"trace: no {kind.replace('_', '-')} commit has a pause point before it"
