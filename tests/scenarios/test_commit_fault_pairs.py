"""Faults at every commit: each (commit kind x fault) pair the fault-free
trace offers gets one targeted schedule, early in the plan, and the plan
says why it has none for the others.

A made-up runtime's profile first (sites a..h pausable, t1/t2 inside a
transaction), then the reference runtime: a mistake of our own making at the
intent commit (its audit line written first, in a transaction of its own)
is caught by the plan's (intent x kill inside) schedule, within the ci
plan's targeted share; the plan before the pairs never killed a worker
inside an intent's transaction.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mutants_support import load_mutants

from harness.adapters._contract import Capability, WorkflowSpec
from harness.adapters.reference import ReferenceAdapter
from harness.model import Cancel, ContinueWorker, CrashSpec, RunWorker, Scenario
from harness.scenarios import EffectSite, Universe, WorkflowProfile, probe_universe, targeted
from harness.scenarios._profile import COMMIT_KINDS
from harness.scenarios._schedules.pairs import COMMIT_FAULTS, commit_fault_pairs
from harness.scenarios._targeted import commit_fault_plan, targeted_plan

PAY = WorkflowSpec(name="pay", inputs=({"x": 1},), needs_approval=True, effects=("mail.send",))

#: round 0: a checkpoint, the intent, the sent mark, the call (after d), the
#: result, the approval's request; round 1 (after the decision): the
#: decision's commit, then the last
ROUND0 = (
    ("a", 1),
    ("t1", 1),
    ("t2", 1),
    ("b", 1),
    ("t1", 2),
    ("t2", 2),
    ("c", 1),
    ("t1", 3),
    ("t2", 3),
    ("d", 1),
    ("e", 1),
    ("t1", 4),
    ("t2", 4),
    ("f", 1),
    ("t1", 5),
    ("t2", 5),
)
ROUND1 = (("a", 1), ("g", 1), ("t1", 1), ("t2", 1), ("h", 1), ("t1", 2), ("t2", 2))
PROFILE = WorkflowProfile(
    "pay",
    hits={"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1, "h": 1, "t1": 5, "t2": 5},
    rounds=(ROUND0, ROUND1),
    resume_round=1,
    effect_sites=(EffectSite("mail.send", 0, "d", 1, approach=ROUND0[:10], sent_mark=True),),
)
IN_TXN = frozenset({"t1", "t2"})


def _universe(caps: frozenset[Capability]) -> Universe:
    return Universe(
        workflows=(PAY,),
        crash_points=("a", "b", "c", "d", "e", "f", "g", "h", "t1", "t2"),
        pause_points=("a", "b", "c", "d", "e", "f", "g", "h"),
        capabilities=caps,
        profiles={"pay": PROFILE},
        site_hits={"pay": PROFILE.hits},
    )


def test_commits_are_told_apart_by_where_they_sit() -> None:
    kinds = PROFILE.commit_kinds(IN_TXN, gated=True)
    ends = {k: [(c.round, c.last) for c in cs] for k, cs in kinds.items()}
    assert ends == {
        "decision": [(1, ("t2", 1))],
        "intent": [(0, ("t2", 2))],
        "sent_mark": [(0, ("t2", 3))],
        "result": [(0, ("t2", 4))],
        "checkpoint": [(0, ("t2", 1))],
        "inbox_ack": [(1, ("t2", 1))],
        "last": [(1, ("t2", 2))],
    }
    # without a ledger to say the call was marked sent, the last commit
    # before it is the intent
    plain = WorkflowProfile(
        "pay",
        rounds=PROFILE.rounds,
        resume_round=1,
        effect_sites=(EffectSite("mail.send", 0, "d", 1, approach=ROUND0[:10]),),
    )
    kinds = plain.commit_kinds(IN_TXN, gated=True)
    assert [c.last for c in kinds["intent"]] == [("t2", 3)]
    assert kinds["sent_mark"] == []


@pytest.mark.parametrize(
    "caps",
    [
        frozenset(Capability),
        frozenset(Capability)
        - {Capability.CANCEL, Capability.STORAGE_FAULTS, Capability.NETWORK_FAULTS},
    ],
    ids=["all", "no-cancel-no-server"],
)
def test_the_plan_covers_every_pair_the_trace_offers_once(caps: frozenset[Capability]) -> None:
    u = _universe(caps)
    plan = targeted(u)
    names = [s.name for s in plan]
    rows = commit_fault_plan(u, plan)
    # every pair once, each fault's first kinds before any fault's later ones
    assert sorted((k, f) for k, f, _, _ in rows) == sorted(
        (k, f) for k in COMMIT_KINDS for f in COMMIT_FAULTS
    )
    assert [f for _, f, _, _ in rows[: len(COMMIT_FAULTS)]] == list(COMMIT_FAULTS)
    offered = {(k, f): name for k, f, name, why in rows if why is None}
    refused = {(k, f): why for k, f, name, why in rows if why is not None}
    assert set(offered) | set(refused) == {(k, f) for k in COMMIT_KINDS for f in COMMIT_FAULTS}
    # every kind the trace made, under every fault the deployment offers
    server = Capability.STORAGE_FAULTS in caps
    for kind in COMMIT_KINDS:
        assert offered.get((kind, "kill_inside")), kind
        assert ((kind, "operator_write") in offered) is (Capability.CANCEL in caps), kind
        for fault in ("storage_cut", "reset", "ack_lost"):
            assert ((kind, fault) in offered) is server, (kind, fault)
    assert offered[("decision", "delivery_while_held")]
    assert refused[("intent", "delivery_while_held")].startswith("trace:")
    if not server:
        # no server's sessions to cut, no TCP connection: said, not skipped silently
        assert refused[("result", "storage_cut")].startswith("capability:")
        assert refused[("intent", "ack_lost")].startswith("capability:")
        assert refused[("last", "operator_write")].startswith("capability:")
    # every offered pair is in the plan, once (after the categories' own
    # schedules: placed before them, the pairs pushed the later zombie
    # schedules out of the ci plan and no-fencing went unfound)
    wanted = set(offered.values())
    assert all(names.count(n) == 1 for n in wanted)
    # where the faults land: a kill inside the intent's transaction, a
    # cancel while held at the sent mark's door
    by_name = {s.name: s for s in plan}
    intent = by_name[offered[("intent", "kill_inside")]]
    assert RunWorker(worker_id="w1", crash=CrashSpec(site="t1", nth=2)) in intent.steps
    if Capability.CANCEL in caps:
        cancel = by_name[offered[("sent_mark", "operator_write")]]
        assert cancel.steps[-4:-1] == (
            RunWorker(worker_id="o1", crash=CrashSpec(site="c", nth=1, action="pause")),
            Cancel(run_id="r1"),
            ContinueWorker(worker_id="o1"),
        )


def test_a_trace_without_commits_offers_no_pair_and_says_so() -> None:
    u = Universe(
        workflows=(PAY,),
        crash_points=("a",),
        pause_points=("a",),
        capabilities=frozenset(Capability),
        profiles={},
        site_hits={},
    )
    for pair in commit_fault_pairs(u):
        assert pair.scenario is None
        assert pair.why is not None and pair.why.startswith(("trace:", "capability:"))


# -- a mistake of our own making at the sent-mark commit ---------------------------


#: "an effect's intent goes to the audit log first, in a transaction of its
#: own (fenced and version-checked like the checkpoint): the log shows every
#: attempt at an effect, even one whose checkpoint fails" -- two edits to
#: the store's checkpoint
INTENT_AUDITED_FIRST = (
    (
        "store/_sql/_checkpoint.py",
        "        with self._write() as tx:\n            stored = self._locked_run(tx, run_id)\n",
        '        audited = any(op.status.value == "prepared" for op in commit.operations)\n'
        "        if audited:\n"
        "            with self._write() as tx:\n"
        "                first = self._locked_run(tx, run_id)\n"
        "                assert first is not None\n"
        "                check_lease(\n"
        "                    run_id, first, commit.worker_id, commit.fencing_token, commit.now\n"
        "                )\n"
        "                if first.state_version != commit.expected_version:\n"
        "                    raise StaleWriteError(\n"
        "                        run_id, commit.expected_version, first.state_version\n"
        "                    )\n"
        "                self._commit_steps(commit, first)[4](tx)\n"
        "        with self._write() as tx:\n            stored = self._locked_run(tx, run_id)\n",
    ),
    (
        "store/_sql/_checkpoint.py",
        '                crashpoints.hit(f"checkpoint_stmt_{n}")\n                step(tx)\n'
        '            crashpoints.hit("checkpoint_stmt_commit")\n        if split',
        '                crashpoints.hit(f"checkpoint_stmt_{n}")\n'
        "                if not (audited and n == 5):\n"
        "                    step(tx)\n"
        '            crashpoints.hit("checkpoint_stmt_commit")\n        if split',
    ),
)

#: the ci profile's targeted share (150 planned, a fifth kept for sampling)
CI_TARGETED = 120


@pytest.fixture(scope="module")
def reference_plan() -> tuple[Universe, list[Scenario]]:
    u = probe_universe(ReferenceAdapter())
    return u, targeted(u)


def test_a_kill_inside_the_intent_commit_catches_a_split_intent(
    reference_plan: tuple[Universe, list[Scenario]], tmp_path: Path
) -> None:
    mutants = load_mutants()
    u, plan = reference_plan
    rows = {(k, f): name for k, f, name, _ in commit_fault_plan(u, plan)}
    name = rows[("intent", "kill_inside")]
    assert name is not None and "/commit_fault/intent/kill_inside/" in name
    assert name in [s.name for s in plan]
    scenario = next(s for s in plan if s.name == name).model_dump(mode="json")
    failed = {}
    for label, edits in (("correct", ()), ("mutant", INTENT_AUDITED_FIRST)):
        copy = mutants.mutated_copy(tmp_path / label / "src", [mutants.Edit(*e) for e in edits])
        failed[label] = mutants.execute(copy, scenario, tmp_path / label / "work").failed
    # the dead worker's intent is in the log; the next worker's intent takes
    # the same state version: a fork in the run's history
    assert failed == {"correct": [], "mutant": ["legal_transitions"]}


def test_every_pair_sqlite_offers_is_in_the_plan_and_categories_keep_their_places(
    reference_plan: tuple[Universe, list[Scenario]],
) -> None:
    u, plan = reference_plan
    names = [s.name for s in plan]
    rows = commit_fault_plan(u, plan)
    covered = [name for _, _, name, why in rows if why is None]
    assert covered and all(n is not None and n in names for n in covered)
    # a pair no category holds comes after every category's schedule
    pair_only = [i for i, n in enumerate(names) if "/commit_fault/" in n]
    others = [i for i, n in enumerate(names) if "/commit_fault/" not in n]
    assert pair_only and max(others) < pair_only[-1]
    assert len([i for i in pair_only if i < CI_TARGETED]) <= 1
    # what SQLite cannot offer is named with its reason
    missing = {(k, f): why for k, f, _, why in rows if why is not None}
    assert missing[("intent", "ack_lost")].startswith("capability:")


def test_the_report_says_which_pairs_ran_and_why_the_others_did_not() -> None:
    from harness import load_settings
    from harness.outcome import Draft
    from harness.report._schema import CommitFaultPair, Report

    draft = Draft("x", {}, [], load_settings("ci"), 0)
    draft.commit_pairs = [
        {"kind": "intent", "fault": "kill_inside", "schedule": "targeted/a", "why": None},
        {"kind": "result", "fault": "kill_inside", "schedule": "targeted/b", "why": None},
        {"kind": "last", "fault": "kill_inside", "schedule": "targeted/c", "why": None},
        {"kind": "intent", "fault": "reset", "schedule": None, "why": "capability: tcp"},
        {"kind": "result", "fault": "reset", "schedule": None, "why": "capability: tcp"},
        {"kind": "last", "fault": "ack_lost", "schedule": None, "why": "not in the plan"},
    ]
    draft.ledger = [{"name": "targeted/a"}]
    draft.not_run_targeted = ["targeted/b"]
    rows = draft.freeze().commit_pair_coverage()
    assert [r["status"] for r in rows] == [
        "covered",
        "budget",
        "shard",
        "not_offered",
        "not_offered",
        "not_planned",
    ]
    # only the field the lines read
    report = Report.model_construct(commit_faults=[CommitFaultPair.model_validate(r) for r in rows])
    assert report.commit_fault_lines() == [
        "commit x fault pairs: 1 of 6 covered",
        "cut by the budget: kill_inside at result",
        "in another shard's part: kill_inside at last",
        "not offered (capability: tcp): reset at intent, result",
        "past the plan's targeted share: ack_lost at last",
    ]


def test_the_ci_plan_runs_every_pair_sqlite_offers_past_its_targeted_share(
    reference_plan: tuple[Universe, list[Scenario]],
) -> None:
    """Without the room, the ci plan's 120 targeted places reached 4 of the
    16 pairs the reference offers on SQLite: every kill inside a commit and
    most operator writes came after them."""
    u, plan = reference_plan
    offered = {(k, f) for k, f, _, why in commit_fault_plan(u, plan) if why is None}
    share = plan[:CI_TARGETED]
    reached = {(k, f) for k, f, name, _ in commit_fault_plan(u, share) if name}
    assert len(offered) >= 12 and len(reached) < len(offered)
    ran, added = targeted_plan(u, CI_TARGETED, 30)
    assert ran[:CI_TARGETED] == share  # the targeted share keeps its order
    assert added == len(ran) - CI_TARGETED == len(offered - reached)
    covered = {(k, f) for k, f, name, _ in commit_fault_plan(u, ran) if name}
    assert covered == offered
    # the room runs the pairs breadth-first: a short room still tries every
    # fault before a second kind of any
    few, added = targeted_plan(u, CI_TARGETED, 2)
    assert added == 2
    new = {(k, f) for k, f, name, _ in commit_fault_plan(u, few) if name} - reached
    missed = [f for f in COMMIT_FAULTS if any(g == f for _, g in offered - reached)]
    assert len(missed) >= 2 and {f for _, f in new} == set(missed[:2])
    # no room, no targeted share, or a share too short to try every kind
    # of schedule once (the pairs rank after those): nothing added
    assert targeted_plan(u, CI_TARGETED, 0) == (share, 0)
    assert targeted_plan(u, 0, 30) == ([], 0)
    assert targeted_plan(u, 9, 30) == (plan[:9], 0)


#: "an event is acknowledged the moment it is read, in a commit of its own,
#: so that no worker takes it twice; the wait's end is committed next"
EVENT_ACKED_ALONE = (
    "_executor/_inbox.py",
    "        with sc.crossing(INBOX_ACK):\n            end_wait(\n                sc,\n"
    "                run,\n                acks,\n                audits,\n"
    "                status=S.RUNNING,\n",
    "        with sc.crossing(INBOX_ACK):\n"
    '            run = sc.commit(run, inbox_acked=acks, extra_audit=audits, action="inbox")\n'
    "        if True:\n            end_wait(\n                sc,\n                run,\n"
    "                (),\n                (),\n                status=S.RUNNING,\n",
)


def test_a_kill_after_the_inbox_acknowledgement_catches_an_event_acknowledged_alone(
    reference_plan: tuple[Universe, list[Scenario]], tmp_path: Path
) -> None:
    """A kill right after each kind of commit is a pair too: the commit sweep
    kills after every commit, but its schedules past the first few sit
    beyond the ci plan's 120 targeted places."""
    mutants = load_mutants()
    u, plan = reference_plan
    ran, _ = targeted_plan(u, CI_TARGETED, 30)
    rows = {(k, f): name for k, f, name, _ in commit_fault_plan(u, ran)}
    name = rows[("inbox_ack", "kill_after")]
    assert name is not None and name not in {s.name for s in plan[:CI_TARGETED]}
    scenario = next(s for s in ran if s.name == name).model_dump(mode="json")
    failed = {}
    for label, edits in (("correct", ()), ("mutant", (EVENT_ACKED_ALONE,))):
        copy = mutants.mutated_copy(tmp_path / label / "src", [mutants.Edit(*e) for e in edits])
        failed[label] = mutants.execute(copy, scenario, tmp_path / label / "work").failed
    # the event is acknowledged and gone; the run never takes it, and ends
    # otherwise than its fault-free run
    assert failed["correct"] == []
    assert "resume_equivalence" in failed["mutant"]
