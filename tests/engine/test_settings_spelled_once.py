"""Each run setting is spelled once (issue 30): its ``Settings`` field
carries an ``Option``, and ``harness run``'s options, the pytest plugin's
and :func:`harness.run`'s keyword arguments are made from it. These tests
fail when the fields and what is made from them drift apart: a field with
no ``Option``, a flag the parser lacks, an option for a setting added by
hand, a setting ``harness run`` does not hand on. Fast: nothing runs.
"""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any

import pytest

import harness
from harness._settings import (
    Option,
    Settings,
    flag_values,
    load_settings,
    plugin_option,
    run_settings,
    setting_options,
)
from harness.cli import _parser

#: ``harness run``'s options that are not settings: what it runs, not how hard
RUN_ONLY = {"help", "adapter", "adapter_opt", "properties", "network_backend", "scenarios"}
RUN_ONLY |= {"exhaustive"}  # a workflow's name, not the (unused) setting of that name
#: the plugin's options that are not settings (--harness-report-dir is the root
#: of one folder per adapter variant, not the report_dir setting)
PLUGIN_ONLY = {
    "harness_adapter",
    "harness_adapter_opt",
    "harness_property",
    "harness_allow_inconclusive",
    "harness_report_dir",
}


def _run_parser() -> argparse.ArgumentParser:
    for action in _parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            run: argparse.ArgumentParser = action.choices["run"]
            return run
    raise AssertionError("no run subcommand")


def _plugin_options() -> dict[str, dict[str, Any]]:
    """What the plugin's ``pytest_addoption`` adds: dest -> its arguments."""
    from harness.pytest_plugin import pytest_addoption

    added: dict[str, dict[str, Any]] = {}

    class Group:
        def addoption(self, *flags: str, **kwargs: Any) -> None:
            added[kwargs["dest"]] = {"flags": flags, **kwargs}

    class Parser:
        def getgroup(self, *args: Any) -> Group:
            return Group()

    pytest_addoption(Parser())  # type: ignore[arg-type]
    return added


def test_every_setting_carries_an_option() -> None:
    for f in fields(Settings):
        option = f.metadata.get("option")
        assert isinstance(option, Option), f"Settings.{f.name} carries no Option"
        assert option.help, f"Settings.{f.name}: its Option has no help"
        if option.flag is not None:
            assert option.flag.startswith("--"), f.name
        assert not (option.pytest and option.flag is None), f"{f.name}: pytest needs a flag"
    flags = [o.flag for _, o in setting_options() if o.flag is not None]
    assert len(flags) == len(set(flags)), "two settings share a flag"


def test_harness_run_has_an_option_for_every_flag_and_no_setting_by_hand() -> None:
    actions = {a.dest: a for a in _run_parser()._actions}
    flagged = {name: o for name, o in setting_options() if o.flag is not None}
    assert set(actions) - RUN_ONLY == set(flagged), (
        "harness run's options for settings and the Settings fields with a flag differ"
    )
    for name, option in flagged.items():
        action = actions[name]
        assert action.option_strings == [option.flag], name
        assert action.default is None, f"{name}: a flag not given must leave the setting be"
        assert action.help == option.help, name
        if option.switch is None:
            assert action.type is option.type and action.metavar == option.metavar, name
            assert action.choices == option.choices, name
        else:
            assert action.nargs == 0 and action.const is option.switch, name


def test_the_plugin_offers_every_setting_that_says_pytest_and_no_other() -> None:
    added = _plugin_options()
    offered = {name: o for name, o in setting_options() if o.pytest}
    dests = {plugin_option(name, o)[1]: name for name, o in offered.items()}
    assert set(added) - PLUGIN_ONLY == set(dests)
    for dest, name in dests.items():
        option = offered[name]
        assert added[dest]["flags"] == (plugin_option(name, option)[0],)
        assert added[dest]["default"] is None, name
        assert added[dest]["type"] is option.type and added[dest]["help"] == option.help


