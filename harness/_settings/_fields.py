"""The settings themselves: :class:`Settings`, one frozen object whose
fields each carry an :class:`Option` (flag, help, how a value is read),
and the command line's and pytest plugin's options made from them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ._values import (
    MODES,
    PROFILES,
    parse_jobs,
    parse_shard,
    profile_defaults,
)


@dataclass(frozen=True)
class Option:
    """How one setting is given from outside the code, beside
    ``[tool.harness]`` and ``HARNESS_<NAME>`` (which every setting has):
    its ``harness run`` flag and help, how the flag's words are read, and
    whether the pytest plugin offers it too, as ``--harness-<flag>``.

    Every :class:`Settings` field carries one (:func:`setting_options`);
    ``harness run``'s options for settings and the plugin's are made from
    them, and :func:`harness.run` takes the settings by field name (or by
    the name of their flag: ``budget``)."""

    #: ``--budget``; None: no flag (``[tool.harness]`` and ``HARNESS_*`` only)
    flag: str | None
    #: what the flag does, with its default (argparse's help: no ``%``)
    help: str
    metavar: str | None = None
    #: argparse's ``type`` for the flag's words (``int``, ``float``: argparse's
    #: own "invalid int value" message); None: the words as given
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    #: a switch: the flag takes no value and sets the setting to this one
    switch: bool | None = None
    #: the setting's own reader for every layer (``value, source``), raising
    #: :class:`UsageError`; None: by the field's type (see ``_coerce``)
    parse: Callable[[Any, str], Any] | None = None
    #: the pytest plugin offers it too (``--harness-seed``, dest ``harness_seed``)
    pytest: bool = False
    #: a number's range and what it means, ``(lowest, highest, what)``: a
    #: value outside is refused when the settings are read, with the reason
    #: (:data:`harness._settings.BOUNDS` is made from these)
    bounds: tuple[float, float, str] | None = None

    @property
    def keyword(self) -> str | None:
        """The flag's name as a keyword argument of :func:`harness.run`
        (``--shrink-budget``: ``shrink_budget``); None for a switch or no flag."""
        if self.flag is None or self.switch is not None:
            return None
        return self.flag.removeprefix("--").replace("-", "_")


def _setting(default: Any, option: Option) -> Any:
    return field(default=default, metadata={"option": option})


@dataclass(frozen=True)
class Settings:
    """How hard and how long to search. Build with :func:`load_settings`."""

    profile: str = _setting(
        "dev",
        Option(
            "--profile",
            "how hard and how long to search (default: dev, or ci when $CI is set); "
            f"max examples: {profile_defaults('max_examples')}; budget seconds: "
            f"{profile_defaults('budget_seconds')}",
            choices=tuple(PROFILES),
            pytest=True,
        ),
    )
    max_examples: int = _setting(
        12,
        Option(
            "--max-examples",
            "how many scenarios the search plans, a fifth of them sampled and the rest "
            "targeted schedules, plus up to a fifth more for the commit x fault pairs the "
            f"targeted ones miss (default: the profile's: {profile_defaults('max_examples')})",
            metavar="N",
            type=int,
            bounds=(1, 1_000_000, "scenarios to run (at least one, or nothing is judged)"),
        ),
    )
    budget_seconds: float = _setting(
        60.0,
        Option(
            "--budget",
            "how long the search may take, in seconds (default: the profile's: "
            f"{profile_defaults('budget_seconds')}); what it cuts is reported as not run",
            metavar="SECONDS",
            type=float,
            bounds=(0.001, 30 * 24 * 3600.0, "seconds the search may take"),
        ),
    )
    #: shrinking's own budget, after the search (``--shrink-budget``); None:
    #: a quarter of ``budget_seconds`` (see ``harness.session._plan.shrink_deadline``)
    shrink_budget_seconds: float | None = _setting(
        None,
        Option(
            "--shrink-budget",
            "how long shrinking a failure may take, after the search and on top of --budget "
            "(default: a quarter of --budget, plus what the search left of it); a "
            "counterexample whose shrinking it stops is reported as not fully shrunk",
            metavar="SECONDS",
            type=float,
            bounds=(0, 30 * 24 * 3600.0, "seconds shrinking may take"),
        ),
    )
    derandomize: bool = _setting(
        False,
        Option(None, "a fixed seed (0) when none is given: the ci profile's; no flag"),
    )
    seed: int | None = _setting(
        None,
        Option(
            "--seed",
            "the search's seed, to repeat a run exactly (default: random, printed at the "
            "start; the ci profile is derandomized: seed 0)",
            metavar="N",
            type=int,
            pytest=True,
            bounds=(0, 2**64 - 1, "the search's seed"),
        ),
    )
    max_runs: int = _setting(
        2,
        Option(
            None, "runs per scenario (the profile's); no flag", bounds=(1, 50, "runs per scenario")
        ),
    )
    max_episodes: int = _setting(
        4,
        Option(
            None,
            "fault episodes per sampled scenario (the profile's); no flag",
            bounds=(1, 50, "fault episodes per scenario"),
        ),
    )
    families: tuple[str, ...] | None = _setting(
        None, Option(None, "the fault families to arm, comma-separated (default: all); no flag")
    )
    report_dir: str = _setting(
        "reports",
        Option(
            "--report-dir",
            "where to write the report folder (default: reports); a folder another tool "
            "wrote is refused, a harness report folder is replaced",
            metavar="DIR",
        ),
    )
    exhaustive: bool = _setting(
        False,
        Option(
            None,
            "read by nothing: harness run --exhaustive WORKFLOW (harness.run(exhaustive=...)) "
            "names the workflow instead; no flag",
        ),
    )
    #: ``search`` (event-triggered faults, shrinking) or ``random-kill`` (the
    #: baseline: SIGKILL at random wall-clock moments, no shrinking)
    mode: str = _setting(
        "search",
        Option(
            "--mode",
            "search (default): generated scenarios with event-triggered faults, a failure "
            "shrunk to a minimal counterexample; random-kill: the baseline -- the same "
            "workloads, workers SIGKILLed at uniformly random moments (a seeded delay over a "
            "worker's typical run time), checked by the same properties, the first failure "
            "reported as found (no shrinking, and its replay may not reproduce it)",
            choices=MODES,
        ),
    )
    #: run the targeted schedules (``scenarios.targeted``) before sampling
    targeted: bool = _setting(
        True,
        Option(
            "--no-targeted",
            "skip the targeted schedules that a search runs before sampling",
            switch=False,
        ),
    )
    #: stop the search at the first failing scenario (else it goes on judging
    #: every property until each has failed, or the plan or budget ends)
    stop_on_first: bool = _setting(
        False,
        Option(
            "--stop-on-first",
            "stop the search at the first failing scenario (by default it goes on until "
            "every property has failed once or the plan or budget ends, and shrinks one "
            "counterexample per failing property)",
            switch=True,
        ),
    )
    #: ``(K, N)``: run only shard K of N of the search's plan (``--shard K/N``,
    #: see ``harness.session._plan.shard_plan``); None: the whole plan
    shard: tuple[int, int] | None = _setting(
        None,
        Option(
            "--shard",
            "run only shard K of N of the search's plan (1 <= K <= N; say 2/4), to spread "
            "one search over N machines; every shard needs the same --seed, profile and "
            "options, and `harness merge` joins their report folders into one report",
            metavar="K/N",
            parse=parse_shard,
        ),
    )
    #: parallel processes the search runs in (``--jobs N``, see
    #: ``harness._jobs``); None: ``auto``, one per usable core (at most one
    #: per :data:`SCENARIOS_PER_JOB` planned scenarios). 1: today's single
    #: process, the default of every profile but ``thorough``
    jobs: int | None = _setting(
        1,
        Option(
            "--jobs",
            "run the search in N processes of this machine (auto: one per usable core, at "
            "most one per 40 planned scenarios), as N shards of its plan merged into one "
            "report; the plan, the verdicts and every scenario's history are those of --jobs "
            "1 (default: 1, or HARNESS_JOBS / jobs in [tool.harness]; the thorough profile: "
            "auto)",
            metavar="N|auto",
            parse=parse_jobs,
        ),
    )
    #: where the sampled search keeps and replays its failing examples
    #: (``--example-db PATH|redis://...``, see ``harness._exampledb``);
    #: None: nowhere
    example_db: str | None = _setting(
        None,
        Option(
            "--example-db",
            "keep the sampled search's failing examples in this folder (or Redis) and "
            "replay them first in every later run that names it, whatever its seed (a "
            "writable folder, created if missing, or a reachable Redis; the replays count "
            "against --budget)",
            metavar="PATH|redis://...",
        ),
    )
    #: seconds one worker may run before it is killed and called stuck
    #: (``--worker-timeout``); None: the adapter's ``worker_timeout``, else
    #: 120 (``harness.nemesis.resolve_worker_timeout``)
    worker_timeout: float | None = _setting(
        None,
        Option(
            "--worker-timeout",
            "how long one worker may run before it is killed and called stuck (default: "
            "the adapter's worker_timeout, else 120; never more than the budget left, nor "
            "under 30 s unless set lower)",
            metavar="SECONDS",
            type=float,
            bounds=(1, 24 * 3600.0, "seconds one worker may run"),
        ),
    )
    #: fault-free runs of each workflow that must agree before the oracle is
    #: trusted (``--determinism-runs``, see ``harness.session._oracle``); 1:
    #: one run, trusted unchecked
    determinism_runs: int = _setting(
        2,
        Option(
            "--determinism-runs",
            "fault-free runs of each workflow that must agree before the properties that "
            "compare with them are judged (default: 2; 1 trusts one run unchecked): where "
            "they disagree those properties read unknown, never fail",
            metavar="N",
            type=int,
            pytest=True,
            bounds=(
                1,
                20,
                "fault-free runs of each workflow compared before they are trusted (2, the "
                "default, catches most nondeterminism; 1 trusts one run unchecked)",
            ),
        ),
    )

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)


def setting_options() -> list[tuple[str, Option]]:
    """Every setting's name and :class:`Option`, in the fields' order."""
    return [(f.name, f.metadata["option"]) for f in fields(Settings)]


def flag_values(ns: object) -> dict[str, Any]:
    """The settings a parsed ``harness run`` command line gives, by field
    name (None: the flag was not given): the argparse namespace of the
    options :class:`Option` made, whose ``dest`` is the field's name."""
    return {name: getattr(ns, name, None) for name, o in setting_options() if o.flag is not None}


def plugin_option(name: str, option: Option) -> tuple[str, str]:
    """The pytest plugin's flag and ``dest`` for a setting it offers
    (``--seed``: ``--harness-seed``, ``harness_seed``)."""
    assert option.flag is not None, name
    return f"--harness-{option.flag.removeprefix('--')}", f"harness_{name}"
