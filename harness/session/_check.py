"""Checking an adapter before any search (``harness check-adapter``).

Each workflow runs once per example input without faults -- the same probe
a search runs before it starts (:func:`probe_scenario`, through the engine's
oracle) -- and its history is read for what an adapter under development
gets wrong: effect kinds declared but not performed (or the reverse), runs
that end neither terminal nor in a legitimate wait, transitions its own
state machine forbids (the ``legal_transitions`` checker, on that history),
workers that crash, and an ``exactly_once`` promise on an effect whose
service offers neither an idempotency key nor a lookup (no runtime can keep
it). With crash points, the site profile a search aims its targeted
schedules by is taken too (:func:`profile_workflow`), so a runtime that
breaks there is found now rather than at the start of a run.

Warnings do not fail the check: a run left ``running`` with no ``wake_at``
under a constant clock (no ``clock`` capability) -- in the fault-free run,
or after one more run in which the world kills the worker right after the
workflow's first effect, as a search will -- is a lease or a timer the
harness can never see expire (:func:`lease_warnings`); fault-free runs of
a workflow that disagree with each other (``harness.session._oracle``: the
properties that compare with them would read unknown).

Nothing here decides how it is shown: :class:`WorkflowCheck` holds the
facts and the causes, the CLI renders them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import AdapterError, UsageError
from ..adapters._contract import Adapter, Capability, WorkflowSpec
from ..checkers import check_legal_transitions
from ..checkers._base import final_state, vnum
from ..checkers._progress import lease_hint
from ..history import History
from ..model import (
    ArmWorldFault,
    EventF,
    PropertyResult,
    Quiesce,
    RunState,
    RunWorker,
    Scenario,
    Submit,
    Verdict,
)
from ..nemesis import ScenarioError, worker_timeout
from ..scenarios import PLANTED_KEY, profile_workflow
from ..world import WorldUsageError, service_spec
from ._engine import Engine
from ._probe import (
    approval_problems,
    effect_problems,
    finish_problems,
    performed_effects,
    probe_scenario,
)
from ._probe import last_error as _last_error
from ._probe import worker_log as _worker_log

#: the causes a check names, in the order they are reported
WRONG_EFFECTS = "wrong effect declaration"
IMPOSSIBLE_PROMISE = "a delivery promise the service cannot keep"
CRASHING_WORKER = "crashing worker"
ILLEGAL_TRANSITIONS = "illegal transitions"
UNJUDGED_TRANSITIONS = "transitions that cannot be judged"
UNFINISHED = "runs that do not finish"
ADAPTER_ERROR = "adapter error"
CAUSES: tuple[str, ...] = (
    ADAPTER_ERROR,
    CRASHING_WORKER,
    WRONG_EFFECTS,
    IMPOSSIBLE_PROMISE,
    ILLEGAL_TRANSITIONS,
    UNJUDGED_TRANSITIONS,
    UNFINISHED,
)


@dataclass(frozen=True)
class RunEnd:
    """How one probe run ended."""

    run_id: str
    input: dict[str, object]
    #: the normalized state (None: the adapter reported none)
    state: str | None
    raw_status: str | None
    #: terminal, or a legitimate wait
    settled: bool
    error: str | None = None


@dataclass(frozen=True)
class WorkerCrash:
    """A worker that ended other than by exiting 0, in a run without faults."""

    worker_id: str
    exit: str


@dataclass
class WorkflowCheck:
    """What the fault-free probe of one workflow showed."""

    workflow: str
    declared: tuple[str, ...]
    #: the probe ran to its end (False: the adapter raised first)
    ran: bool = False
    performed: tuple[str, ...] = ()
    runs: tuple[RunEnd, ...] = ()
    #: workers started, and those that crashed
    workers: int = 0
    crashes: tuple[WorkerCrash, ...] = ()
    #: the last lines of the workers' log(s) the deployment left, when one crashed
    log_tail: tuple[str, ...] = ()
    #: where the log was read (None: none found)
    log_path: Path | None = None
    transitions: PropertyResult | None = None
    #: crash points the site profile passed, per site (None: not profiled)
    crash_points: dict[str, int] | None = None
    #: where the memory family would plant for this workflow's probe run, as
    #: "namespace/key" (None: the adapter cannot inject memory); how it was
    #: found ("declared", "read" in the fault-free run's contexts, "" nowhere)
    memory_aims: tuple[str, ...] | None = None
    memory_aimed_by: str = ""
    #: cause -> the problems found, in words
    problems: dict[str, list[str]] = field(default_factory=dict)
    #: what looks wrong without failing the check, in words
    warnings: list[str] = field(default_factory=list)

    def add(self, cause: str, problem: str) -> None:
        self.problems.setdefault(cause, []).append(problem)

    @property
    def causes(self) -> list[str]:
        return [c for c in CAUSES if self.problems.get(c)]

    @property
    def ok(self) -> bool:
        return not self.problems


def check_workflows(adapter: Adapter, engine: Engine) -> list[WorkflowCheck]:
    """Probe every workflow of ``adapter`` (guarded) with ``engine``'s
    fault-free oracle; one :class:`WorkflowCheck` each. An adapter error in
    one workflow is that workflow's problem; the others are still checked."""
    return [check_workflow(adapter, engine, wf) for wf in adapter.workflows()]


