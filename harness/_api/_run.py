"""The front door's functions: :func:`run` one search (checking its
shard and jobs first) and :func:`run_job`, one job of ``--jobs N``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._errors import UsageError
from .._exampledb import ExampleDb, replay_step_cap
from .._jobs import run_jobs
from .._properties import resolve_properties, specs_of
from .._settings import Settings, resolve_jobs, run_settings
from ..adapters import Adapter
from ..adapters._loading import load_adapter, validate_adapter
from ..checkers import Property
from ..outcome import Outcome
from ..report import Report
from ..scenarios import scenario_files
from ._session import Log, Session


def run(
    adapter: str | Adapter,
    *,
    options: Mapping[str, str] | None = None,
    settings: Settings | None = None,
    exhaustive: str | None = None,
    scenarios: Sequence[str | Path] = (),
    properties: Sequence[Property | str] = (),
    log: Log | None = None,
    progress: Callable[[Outcome], None] | None = None,
    **overrides: Any,
) -> Report:
    """Search ``adapter`` for property violations and write its report.

    ``adapter`` is ``"reference"``, a ``"package.module:attr"`` spec (loaded
    with ``options``, as ``--adapter-opt`` would), or an adapter object
    (replay then needs it importable by the spec in ``adapter_spec``, so
    prefer a spec). ``exhaustive`` names a workflow to kill at every crash
    point instead of searching. ``scenarios`` are scenario files (or folders
    of them: kept counterexamples) the search runs first, as regressions.
    ``properties`` are your own invariants (``@harness.invariant``, or
    ``"module:attr"`` specs), judged beside the built-in properties.

    The other keyword arguments are settings (:class:`harness.Settings`),
    named by field or by flag (``budget`` or ``budget_seconds`` for
    ``--budget``): they override the profile's (``profile``), as the CLI
    flags of the same names do, or those of ``settings`` (a
    :class:`~harness.Settings` from :func:`harness.load_settings`) when it
    is given; None leaves one as it is. ``budget`` and ``shrink_budget``
    are seconds. ``shard`` (``"K/N"`` or ``(K, N)``) runs only
    shard K of N of the plan, to spread one search over N machines (merge
    their report folders with ``harness merge``); it needs a fixed seed.
    ``jobs`` (a number, or ``"auto"``: one per usable core) runs the search
    in that many processes, as the shards of its plan, merged into one
    report (see :mod:`harness._jobs`; ``adapter`` must then be a spec).
    ``example_db`` (a folder, or a ``redis://`` URL) keeps the sampled
    search's failing examples and replays them first in later runs.
    ``worker_timeout`` (seconds) is how long one worker may run before it
    is killed and called stuck (default: the adapter's ``worker_timeout``,
    else 120).
    ``determinism_runs`` is how many fault-free runs of each workflow must
    agree before the properties that compare with them are judged (default
    2; where they disagree those properties read unknown, never fail).
    ``log`` receives the
    run's one-line notices (adapter, seed, gaps), ``progress`` the outcome
    after every scenario.

    Raises :class:`harness.UsageError` for bad settings (an unknown name
    too, with the closest one) or declarations.
    """
    settings = run_settings(settings, overrides)
    _check_shard(settings, exhaustive)
    # Checked (and the specs imported) before anything runs: a bad one is exit 2.
    mine = resolve_properties(properties, installed=False)
    n = _check_jobs(settings, exhaustive, spec_given=isinstance(adapter, str), properties=mine)
    # what the jobs of --jobs N import them by (None: one cannot be; refused above)
    given = specs_of(mine) or []
    if settings.mode == "random-kill" and exhaustive:
        raise UsageError("--mode random-kill and --exhaustive exclude each other; pick one")
    regressions = [sc for _, sc in scenario_files([Path(p) for p in scenarios])]
    if regressions and (exhaustive or settings.mode != "search"):
        raise UsageError("--scenario runs within a search; drop --exhaustive / --mode random-kill")
    if settings.example_db is not None and (exhaustive or settings.mode != "search"):
        raise UsageError(
            "--example-db keeps and replays a search's counterexamples; drop --exhaustive / "
            "--mode random-kill, or drop --example-db"
        )
    opts = dict(options or {})
    if isinstance(adapter, str):
        spec = adapter
    else:
        spec = f"{type(adapter).__module__}:{type(adapter).__qualname__}"
    db = (
        None if settings.example_db is None else ExampleDb(settings.example_db, spec, opts, log=log)
    )
    # Bounded: a kept scenario longer than this profile's search writes is
    # skipped (anyone who can write the database chooses what is replayed),
    # and the replays run within --budget, the first of the plan.
    saved = [] if db is None else db.saved(max_steps=replay_step_cap(settings))
    if db is not None and log is not None:
        log(
            f"harness: example database {db.where}: replaying its {len(saved)} kept "
            f"scenario(s) first, within the {settings.budget_seconds:g} s budget (what it "
            "leaves unrun is reported as not run)"
        )
    regressions = [*saved, *regressions]
    if n > 1:

        def share(
            mine: Settings,
            files: Sequence[Path],
            prepared: Path,
            queue: Path,
            say: Log,
            shown: Callable[[Outcome], None],
        ) -> Report:
            # Job 1, in this process (harness._jobs.Share): the probe for
            # every job, then its share; an adapter's traceback is kept in
            # the run's report folder (the share's own is scratch).
            session = Session(
                load_adapter(spec, opts),
                mine,
                spec=spec,
                options=opts,
                log=say,
                progress=shown,
                properties=given,
            )
            ran = [sc for _, sc in scenario_files(list(files))]
            return session.run_share(prepared, queue, ran, errors=Path(settings.report_dir))

        report = run_jobs(
            spec=spec,
            options=opts,
            settings=settings,
            n=n,
            share=share,
            regressions=regressions,
            log=log,
            progress=progress,
            properties=given,
        )
    else:
        if isinstance(adapter, str):
            loaded = load_adapter(adapter, opts)
        else:
            loaded = adapter
            validate_adapter(loaded, spec)
        session = Session(
            loaded,
            settings,
            spec=spec,
            options=opts,
            log=log,
            progress=progress,
            properties=mine,
        )
        report = session.run(exhaustive=exhaustive, regressions=regressions)
    if db is not None and settings.shard is not None:
        # Every shard of a search must replay what the others replay: none
        # writes, harness merge --example-db keeps what they found together.
        if log is not None:
            log(
                f"harness: example database {db.where}: read only in a shard; "
                "harness merge --example-db keeps what the shards found"
            )
    elif db is not None:
        kept, dropped = db.keep(report, saved)
        if log is not None:
            log(
                f"harness: example database {db.where}: kept {kept} counterexample(s), "
                f"dropped {dropped} that no longer fail"
            )
    return report


def run_job(
    spec: str,
    options: Mapping[str, str],
    settings: Settings,
    scenarios: Sequence[str | Path] = (),
    *,
    prepared: Path | None = None,
    queue: Path | None = None,
    ready: Callable[[], bool] | None = None,
    log: Log | None = None,
    progress: Callable[[Outcome], None] | None = None,
    properties: Sequence[str] = (),
) -> Report:
    """One job of ``--jobs N`` (:mod:`harness._job`): shard
    ``settings.shard`` of the search its parent checked and planned, with
    the parent's ``settings`` as they are (see ``harness._jobs.job_args``),
    and its probe (``prepared``: the folder :meth:`Session.prepare` filled).
    ``queue``: the run's :class:`PlanQueue` file, from which the jobs take
    the plan's scenarios as they go (without it: shard K's static part).
    ``ready()`` waits for the parent's probe (False: the parent is gone),
    called once the adapter is loaded: the job loads it while the parent
    probes."""
    regressions = [sc for _, sc in scenario_files([Path(p) for p in scenarios])]
    loaded = load_adapter(spec, dict(options))
    if ready is not None and not ready():
        raise UsageError("the harness run that started this job is gone: nothing to run")
    session = Session(
        loaded,
        settings,
        spec=spec,
        options=options,
        log=log,
        progress=progress,
        properties=properties,
    )
    return session.run(regressions=regressions, prepared=prepared, queue=queue)


def _check_shard(settings: Settings, exhaustive: str | None) -> None:
    """A shard is a part of a search's plan: refuse what has no such plan,
    or would plan differently on each machine (no fixed seed)."""
    if settings.shard is None:
        return
    k, n = settings.shard
    if exhaustive or settings.mode != "search":
        raise UsageError(
            f"--shard {k}/{n} splits a search's plan; --exhaustive and --mode random-kill "
            "have none to split: drop --shard, or drop those"
        )
    if settings.seed is None and not settings.derandomize:
        raise UsageError(
            f"--shard {k}/{n} needs a fixed seed, so that every shard plans the same search: "
            f"pass the same --seed N to all {n} shards (or use --profile ci, seeded 0)"
        )


def _check_jobs(
    settings: Settings,
    exhaustive: str | None,
    *,
    spec_given: bool,
    properties: Sequence[Property] = (),
) -> int:
    """How many jobs the run takes. ``--jobs N`` splits a search's plan
    over N processes: asked for explicitly where there is none to split
    (exhaustive, random-kill), within a shard, or of an adapter object (a
    job imports the adapter by its spec), it is refused; ``auto`` there
    gives one job."""
    n = resolve_jobs(settings)
    if n == 1:
        return 1
    why = None
    if exhaustive or settings.mode != "search":
        why = "--exhaustive and --mode random-kill have no plan to split"
    elif settings.shard is not None:
        why = f"--shard {settings.shard[0]}/{settings.shard[1]} already runs one part of the plan"
    elif not spec_given:
        why = "the jobs import the adapter by its spec: pass it as 'package.module:attr'"
    elif specs_of(properties) is None:
        # A job imports each invariant by its spec, as it imports the adapter.
        lost = [p.name for p in properties if p.spec is None]
        why = (
            f"the jobs import each invariant by its spec, and {', '.join(lost)} has none "
            "(defined in __main__ or in a function): define it at the top of a module"
        )
    if why is None:
        return n
    if settings.jobs is None:  # auto: one job where jobs do not apply
        return 1
    raise UsageError(
        f"--jobs {n} runs a search's plan in {n} processes, and {why}: drop --jobs "
        "(or give --jobs 1)"
    )
