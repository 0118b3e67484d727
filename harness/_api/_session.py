"""The :class:`Session` of one run: plan (probe the universe), check
declarations, execute, account, and write the report; and what
:meth:`Session.prepare` leaves for the jobs of ``--jobs N``."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from .._errors import AdapterError, Interrupted, UsageError
from .._janitor import sweep_folders
from .._properties import adapter_properties, resolve_properties, specs_of
from .._settings import Settings
from .._signals import shielded
from ..adapters import Adapter, Capability
from ..adapters._guard import close_adapter, guard, setup_adapter
from ..checkers import Property
from ..model import Scenario
from ..nemesis import resolve_worker_timeout, worker_timeout, worker_timeout_limit
from ..outcome import Outcome
from ..report import Report, build_report, claim_report_folder, not_tested, write_run
from ..report._build import ROLLBACK_GAP
from ..report._folder import RENDERINGS, keep_file
from ..scenarios import Universe, commit_pair_rows, probe_universe
from ..session import Engine, check_declarations, run_exhaustive, run_random_kill
from ..session._draws import SEEDED_FROM
from ..session._plan import pair_room, targeted_cap
from ..session._probe import probe_outcome
from ..session._shared import PlanQueue, SharedOracles

Log = Callable[[str], None]
T = TypeVar("T")

#: what :meth:`Session.prepare` writes into its folder for the jobs of
#: ``--jobs N``: the probe's findings and universe, and (in ``ORACLES``) the
#: fault-free runs, shared by the jobs from then on
PREPARED = "prepared.pickle"
ORACLES = "oracles"


class Session:
    """One run of one adapter under one :class:`~harness.Settings`: plan
    (probe the universe), check declarations, execute (search, random-kill
    or exhaustive), account, and write the report."""

    def __init__(
        self,
        adapter: Adapter,
        settings: Settings,
        *,
        spec: str,
        options: Mapping[str, str] | None = None,
        log: Log | None = None,
        progress: Callable[[Outcome], None] | None = None,
        properties: Sequence[Property | str] = (),
    ) -> None:
        mine = resolve_properties(properties, installed=False)
        #: the user's invariants: given to the run, the adapter's, installed
        #: ones (checked: a bad one is a UsageError before anything runs)
        hooked = adapter_properties(adapter)
        self.properties = resolve_properties([*mine, *hooked])
        #: where each came from, as the report says it
        self.property_sources = {
            p.name: "run"
            if any(m.name == p.name for m in mine)
            else "adapter"
            if any(h.name == p.name for h in hooked)
            else "installed"
            for p in self.properties
        }
        #: what a replay command names with --property (None: one of them
        #: cannot be imported again: defined in __main__ or in a function)
        self.property_specs = specs_of(mine)
        #: every call into the adapter is checked at the boundary (adapter errors)
        self.adapter = guard(adapter)
        self.settings = settings
        self.spec = spec
        self.options = dict(options or {})
        self._log = log or (lambda _line: None)
        self._progress = progress
        #: the report formats :meth:`_write` writes
        self._renderings: Sequence[str] = RENDERINGS

    def run(
        self,
        *,
        exhaustive: str | None = None,
        regressions: Sequence[Scenario] = (),
        prepared: Path | None = None,
        queue: Path | None = None,
    ) -> Report:
        """The whole run, into ``settings.report_dir``. ``prepared``: the
        folder :meth:`prepare` filled (in a job of ``--jobs N``), whose
        fault-free probe and universe this run takes instead of its own;
        ``queue``: the :class:`PlanQueue` file the jobs take the plan's
        scenarios from (see ``Engine.run``)."""
        report_dir = Path(self.settings.report_dir)

        return self._with_adapter(
            report_dir,
            lambda: self._run(report_dir, exhaustive, regressions, prepared, queue),
            claim=True,
        )

    def run_share(
        self,
        prepared: Path,
        queue: Path,
        regressions: Sequence[Scenario] = (),
        *,
        errors: Path,
    ) -> Report:
        """Job 1 of ``--jobs N``, run by the parent itself: :meth:`prepare`
        into ``prepared`` (for every job), then its share of the plan, as
        :meth:`run` with ``prepared`` and ``queue``, into
        ``settings.report_dir``; both between one ``setup()`` and one
        ``close()`` of the adapter. An adapter's traceback is kept in
        ``errors`` (the run's report folder: the share's is scratch)."""
        report_dir = Path(self.settings.report_dir)

        def body() -> Report:
            self._prepare(prepared)
            claim_report_folder(report_dir)
            return self._run(report_dir, None, regressions, prepared, queue)

        return self._with_adapter(errors, body)

    def prepare(self, folder: Path) -> None:
        """What every job of ``--jobs N`` would do alike before its search,
        done once (by the parent, while the jobs start): the fault-free
        probe and the universe, written into ``folder`` for :meth:`run`
        (``prepared``), with the probe's fault-free runs. Raises what
        :meth:`run` would (a declaration only the user can fix: UsageError)."""
        self._with_adapter(Path(self.settings.report_dir), lambda: self._prepare(folder))

    def _prepare(self, folder: Path) -> None:
        """:meth:`prepare`, the adapter set up."""
        engine = Engine(
            self.adapter, self.settings, shared=SharedOracles(folder / ORACLES), log=self._log
        )
        try:
            findings = check_declarations(self.adapter, engine.oracle)
            universe = self._universe(found=bool(findings))
        finally:
            engine.close()
        data = pickle.dumps(
            {
                "findings": findings,
                "universe": universe,
                "fault_free_seconds": engine.fault_free_seconds,
                "agreement": engine.agreement.save(),
            }
        )
        pending = folder / f".{PREPARED}"
        pending.write_bytes(data)
        os.replace(pending, folder / PREPARED)  # a job never reads half of it

    def _with_adapter(self, report_dir: Path, body: Callable[[], T], *, claim: bool = False) -> T:
        """``body()`` between the adapter's run-level hooks, under its worker
        timeout; an adapter's error keeps its traceback in ``report_dir``
        (``claim``: claimed first)."""
        try:
            try:
                if claim:
                    # Before anything runs: a folder the harness may not write
                    # is refused now (exit 2), not after the whole run.
                    claim_report_folder(report_dir)
                # What killed runs left (their adapters' servers too) goes
                # first; then the adapter's run-level hook, before the probe.
                sweep_folders()
                setup_adapter(self.adapter, log=self._log)
                limit = resolve_worker_timeout(self.settings.worker_timeout, self.adapter)
                with worker_timeout_limit(limit):
                    result = body()
            except BaseException as exc:
                close_adapter(self.adapter, failing=exc)
                raise
            close_adapter(self.adapter)  # the whole run has ended: the optional hook
            return result
        except AdapterError as exc:
            if exc.detail:  # the adapter's traceback, kept like the rest of the run
                text = f"{exc}\n\n{exc.detail}".encode("utf-8", "backslashreplace")
                with contextlib.suppress(UsageError, OSError):
                    exc.saved_to = str(keep_file(report_dir, "adapter-error.txt", text))
            raise

    def _run(
        self,
        report_dir: Path,
        exhaustive: str | None,
        regressions: Sequence[Scenario],
        prepared: Path | None,
        queue: Path | None = None,
    ) -> Report:
        adapter, settings = self.adapter, self.settings
        # A job's folder is read by its parent's merge, which renders the
        # run's report itself: the job writes report.json alone.
        self._renderings = ("report.json",) if queue is not None else RENDERINGS
        shared = None if prepared is None else SharedOracles(prepared / ORACLES)
        engine = Engine(
            adapter,
            settings,
            progress=self._progress,
            log=self._log,
            shared=shared,
            queue=None if queue is None else PlanQueue(queue),
            properties=self.properties,
        )
        try:
            try:
                if prepared is None:
                    # The fault-free probe first: a runtime that cannot finish
                    # a run without faults is a finding (progress fails, no
                    # search), before the site profile runs it under crash points.
                    findings = check_declarations(adapter, engine.oracle)
                    universe = self._universe(found=bool(findings))
                else:  # the parent's (Session.prepare), with what its runs took
                    given = pickle.loads((prepared / PREPARED).read_bytes())
                    findings, universe = given["findings"], given["universe"]
                    engine.fault_free_seconds.extend(given["fault_free_seconds"])
                    engine.agreement.load(given.get("agreement", {}))
                self._say_universe(universe, found=bool(findings))
                self._say_properties()
                self._log(
                    f"harness: seed {engine.seed} (repeat this run with --seed {engine.seed})"
                )
                if findings:
                    self._log(
                        "harness: the fault-free run of workflow "
                        f"{', '.join(repr(f.workflow) for f in findings)} never completed: "
                        "no search runs; the report says why"
                    )
                    outcome = probe_outcome(engine, universe, findings)
                elif exhaustive:
                    outcome = run_exhaustive(engine, universe, exhaustive)
                elif settings.mode == "random-kill":
                    outcome = run_random_kill(engine, universe)
                else:
                    outcome = engine.run(
                        universe,
                        regressions,
                        commit_pairs=commit_pair_rows(
                            universe,
                            targeted_cap(settings) if settings.targeted else 0,
                            pair_room(settings),
                        ),
                    )
            except Interrupted as exc:
                # What ran so far is still worth a report, marked as such.
                partial = engine.partial(signal.Signals(exc.signum).name)
                if partial is not None and partial.examples:
                    with shielded():
                        exc.report = self._write(partial, engine, report_dir)
                raise
            with shielded():
                report = self._write(outcome, engine, report_dir)
        finally:
            engine.close()
        return report

    def _say_properties(self) -> None:
        """Log the user's invariants the run judges, and one a replay
        command cannot name."""
        if not self.properties:
            return
        shown = ", ".join(f"{p.name} ({self.property_sources[p.name]})" for p in self.properties)
        self._log(f"harness: your invariants: {shown}")
        if self.property_specs is None:
            lost = [p.name for p in self.properties if p.spec is None]
            self._log(
                f"harness: invariant {', '.join(lost)} is defined where nothing can import it "
                "again (in __main__ or in a function): replay commands cannot name it; define "
                "it at the top of an importable module"
            )

    def _say_universe(self, universe: Universe, *, found: bool) -> None:
        """Log what the run tests (nothing when the probe ``found`` a
        runtime that cannot finish a fault-free run: no search runs)."""
        adapter, settings = self.adapter, self.settings
        if found:
            return
        self._log(
            f"harness: adapter {adapter.name} {adapter.describe()}, profile {settings.profile}, "
            f"{len(universe.crash_points)} crash points, "
            f"families {', '.join(universe.enabled())}"
        )
        for gap in not_tested(adapter, asked=settings.families or None, ran=universe.enabled()):
            # A capability the adapter declares and this machine cannot
            # exercise (network faults without iptables or root), or that
            # has nowhere to aim (memory no run reads), is not missing: its
            # entry already says why.
            declared = gap["capability"] in {c.value for c in adapter.capabilities}
            why = "missing"
            if declared:
                why = (
                    "declared, but nowhere to aim it"
                    if gap["capability"] == Capability.MEMORY_INJECTION.value
                    else "declared, but not promised for rollbacks"
                    if gap["what"] == ROLLBACK_GAP
                    else "declared, but this machine cannot exercise it"
                )
            self._log(f"harness: not tested ({gap['capability']} {why}): {gap['what']}")

    def _universe(self, *, found: bool) -> Universe:
        """What the adapter offers, with each workflow's site profile; when
        the fault-free probe already failed (``found``), only what it
        declares: no search runs, and profiling a runtime that cannot finish
        a run would fail for the same reason."""
        adapter, settings = self.adapter, self.settings
        if found:
            return Universe(
                workflows=tuple(adapter.workflows()),
                crash_points=(),
                capabilities=frozenset(adapter.capabilities),
            )
        universe = probe_universe(
            adapter,
            families=settings.families or None,
            max_runs=settings.max_runs,
            max_episodes=settings.max_episodes,
            # The sites right before effects aim the targeted schedules, which
            # also seed a sampled stream of SEEDED_FROM draws or more (one run
            # per effect: not spent on a short sampled-only search).
            aim_effects=settings.mode == "search"
            and (settings.targeted or settings.max_examples >= SEEDED_FROM),
            # A profiling worker that never exits is stuck past the budget too.
            worker_timeout=worker_timeout(settings.budget_seconds),
            network_kinds=_network_kinds(adapter),
        )
        return universe

    def _write(self, outcome: Outcome, engine: Engine, report_dir: Path) -> Report:
        # Where each user property came from is the session's to say.
        sources = {
            name: {**info, "source": self.property_sources.get(name, "run")}
            for name, info in outcome.user_properties.items()
        }
        outcome = dataclasses.replace(outcome, user_properties=sources)
        report = build_report(
            outcome,
            self.adapter,
            self.spec,
            self.options,
            report_dir,
            properties=self.property_specs or [],
        )
        write_run(report, outcome, engine.last_example, report_dir, renderings=self._renderings)
        return report


def _network_kinds(adapter: Adapter) -> tuple[str, ...]:
    """The network fault kinds the backend in use can inflict: a reply held
    back, fragmented or cut only through a proxy (Toxiproxy)."""
    from .._toxiproxy import choose
    from ..vocabulary import NETWORK_KINDS, PROXY_NETWORK_KINDS

    # Only an adapter that routes its workers through the proxy (the
    # contract's route_worker; it says so with ``routes_workers``) gets them:
    # another's network faults run on netfilter rules whatever the backend.
    if Capability.NETWORK_FAULTS not in adapter.capabilities:
        return NETWORK_KINDS
    if getattr(adapter, "routes_workers", False) is not True:
        return NETWORK_KINDS
    try:
        proxied = choose().backend == "toxiproxy"
    except ValueError:  # a bad HARNESS_NETWORK_BACKEND: refused where the run starts
        proxied = False
    return PROXY_NETWORK_KINDS if proxied else NETWORK_KINDS