def check_workflow(adapter: Adapter, engine: Engine, wf: WorkflowSpec) -> WorkflowCheck:
    out = WorkflowCheck(wf.name, tuple(wf.effects))
    scenario = probe_scenario(wf)
    try:
        path = engine.oracle(scenario)
    except AdapterError as exc:
        out.add(ADAPTER_ERROR, _adapter_error(exc))
        return out
    except UsageError as exc:  # e.g. a scenario the adapter cannot run
        out.add(ADAPTER_ERROR, str(exc))
        return out
    history = History.load(path)
    out.ran = True
    out.performed = tuple(sorted(performed_effects(history)))
    out.runs = _run_ends(scenario.runs, history)
    _workers(out, history, path.parent / "env")
    crashed_all = bool(out.crashes) and len(out.crashes) == out.workers
    if crashed_all:
        # Nothing ran: what the runs did not do follows from the crash.
        out.add(
            CRASHING_WORKER,
            "so no run could finish (effects performed before the crashes: "
            f"{', '.join(out.performed) or 'none'}): fix the crash, then check again",
        )
    else:
        for problem in effect_problems(wf, history):
            out.add(WRONG_EFFECTS, problem)
    for problem in promise_problems(wf, history):
        out.add(IMPOSSIBLE_PROMISE, problem)
    out.transitions = check_legal_transitions(history, None)
    if out.transitions.verdict is Verdict.FAIL:
        out.add(ILLEGAL_TRANSITIONS, out.transitions.message)
    elif out.transitions.verdict is Verdict.UNKNOWN and not crashed_all:
        out.add(
            UNJUDGED_TRANSITIONS,
            f"{out.transitions.message}: legal_transitions would be unknown in every scenario "
            "(an inconclusive run); hand out each transition once in Observation.transitions",
        )
    if not crashed_all:
        for problem in finish_problems(wf, scenario, history):
            out.add(UNFINISHED, problem)
        for problem in approval_problems(wf, scenario, history):
            out.add(UNFINISHED, problem)
    disagree = engine.agreement.unstable.get(wf.name)
    if disagree is not None:
        out.warnings.append(
            "its fault-free runs disagree, so the properties that compare with them will read "
            f"unknown in a search: {disagree}"
        )
    clock = Capability.CLOCK in adapter.capabilities
    out.warnings += lease_warnings(history, clock, "in the fault-free run")
    if not clock and wf.effects and set(out.problems) <= {IMPOSSIBLE_PROMISE}:
        out.warnings += _after_a_kill(engine, wf, scenario)
    memory_keys: Sequence[tuple[str, str]] = ()
    if Capability.CRASH_POINTS in adapter.capabilities and not out.crashes:
        try:
            profile = profile_workflow(
                adapter,
                wf,
                effects=False,
                worker_timeout=worker_timeout(engine.settings.budget_seconds),
            )
        except AdapterError as exc:
            out.add(ADAPTER_ERROR, f"in the site profile: {_adapter_error(exc)}")
        else:
            out.crash_points = dict(profile.hits)
            memory_keys = profile.memory_keys
    if Capability.MEMORY_INJECTION in adapter.capabilities and not crashed_all:
        _memory_aims(out, wf, scenario.runs, memory_keys)
    return out