def test_today_s_flags_and_plugin_options_keep_their_names() -> None:
    run = {o for a in _run_parser()._actions for o in a.option_strings}
    assert {
        "--profile", "--seed", "--budget", "--shrink-budget", "--worker-timeout",
        "--determinism-runs", "--max-examples", "--report-dir", "--mode", "--no-targeted",
        "--stop-on-first", "--shard", "--jobs", "--example-db",
    } <= run  # fmt: skip
    plugin = {f for a in _plugin_options().values() for f in a["flags"]}
    assert {"--harness-profile", "--harness-seed", "--harness-determinism-runs"} <= plugin


def test_every_flag_reaches_its_setting() -> None:
    """What ``harness run`` hands to :func:`harness.run` (``flag_values``)
    resolves to the setting each flag names."""
    words = ["--adapter", "reference"]
    for name, option in setting_options():
        if option.flag is None or option.switch is not None:
            continue
        sample = {"profile": "ci", "mode": "random-kill", "shard": "2/3", "jobs": "3"}
        words += [option.flag, sample.get(name, "7")]
    ns = _run_parser().parse_args([*words, "--no-targeted", "--stop-on-first"])
    given = flag_values(ns)
    assert set(given) == {n for n, o in setting_options() if o.flag is not None}
    s = run_settings(None, given)
    assert (s.profile, s.max_examples, s.budget_seconds, s.shrink_budget_seconds) == (
        "ci",
        7,
        7.0,
        7.0,
    )
    assert (s.seed, s.report_dir, s.mode, s.targeted, s.stop_on_first) == (
        7,
        "7",
        "random-kill",
        False,
        True,
    )
    assert (s.shard, s.jobs, s.example_db, s.worker_timeout, s.determinism_runs) == (
        (2, 3),
        3,
        "7",
        7.0,
        7,
    )


def test_settings_are_given_by_field_or_by_flag_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)  # else the default profile is ci
    by_flag = run_settings(None, {"profile": "dev", "budget": 5, "shrink_budget": 2})
    by_field = run_settings(None, {"budget_seconds": 5, "shrink_budget_seconds": 2})
    assert by_flag == by_field == load_settings("dev", budget_seconds=5, shrink_budget_seconds=2)
    with pytest.raises(harness.UsageError, match="given twice"):
        run_settings(None, {"budget": 5, "budget_seconds": 6})


def test_an_unknown_setting_is_refused_naming_the_closest_before_anything_runs() -> None:
    with pytest.raises(
        harness.UsageError, match=r"'budjet' given to harness.run\(\) \(did you mean budget\?\)"
    ):
        harness.run("nosuch.module:Adapter", budjet=5)
    with pytest.raises(harness.UsageError, match=r"unknown setting 'colour'.*the settings: "):
        harness.run("reference", colour="blue")


def test_settings_given_are_changed_by_the_overrides_and_checked_alike() -> None:
    base = load_settings("ci", seed=3)
    s = run_settings(base, {"budget": 9, "jobs": "auto", "seed": None})
    assert (s.profile, s.seed, s.budget_seconds, s.jobs) == ("ci", 3, 9.0, None)
    assert run_settings(base, {"profile": "ci"}) == base
    with pytest.raises(harness.UsageError, match=r"budget=-1\.0 is out of range"):
        run_settings(base, {"budget": -1})
    with pytest.raises(harness.UsageError, match="unknown mode 'x'"):
        run_settings(base, {"mode": "x"})
    with pytest.raises(
        harness.UsageError, match=r"profile='dev' and settings= \(of profile 'ci'\)"
    ):
        run_settings(base, {"profile": "dev"})


def test_every_number_a_setting_reads_by_its_type_carries_its_range() -> None:
    """A numeric setting is one field: its range lives in its ``Option``
    (``bounds``), from which the refusal table is made, so a new number
    cannot be added without one (``jobs`` and ``shard`` have readers of
    their own, which refuse what they cannot use)."""
    from dataclasses import fields

    from harness._errors import UsageError
    from harness._settings import BOUNDS
    from harness._settings._fields import Settings

    numeric = {
        f.name
        for f in fields(Settings)
        if f.metadata["option"].parse is None
        and any(t in str(f.type).split(" | ") for t in ("int", "float"))
    }
    assert numeric == set(BOUNDS), (numeric, set(BOUNDS))
    with pytest.raises(UsageError, match="max-episodes=0 is out of range"):
        load_settings("dev", max_episodes=0)
