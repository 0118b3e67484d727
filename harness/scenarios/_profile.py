"""Site profiles: where a fault-free run goes, so faults can be aimed there.

Before a search, each workflow is run once without faults with crash-point
tracing on (the optional ``trace_crash_points`` / ``crash_point_trace()`` of
an environment). The profile keeps, per worker round (a round is one worker
started and run until idle; the run's planned decision is delivered after
each), the crash points passed in order with their hit numbers. Then, for
each effect kind the workflow declares, it is run again with the world
killing the caller at the first call of that kind: the last crash point the
killed worker passed is *the site right before the effect* -- where a worker
paused past its lease becomes a zombie about to call, and where a worker
killed leaves an intent without a call.

The profile also says where each *commit* ends (:meth:`WorkflowProfile.commits`):
a commit is a run of consecutive in-transaction crash points (those that are
declared but not pausable), and the kill right after it lands at the next
crash point the worker passes. A commit is a *hand-off* when, before the
worker commits again, its loop comes round to its first crash point again
and finds more to do in the same round: the commit made another run
runnable or handed it a message (a child spawned, a child's completion
delivered to its parent). And it keeps the memory records (namespace, key)
the fault-free run read in its contexts: with nothing planted, those are
records the run wrote itself.

Nothing here knows a runtime's site names: only the order of sites and the
world's own effect boundary are used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..adapters import Adapter, WorkflowSpec
from ..runner import WORKER_TIMEOUT, profile_traces

#: the kinds of commit a fault-free run makes (see :meth:`WorkflowProfile.commit_kinds`)
COMMIT_KINDS = ("decision", "intent", "sent_mark", "result", "checkpoint", "inbox_ack", "last")


@dataclass(frozen=True)
class EffectSite:
    """The last crash point a worker passes before its first call of ``effect``."""

    effect: str
    #: workers started (each followed by the run's decision) before the one
    #: that makes the call
    round: int
    site: str
    nth: int
    #: the (site, hit) pairs that worker passed on its way there, in order,
    #: ending with (site, nth): where else a fault just before the effect lands
    approach: tuple[tuple[str, int], ...] = ()
    #: whether the runtime marked the call as possibly sent before making it
    #: (its ledger entry was ``in_doubt``, not ``pending``, when the world
    #: stopped the call): the last commit before the call is then a
    #: *sent-mark*, and the one before it the intent. None: the adapter
    #: shows no ledger (the ``operations`` capability)
    sent_mark: bool | None = None


@dataclass(frozen=True)
class Commit:
    """One commit a fault-free worker made: where it ends, and where a kill
    right after it lands."""

    #: the worker round it happened in (see :attr:`EffectSite.round`)
    round: int
    #: the (site, hit) of its last in-transaction crash point
    last: tuple[str, int]
    #: the (site, hit) the worker passes next: a kill there is a kill right
    #: after the commit (None: the round ended with it)
    after: tuple[str, int] | None
    #: it handed work or a message to another run (see the module docstring)
    handoff: bool = False


@dataclass(frozen=True)
class WorkflowProfile:
    """What one fault-free run of a workflow passes."""

    workflow: str
    #: per crash point, the highest hit number one worker reached
    hits: Mapping[str, int] = field(default_factory=dict)
    #: per worker round, the (site, hit) pairs passed, in order
    rounds: tuple[tuple[tuple[str, int], ...], ...] = ()
    #: the round after the first decision was delivered (0 with no approval)
    resume_round: int = 0
    effect_sites: tuple[EffectSite, ...] = ()
    #: (namespace, key) of the memory records the fault-free run read
    memory_keys: tuple[tuple[str, str], ...] = ()

    def commits(self, in_txn: frozenset[str]) -> tuple[Commit, ...]:
        """Every commit of the fault-free run, round by round, in order.
        ``in_txn``: the crash points inside a transaction (a commit is a run
        of them; without any, nothing can be told apart: no commits)."""
        out: list[Commit] = []
        for r, trace in enumerate(self.rounds):
            if not trace:
                continue
            entry = trace[0][0]
            ends = [
                i
                for i, (site, _) in enumerate(trace)
                if site in in_txn and (i + 1 == len(trace) or trace[i + 1][0] not in in_txn)
            ]
            for k, i in enumerate(ends):
                after = trace[i + 1] if i + 1 < len(trace) else None
                upto = ends[k + 1] if k + 1 < len(ends) else len(trace)
                handoff = k + 1 < len(ends) and any(
                    site == entry for site, _ in trace[i + 1 : upto]
                )
                out.append(Commit(r, trace[i], after, handoff))
        return tuple(out)

    def commit_kinds(self, in_txn: frozenset[str], *, gated: bool) -> dict[str, list[Commit]]:
        """The commits of the fault-free run by kind (:data:`COMMIT_KINDS`),
        each kind's commits in run order; a commit may be of several kinds.
        Told apart by where they sit, never by a site's name:

        - ``decision``: the first commit after the approver's decision was
          delivered (``gated``: the workflow waits for one);
        - ``inbox_ack``: a commit that takes a message: the first commit of
          a worker's pass that comes back to a run after two hand-offs (a
          child spawned, then its completion delivered), then the decision's;
        - ``intent``, ``sent_mark``: the commits between an effect's call
          and the one before it (or the round's start): the last is the
          sent-mark when the ledger showed the call marked as possibly
          sent (:attr:`EffectSite.sent_mark`), the intent the one before
          it; else the last is the intent;
        - ``result``: the first commit after an effect's call;
        - ``last``: the commit that ends the run (its last);
        - ``checkpoint``: the first commit that is none of those.
        """
        commits = self.commits(in_txn)
        kinds: dict[str, list[Commit]] = {k: [] for k in COMMIT_KINDS}
        if not commits:
            return kinds
        at_of = {(c.round, c.last): self.rounds[c.round].index(c.last) for c in commits}
        decided = None
        if gated and self.resume_round > 0:
            decided = next((c for c in commits if c.round == self.resume_round), None)
        kinds["decision"] += [decided] if decided is not None else []
        for _, effect_kinds in self._effect_commits(commits, at_of, decided):
            for k, c in effect_kinds:
                kinds[k].append(c)
        kinds["inbox_ack"] = [*self._returns(commits, at_of), *kinds["decision"]]
        kinds["last"].append(commits[-1])
        named = {c for cs in kinds.values() for c in cs}
        kinds["checkpoint"] += [c for c in commits if c not in named and not c.handoff][:1]
        return {k: list(dict.fromkeys(v)) for k, v in kinds.items()}

    def commit_effects(self, in_txn: frozenset[str], *, gated: bool) -> dict[Commit, str]:
        """The effect each ``intent``, ``sent_mark`` and ``result`` commit of
        :meth:`commit_kinds` belongs to (``service.action``)."""
        commits = self.commits(in_txn)
        at_of = {(c.round, c.last): self.rounds[c.round].index(c.last) for c in commits}
        decided = None
        if gated and self.resume_round > 0:
            decided = next((c for c in commits if c.round == self.resume_round), None)
        out: dict[Commit, str] = {}
        for es, effect_kinds in self._effect_commits(commits, at_of, decided):
            for _, c in effect_kinds:
                out.setdefault(c, es.effect)
        return out

    def _effect_commits(
        self,
        commits: tuple[Commit, ...],
        at_of: Mapping[tuple[int, tuple[str, int]], int],
        decided: Commit | None,
    ) -> list[tuple[EffectSite, list[tuple[str, Commit]]]]:
        """Per effect call of the trace, its (kind, commit) pairs: the
        intent, the sent-mark and the result (see :meth:`commit_kinds`)."""
        calls: dict[int, list[int]] = {}
        effect_calls: list[tuple[EffectSite, int]] = []
        for es in self.effect_sites:
            trace = self.rounds[es.round] if es.round < len(self.rounds) else ()
            at = len(es.approach) - 1
            if at >= 0 and tuple(trace[: at + 1]) == es.approach:
                calls.setdefault(es.round, []).append(at)
                effect_calls.append((es, at))
        out: list[tuple[EffectSite, list[tuple[str, Commit]]]] = []
        for es, at in effect_calls:
            earlier = [p for p in calls[es.round] if p < at]
            since = max(earlier, default=-1)
            pre = [
                c
                for c in commits
                if c.round == es.round and since < at_of[(c.round, c.last)] < at and c != decided
            ]
            if earlier and pre:
                pre = pre[1:]  # the earlier call's result
            mine: list[tuple[str, Commit]] = []
            if es.sent_mark and len(pre) >= 2:
                mine += [("sent_mark", pre[-1]), ("intent", pre[-2])]
            elif es.sent_mark:
                mine += [("sent_mark", c) for c in pre[-1:]]
            else:
                mine += [("intent", c) for c in pre[-1:]]
            after = [c for c in commits if c.round == es.round and at_of[(c.round, c.last)] > at]
            mine += [("result", c) for c in after[:1]]
            out.append((es, mine))
        return out

    def _returns(
        self, commits: tuple[Commit, ...], at_of: Mapping[tuple[int, tuple[str, int]], int]
    ) -> list[Commit]:
        """The first commit of each worker pass that follows two passes
        ending in a hand-off: the run handed a child's completion takes it."""
        out: list[Commit] = []
        for r, trace in enumerate(self.rounds):
            if not trace:
                continue
            starts = [i for i, (site, _) in enumerate(trace) if site == trace[0][0]]
            bounds = list(zip(starts, [*starts[1:], len(trace)], strict=True))
            mine = [c for c in commits if c.round == r]
            passes = [[c for c in mine if a <= at_of[(r, c.last)] < b] for a, b in bounds]
            for k in range(2, len(passes)):
                if passes[k] and all(any(c.handoff for c in passes[j]) for j in (k - 1, k - 2)):
                    out.append(passes[k][0])
        return out

    def resume_sites(self) -> tuple[tuple[str, int], ...]:
        """The (site, hit) pairs of the worker that resumes after the decision."""
        if self.resume_round < len(self.rounds):
            return self.rounds[self.resume_round]
        return ()


def profile_workflow(
    adapter: Adapter,
    workflow: WorkflowSpec,
    *,
    effects: bool = True,
    worker_timeout: float = WORKER_TIMEOUT,
) -> WorkflowProfile:
    """Profile one workflow (empty when the environment cannot trace). With
    ``effects`` false, the sites right before each effect are not looked for
    (one run fewer per effect; only the targeted schedules use them). A
    worker still running after ``worker_timeout`` is an adapter error. The
    runs are the runner's (:func:`harness.runner.profile_traces`); this
    reads their traces."""
    free, stopped = profile_traces(
        adapter, workflow, workflow.effects if effects else (), worker_timeout
    )
    if free is None:
        return WorkflowProfile(workflow.name)
    hits: dict[str, int] = {}
    for trace in free.rounds:
        for site, n in trace:
            hits[site] = max(hits.get(site, 0), n)
    sites: list[EffectSite] = []
    for effect in workflow.effects:
        found = stopped.get(effect)
        at = None if found is None else _effect_site(effect, found.rounds, found.status)
        if at is not None:
            sites.append(at)
    return WorkflowProfile(
        workflow=workflow.name,
        hits=hits,
        rounds=tuple(tuple(t) for t in free.rounds),
        resume_round=free.resume or 0,
        effect_sites=tuple(sites),
        memory_keys=_memory_keys(list(free.contexts)),
    )


def _effect_site(
    effect: str, rounds: list[list[tuple[str, int]]], status: object
) -> EffectSite | None:
    """The site right before ``effect`` in a run the world stopped at its
    first call: the last crash point the killed worker passed (the kill
    ends the run: the killed worker is the last that traced). ``status``:
    what the ledger says of the stopped call: marked as possibly sent (a
    sent-mark commit came before it), or pending."""
    sent_mark = None if status is None else status == "in_doubt"
    for i in reversed(range(len(rounds))):
        if rounds[i]:
            site, n = rounds[i][-1]
            return EffectSite(effect, i, site, n, approach=tuple(rounds[i]), sent_mark=sent_mark)
    return None


def _memory_keys(contexts: list[Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(namespace, key) of every memory record the contexts list, in first
    seen order. Read from each context's ``context.memory`` entries, where
    an adapter that reports the records a context holds puts them; an
    adapter that does not gives none (and no schedule plants at them)."""
    seen: dict[tuple[str, str], None] = {}
    for c in contexts:
        inner = c.get("context")
        records = inner.get("memory") if isinstance(inner, Mapping) else None
        for rec in records if isinstance(records, list) else ():
            if isinstance(rec, Mapping):
                ns, key = rec.get("namespace"), rec.get("key")
                if isinstance(ns, str) and isinstance(key, str):
                    seen[(ns, key)] = None
    return tuple(seen)