def promise_problems(wf: WorkflowSpec, history: History) -> list[str]:
    """An ``exactly_once`` promise (declared, or by default: a kind missing
    from ``Declarations.delivery`` is judged exactly once) on an effect kind
    of ``wf`` whose service takes no idempotency key and offers no lookup.
    After a worker dies right after the world applied such a call, nothing
    tells the runtime whether it happened: it calls again (twice) or never
    (not at all). Exactly once cannot hold, whatever the runtime does."""
    decl = history.declaration()
    out = []
    for kind in dict.fromkeys([*wf.effects, *sorted(performed_effects(history))]):
        declared = None if decl is None else decl.delivery.get(kind)
        if (declared or "exactly_once") != "exactly_once":
            continue
        service, _, action = kind.partition(".")
        try:
            caps = service_spec(service, action).capabilities
        except WorldUsageError:
            continue  # not the world's: the effect check names it
        if not caps.side_effect or caps.idempotency_keys:
            continue
        if caps.lookup_by_key or caps.lookup_by_business_key:
            continue
        how = (
            "is declared exactly_once"
            if declared
            else "is not in Declarations.delivery, so it is held to exactly_once"
        )
        out.append(
            f"{kind} {how}, but the {service} service takes no idempotency key and offers "
            "no lookup: after a worker dies right after the world applied the call, nothing "
            f"can tell the runtime whether it happened, so it calls again (a second {kind}) "
            "or never does -- exactly once cannot hold. Declare what it does: "
            f"delivery={{{kind!r}: 'at_least_once'}} if it calls again (exactly_once_effects "
            "then allows the repeat, and the equivalence checks take its new reference as "
            f"the repeat it is), {{{kind!r}: 'at_most_once'}} if it stops at needs_operator; "
            "or make the effect through a service that takes an idempotency key or a lookup "
            "(harness list services)"
        )
    return out


def lease_warnings(history: History, clock: bool, when: str) -> list[str]:
    """A run of ``history`` that ended ``running`` with no ``wake_at`` under a
    constant clock (``clock``: the adapter declares the capability), or with
    no ``wake_at`` at all: a lease or a timer the harness cannot see expire.
    One warning per run, saying what to declare (:func:`lease_hint`)."""
    out = []
    for run_id, final in history.finals().items():
        if final_state(final) is not RunState.RUNNING:
            continue
        hint = lease_hint(clock, vnum(final, "wake_at"))
        if hint is not None:
            out.append(f"run {run_id} was left running {when}: {hint}")
    return out


def _after_a_kill(engine: Engine, wf: WorkflowSpec, probe: Scenario) -> list[str]:
    """One run of ``wf`` whose first worker the world kills right after it
    applied the workflow's first effect kind (as a search's first targeted
    schedules do), then recovery: a run left ``running`` there is a dead
    worker's lease that never expires under a constant clock."""
    submits = [s for s in probe.steps if isinstance(s, Submit)][:1]
    service, _, action = wf.effects[0].partition(".")
    try:
        service_spec(service, action)
    except WorldUsageError:
        return []  # not the world's: the effect check names it
    scenario = Scenario(
        name=f"check/after-a-kill/{wf.name}",
        steps=(
            *submits,
            ArmWorldFault(service=service, action=action, mode="kill_after_apply"),
            RunWorker(worker_id="w1"),
            Quiesce(),
        ),
    )
    try:
        example = engine.execute(scenario)
    except (AdapterError, UsageError, ScenarioError):
        return []  # the probe of the fault-free run is what the check judges
    history = History.load(example.folder / "history.jsonl")
    if not any(e.value.get("fired") for e in history.faults()):
        return []
    return lease_warnings(
        history,
        False,
        f"after the world killed its worker right after {wf.effects[0]} (and recovery)",
    )


