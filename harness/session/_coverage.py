"""What an example exercised, as (fault, workflow, run state) combinations.

The sampled search steers by them (``hypothesis.target``): an example that
fires a fault in a state no earlier example fired it in has found new ground.
A combination is read from the history alone, for any adapter:

* the *fault*: a fired ``fault`` event's kind, with what tells two of one kind
  apart (a crash point's site and action, a world fault's mode and service, a
  planted memory record's kind);
* the *run*: the run it names (``run_id``, else the first of ``runs``), else
  the run of the latest transition before it (a crash point names no run: the
  killed worker's last checkpoint is the one it was working on);
* its *state*: that run's raw status at its latest transition before the
  fault (``-``: none yet), with the run's workflow.

The history records a worker's transitions when the worker ends, so a crash
point's state is where the worker stopped, and a world fault's (recorded with
the effects, before that worker's transitions) where the worker started.
"""

from __future__ import annotations

from ..history import History
from ..model import Event, EventF

Combination = tuple[str, str, str]


def fault_label(event: Event) -> str:
    """A fault event's kind and what distinguishes faults of that kind."""
    v = event.value
    kind = str(v.get("kind", "?"))
    detail: tuple[object, ...] = ()
    if kind == "crash_point":
        detail = (v.get("site"), v.get("action"))
    elif kind in ("world_fault", "effect_boundary", "lookup_fault"):
        detail = (v.get("mode"), v.get("service"))
    elif kind == "memory":
        detail = (v.get("memory_kind"),)
    elif kind == "migration":
        detail = (v.get("at", "worker"),)
    return ":".join(str(x) for x in (kind, *detail) if x is not None)


def combinations(history: History) -> frozenset[Combination]:
    """Every (fault, workflow, run state) combination ``history`` fired."""
    workflows: dict[str, str] = {}
    status: dict[str, str] = {}
    last_run: str | None = None
    out: set[Combination] = set()
    for e in history.events:
        run_id = e.value.get("run_id")
        if e.f is EventF.SUBMIT and isinstance(run_id, str):
            workflows.setdefault(run_id, str(e.value.get("workflow", "?")))
        elif e.f is EventF.TRANSITION and isinstance(run_id, str):
            status[run_id] = str(e.value.get("to", "?"))
            last_run = run_id
        elif e.f is EventF.FAULT and e.value.get("fired", True) is not False:
            runs = e.value.get("runs")
            named = run_id if isinstance(run_id, str) else None
            if named is None and isinstance(runs, list) and runs and isinstance(runs[0], str):
                named = runs[0]
            run = named or last_run
            where = "-" if run is None else workflows.get(run, "?")
            state = "-" if run is None else status.get(run, "-")
            out.add((fault_label(e), where, state))
    return frozenset(out)
