"""A history laid out as a timeline: lanes of marks, ready to draw as SVG.

One lane per process that matters -- the runner (submissions, deliveries,
final states), the nemesis (faults), the world (effects), then one per worker
in order of appearance, then anything else that acted (the runtime's API).
Time runs left to right *by event*, one column per shown event: virtual time
often stands still while much happens, so columns read better than seconds;
the axis marks where the virtual clock moved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..history import History
from ..model import Event, EventF

LANE_HEIGHT = 46
COLUMN = 44
LEFT = 92
TOP = 34

FIXED_LANES = ("runner", "nemesis", "world")

#: What each fixed lane shows (the timeline's legend).
LANE_ROLES = {
    "runner": "the harness's runner: runs submitted, messages delivered, final states",
    "nemesis": "the faults: each one armed and fired (or not)",
    "world": "the external services: every effect applied, absorbed or refused",
}

#: Workers the harness starts on its own, by the first letter of their id.
_WORKER_ROLES = {
    "q": "a worker of the final quiesce (faults stopped, run until nothing moves)",
    "p": "a worker that brought the run to the round under test, fault-free",
    "b": "a worker held at a crash point with another, then released with it (a race)",
}


def lane_role(name: str, workers: frozenset[str] = frozenset()) -> str:
    """What lane ``name`` of a timeline shows (``workers``: the lanes that
    are worker processes)."""
    if name in LANE_ROLES:
        return LANE_ROLES[name]
    if name in workers:
        role = _WORKER_ROLES.get(name[:1]) if name[1:].isdigit() else None
        return f"worker process {name}: " + (role or "started by a step of the scenario")
    return "something else that acted: the runtime's own API or process"


@dataclass(frozen=True)
class Mark:
    """One event drawn on a lane. ``glyph`` picks the shape and colour (a CSS
    class in the template); ``label`` is a few characters under it, ``title``
    the full story in the tooltip."""

    index: int
    lane: int
    column: int
    glyph: str
    label: str
    title: str
    witness: bool

    @property
    def x(self) -> int:
        return LEFT + self.column * COLUMN + COLUMN // 2

    @property
    def y(self) -> int:
        return TOP + self.lane * LANE_HEIGHT + LANE_HEIGHT // 2


@dataclass(frozen=True)
class Span:
    """A worker alive (``running``) or stopped (``paused``) between two columns."""

    lane: int
    start: int
    end: int
    kind: str

    @property
    def x0(self) -> int:
        return LEFT + self.start * COLUMN + COLUMN // 2

    @property
    def x1(self) -> int:
        return LEFT + self.end * COLUMN + COLUMN // 2

    @property
    def y(self) -> int:
        return TOP + self.lane * LANE_HEIGHT + LANE_HEIGHT // 2


@dataclass
class Timeline:
    """The drawable timeline of one history."""

    lanes: list[str] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    #: (column, text) where the virtual clock moved
    ticks: list[tuple[int, str]] = field(default_factory=list)
    columns: int = 0
    witness: tuple[int, ...] = ()
    problems: tuple[str, ...] = ()
    #: the lanes that are worker processes
    workers: frozenset[str] = frozenset()

    @property
    def lane_roles(self) -> list[tuple[str, str]]:
        """(lane, what it shows) for each lane, in order: the lanes' legend."""
        return [(name, lane_role(name, self.workers)) for name in self.lanes]

    @property
    def width(self) -> int:
        return LEFT + max(self.columns, 1) * COLUMN + 24

    @property
    def height(self) -> int:
        return TOP + len(self.lanes) * LANE_HEIGHT + 8

    def column_x(self, column: int) -> int:
        """The x of the left edge of ``column``."""
        return LEFT + column * COLUMN

    def lane_y(self, lane: int) -> int:
        """The y of the middle of ``lane``."""
        return TOP + lane * LANE_HEIGHT + LANE_HEIGHT // 2

    @property
    def witness_marks(self) -> list[Mark]:
        """The marks of the witness events."""
        return [m for m in self.marks if m.witness]


def build_timeline(history: History, witness: tuple[int, ...] = ()) -> Timeline:
    """Lay ``history`` out; the events at indexes ``witness`` are highlighted."""
    events = [e for e in history if _shown(e)]
    lanes = _lanes(events)
    lane_of = {name: i for i, name in enumerate(lanes)}
    workers = frozenset(
        str(e.value.get("worker_id", e.process)) for e in events if e.f is EventF.WORKER
    )
    tl = Timeline(lanes=lanes, witness=tuple(witness), problems=history.problems, workers=workers)
    wit = set(witness)
    alive: dict[str, tuple[int, str]] = {}  # worker -> (start column, kind)
    start_time = events[0].time if events else 0.0
    last_time = start_time
    for column, e in enumerate(events):
        if e.time != last_time:
            tl.ticks.append((column, f"t+{e.time - start_time:g}s"))
            last_time = e.time
        glyph, label, process = _describe(e)
        lane = lane_of[process]
        tl.marks.append(Mark(e.index, lane, column, glyph, label[:16], _title(e), e.index in wit))
        if e.f is EventF.WORKER:
            worker = str(e.value.get("worker_id", e.process))
            if e.type == "invoke":
                alive[worker] = (column, "running")
            elif worker in alive:
                begin, kind = alive.pop(worker)
                tl.spans.append(Span(lane_of[worker], begin, column, kind))
                if e.value.get("stopped"):
                    alive[worker] = (column, "paused")
        elif e.f is EventF.FAULT and e.value.get("kind") == "continue":
            worker = str(e.value.get("worker_id"))
            if worker in alive:
                begin, kind = alive.pop(worker)
                tl.spans.append(Span(lane_of[worker], begin, column, kind))
                alive[worker] = (column, "running")
    tl.columns = len(events)
    for worker, (begin, kind) in alive.items():
        tl.spans.append(Span(lane_of[worker], begin, max(tl.columns - 1, begin), kind))
    return tl