def _memory_aims(
    out: WorkflowCheck,
    wf: WorkflowSpec,
    runs: Sequence[object],
    memory_keys: Sequence[tuple[str, str]],
) -> None:
    """Where a search would plant memory for this workflow (the rule of
    ``Universe.memory_targets``): its declared targets, for the probe's
    first run; else a new key in each namespace its fault-free run read."""
    run_input = dict(getattr(runs[0], "input", {})) if runs else {}
    if wf.memory_targets:
        out.memory_aims = tuple("/".join(t.at(run_input)) for t in wf.memory_targets)
        out.memory_aimed_by = "declared"
    elif memory_keys:
        out.memory_aims = tuple(
            f"{ns}/{PLANTED_KEY}" for ns in dict.fromkeys(n for n, _ in memory_keys)
        )
        out.memory_aimed_by = "read"
    else:
        out.memory_aims = ()


def _adapter_error(exc: AdapterError) -> str:
    """The error, and where in the adapter's code it was raised: the
    traceback's last frame outside installed packages and the harness (a
    library's own frames, pydantic's say, are not where to look)."""
    frames = [ln.strip() for ln in exc.detail.splitlines() if ln.strip().startswith('File "')]
    theirs = [f for f in frames if "site-packages" not in f and _HARNESS not in f]
    where = (theirs or frames)[-1:] if frames else []
    return f"{exc} (at: {where[0]})" if where else str(exc)


#: the harness package's folder, as tracebacks name it
_HARNESS = str(Path(__file__).resolve().parents[1])


def _run_ends(runs: Sequence[object], history: History) -> tuple[RunEnd, ...]:
    finals = history.finals()
    out = []
    for run in runs:
        run_id = getattr(run, "run_id", "")
        final = finals.get(run_id)
        state = final_state(final) if final is not None else None
        refused = [
            str(e.value.get("error"))
            for e in history.by_run(run_id)
            if e.f is EventF.SUBMIT and e.value.get("error")
        ]
        error = f"submit raised {refused[0]}" if refused else None
        if final is not None and error is None and final.value.get("error"):
            error = str(final.value.get("error"))
        out.append(
            RunEnd(
                run_id=run_id,
                input=dict(getattr(run, "input", {})),
                state=None if state is None else state.value,
                raw_status=None if final is None else _str(final.value.get("raw_status")),
                settled=state is not None and (state.terminal or state.legitimate_wait),
                error=error,
            )
        )
    return tuple(out)


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _workers(out: WorkflowCheck, history: History, env_dir: Path) -> None:
    """Count the workers and their crashes; keep the log tail when one crashed."""
    crashes = []
    for e in history.by_f(EventF.WORKER):
        if e.type == "invoke":
            out.workers += 1
        elif e.type == "fail" or (e.type == "info" and e.value.get("signal") is not None):
            crashes.append(WorkerCrash(str(e.value.get("worker_id")), str(e.value.get("exit"))))
    out.crashes = tuple(crashes)
    if not crashes:
        return
    log = _worker_log(env_dir)
    if log is not None:
        out.log_path = log
        lines = log.read_text(encoding="utf-8", errors="replace").rstrip().splitlines()
        out.log_tail = _last_error(lines)
    every = len(crashes) == out.workers
    exits = sorted({c.exit for c in crashes})
    out.add(
        CRASHING_WORKER,
        f"{'every one' if every else len(crashes)} of the {out.workers} workers started "
        f"without faults crashed ({', '.join(exits)}): a worker "
        "that crashes on a fault-free path makes every fault the harness injects moot; "
        + ("the end of the workers' log follows" if log is not None else _NO_LOG),
    )


_NO_LOG = (
    "the deployment left no worker log (*.log) to show why: send the workers' stdout and "
    "stderr to workdir/workers.log (ForkServer.spawn(log=...), or the kit's WorkerSet)"
)