def _shown(e: Event) -> bool:
    # A submission's invoke already shows it (a failed one stays visible).
    return e.f is not EventF.DECLARATION and not (e.f is EventF.SUBMIT and e.type == "ok")


def _lanes(events: list[Event]) -> list[str]:
    workers: list[str] = []
    others: list[str] = []
    for e in events:
        if e.f is EventF.WORKER:
            w = str(e.value.get("worker_id", e.process))
            if w not in workers:
                workers.append(w)
    for e in events:
        p = _describe(e)[2]
        if p not in FIXED_LANES and p not in workers and p not in others:
            others.append(p)
    return [*FIXED_LANES, *workers, *others]


def _describe(e: Event) -> tuple[str, str, str]:
    """(glyph, short label, lane) of one event."""
    v = e.value
    if e.f is EventF.SUBMIT:
        return (
            ("submit-fail" if e.type == "fail" else "submit"),
            f"submit {v.get('run_id')}",
            ("runner"),
        )
    if e.f is EventF.DELIVER:
        if e.type == "invoke":
            variant = str(v.get("variant", "valid"))
            glyph = (
                "duplicate"
                if variant == "duplicate"
                else ("deliver" if variant == "valid" else "deliver-bad")
            )
            return glyph, variant, "runner"
        accepted = v.get("accepted", True)
        return (
            ("absorbed" if not accepted else "delivered"),
            ("absorbed" if not accepted else "accepted"),
            "runner",
        )
    if e.f is EventF.WORKER:
        worker = str(v.get("worker_id", e.process))
        if e.type == "invoke":
            crash = v.get("crash")
            return "start", ("start" if not crash else f"start*{crash.get('nth', 1)}"), worker
        if v.get("stopped"):
            return "pause", "paused", worker
        if v.get("signal") == 9 or "killed" in str(v.get("exit", "")):
            return "kill", "SIGKILL", worker
        if e.type == "fail":
            return "crash", f"exit {v.get('code')}", worker
        return "exit", "exit 0", worker
    if e.f is EventF.FAULT:
        kind = str(v.get("kind"))
        fired = bool(v.get("fired", True))
        label = {
            "crash_point": str(v.get("site", "crash point")),
            "effect_boundary": str(v.get("mode", "boundary")),
            "world_fault": str(v.get("mode", "world")),
            "lookup_fault": f"lookup {v.get('mode', 'refused')}",
            "clock": f"+{v.get('seconds', 0):g}s",
            "lease_wait": f"+{v.get('seconds', 0):g}s",
        }.get(kind, kind)
        if not fired:
            return "fault-unfired", label, "nemesis"
        if kind in ("continue",):
            return "continue", f"continue {v.get('worker_id')}", "nemesis"
        if kind in ("kill", "crash_point", "effect_boundary"):
            return "fault-kill", label, "nemesis"
        if kind in ("pause",):
            return "pause", label, "nemesis"
        return "fault", label, "nemesis"
    if e.f is EventF.EFFECT:
        kind = str(v.get("kind", "effect"))
        if v.get("deduplicated"):
            return "effect-dedup", kind, "world"
        if v.get("applied"):
            return "effect", kind, "world"
        return "effect-none", kind, "world"
    if e.f is EventF.TRANSITION:
        return "transition", f"{v.get('to')}", e.process
    if e.f is EventF.CONTEXT:
        return "context", f"ctx {v.get('step', '')}", str(v.get("worker_id") or e.process)
    if e.f is EventF.APPROVAL:
        return "approval", str(v.get("decision", "approval")), "runner"
    if e.f is EventF.MEMORY:
        return "fault", f"mem {v.get('kind')}", "nemesis"
    if e.f is EventF.FINAL:
        return "final", f"{v.get('run_id')} {v.get('state')}", "runner"
    text = str(v.get("text", "note"))
    if text == "world fault armed":
        return "armed", f"arm {v.get('mode')}", "nemesis"
    return "note", text, e.process if e.process in FIXED_LANES else "runner"


def _title(e: Event) -> str:
    """The tooltip: index, process, what, and the interesting fields."""
    v = e.value
    keep = {
        k: v[k]
        for k in (
            "run_id",
            "worker_id",
            "kind",
            "site",
            "nth",
            "action",
            "mode",
            "service",
            "from",
            "to",
            "variant",
            "accepted",
            "outcome",
            "applied",
            "idempotency_key",
            "fencing_token",
            "exit",
            "state",
            "seconds",
            "fired",
            "text",
        )
        if k in v and v[k] is not None
    }
    detail = ", ".join(f"{k}={val}" for k, val in keep.items())
    return f"#{e.index} {e.process} {e.type} {e.f.value}: {detail}"


def describe_event(e: Event) -> str:
    """One readable line for an event (the witness list, JUnit failures)."""
    return _title(e)
