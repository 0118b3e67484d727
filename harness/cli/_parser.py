"""The argument parser of ``harness``: every subcommand, its options and
help texts (the settings' flags made from the ``Settings`` fields that carry
them), and "did you mean" for a mistyped option. Parsing only: what a
command does is elsewhere."""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path
from typing import Any, NoReturn

from ._exits import EXIT_CODES

RUN_EXAMPLES = """\
examples:
  harness run --adapter reference
  harness run --adapter reference --adapter-opt bug=retry-unknown-commit --profile ci
  PYTHONPATH=. harness run --adapter my_adapter:MyAdapter --report-dir reports/mine
  harness run --adapter reference --seed 0 --shard 2/4 --report-dir reports/shard2"""


class _Parser(argparse.ArgumentParser):
    """argparse, plus "did you mean" for a mistyped option."""

    #: the arguments being parsed (shared by a parser and its subparsers)
    argv: list[str]

    def error(self, message: str) -> NoReturn:
        hint = _option_hint(self, getattr(self, "argv", []))
        super().error(f"{message}{hint}")


def _option_hint(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    """``; did you mean --max-examples?`` for each unknown option of
    ``argv``, among the options of the subcommand it names."""
    known = dict(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = next((w for w in argv if w in action.choices), None)
            if chosen is not None:
                known = dict(action.choices[chosen]._option_string_actions)
    hints = []
    for word in argv:
        if not word.startswith("--"):
            continue
        name = word.split("=", 1)[0]
        if name in known:
            continue
        close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
        if close:
            hints.append(f"{name}: did you mean {close[0]}?")
    return ("; " + "; ".join(hints)) if hints else ""


class _Version(argparse.Action):
    """``--version``, looked up only when asked (reading the installed
    package's metadata takes a fifth of a second on every start)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(_version())
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"harness (stateful-agent-harness) {version('stateful-agent-harness')}"
    except PackageNotFoundError:
        return "harness (stateful-agent-harness, not installed)"


def _adapter_opts(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--adapter-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"an option of {what}, handed to it as a keyword argument (repeatable); "
        "the reference adapter's: backend=sqlite|postgres, queue=store|redis, "
        "bug=NAME[,NAME] (harness list bugs), lease_seconds, postgres_url, redis_url",
    )


def _property_opt(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--property",
        dest="properties",
        action="append",
        default=[],
        metavar="module:attr",
        help=f"{what}: your own invariant, an @harness.invariant (or a list of them) "
        "importable from PYTHONPATH, or a module to take every one it defines (repeatable; "
        "see docs/invariants.md)",
    )


def _setting_opts(parser: argparse.ArgumentParser) -> None:
    """An option for each setting that has a flag, made from the
    :class:`~harness._settings.Option` its ``Settings`` field carries (the
    one place a setting is spelled): ``dest`` is the field's name, and a flag
    not given is None, so that ``[tool.harness]`` and ``HARNESS_*`` stand."""
    from .._settings import setting_options

    for name, option in setting_options():
        if option.flag is None:
            continue
        if option.switch is not None:
            parser.add_argument(
                option.flag,
                dest=name,
                action="store_const",
                const=option.switch,
                default=None,
                help=option.help,
            )
            continue
        # argparse's own int and float: its "invalid int value" message
        typed: dict[str, Any] = {} if option.type is None else {"type": option.type}
        parser.add_argument(
            option.flag,
            dest=name,
            choices=option.choices,
            metavar=option.metavar,
            default=None,
            help=option.help,
            **typed,
        )


def _parser() -> argparse.ArgumentParser:
    from .._settings import PROFILES

    p = _Parser(
        prog="harness",
        description="Chaos verification for stateful agent runtimes.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{EXIT_CODES}\n\n{RUN_EXAMPLES}\n\n'harness COMMAND --help' tells more.",
        # A prefix that works today would become ambiguous, or change meaning,
        # when an option is added: scripts name options whole.
        allow_abbrev=False,
    )
    p.add_argument(
        "--version", action=_Version, nargs=0, help="show the harness's version and exit"
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    r = sub.add_parser(
        "run",
        help="search for failing scenarios and write a report",
        description="Search an adapter's runtime for property violations under faults, "
        "shrink each failure to a minimal counterexample, and write a report folder.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{EXIT_CODES}\n\n{RUN_EXAMPLES}",
        allow_abbrev=False,
    )
    r.add_argument(
        "--adapter",
        required=True,
        metavar="NAME|module:attr",
        help="the runtime to test: an installed adapter by name (reference, langgraph, "
        "openai_agents, dbos, temporal, or one a package registers: harness list adapters), "
        "or your own as 'package.module:attr' importable from PYTHONPATH",
    )
    _adapter_opts(r, "the adapter")
    _property_opt(r, "judge it in every scenario beside the built-in properties")
    _setting_opts(r)
    r.add_argument(
        "--network-backend",
        dest="network_backend",
        choices=("auto", "toxiproxy", "kernel"),
        help="where the network faults run: toxiproxy (a server at HARNESS_TOXIPROXY_URL, or "
        "one the harness starts from HARNESS_TOXIPROXY_BIN or toxiproxy-server on PATH; no "
        "root), kernel (netfilter rules: root and iptables), or auto (default, "
        "HARNESS_NETWORK_BACKEND): Toxiproxy if a server can be had, else the kernel",
    )
    r.add_argument(
        "--scenario",
        dest="scenarios",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="a scenario file (a run folder's scenario.json), or a folder of them, to run "
        "first as a regression (repeatable)",
    )
    r.add_argument(
        "--exhaustive",
        metavar="WORKFLOW",
        help="instead of sampling, kill at every (crash point x hit) of one workflow",
    )
    rp = sub.add_parser(
        "replay",
        help="re-run the kept scenario of a run folder, or a scenario file against --adapter",
        description="Run the scenario a run folder kept (its minimal counterexample) again, "
        "against the adapter it recorded or the one --adapter names (say, your fix).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{EXIT_CODES}\n\nexamples:\n  harness replay reports\n"
        "  harness replay reports --adapter reference --adapter-opt backend=sqlite\n"
        "  PYTHONPATH=. harness replay reports/scenario.json --adapter my_adapter:Fixed",
        allow_abbrev=False,
    )
    rp.add_argument(
        "dir",
        type=Path,
        metavar="DIR|FILE",
        help="a run folder (--report-dir of a harness run), or a scenario file",
    )
    rp.add_argument(
        "--adapter",
        default=None,
        metavar="NAME|module:attr",
        help="the adapter to replay against (required for a scenario file; for a run folder "
        "it replaces the one recorded, options too: to replay against your fix)",
    )
    _adapter_opts(rp, "--adapter (only with --adapter: the recorded options go with it)")
    _property_opt(
        rp, "check it again on the kept scenario (the replay command a run prints names it)"
    )
    rp.add_argument(
        "--trust-adapter",
        action="store_true",
        help="import the adapter the run folder records even though it is not built in, "
        "and the invariants its run was given (a report folder may come from anyone: only "
        "for folders you trust)",
    )
    rp.add_argument(
        "--profile",
        choices=list(PROFILES),
        help="the settings to replay under (default: the run folder's)",
    )
    mg = sub.add_parser(
        "merge",
        help="merge the report folders of a search's shards (harness run --shard K/N) into "
        "one report: evidence and coverage summed, verdicts judged again, every "
        "counterexample kept",
        allow_abbrev=False,
    )
    mg.add_argument("dirs", type=Path, nargs="+", metavar="DIR", help="a shard's report folder")
    mg.add_argument(
        "--report-dir", required=True, type=Path, metavar="OUT", help="where to write the merge"
    )
    mg.add_argument(
        "--partial",
        action="store_true",
        help="merge even when shards are missing (the merged verdict is then inconclusive, "
        "naming them)",
    )
    mg.add_argument(
        "--example-db",
        dest="example_db",
        metavar="PATH|redis://...",
        default=None,
        help="keep the merged search's counterexamples in this example database (shards "
        "run with --example-db only read it), and drop what it replayed that no longer fails",
    )
    rr = sub.add_parser(
        "report",
        help="re-render report.json/html, junit.xml and summary.md of a run folder",
        allow_abbrev=False,
    )
    rr.add_argument("dir", type=Path, metavar="DIR", help="a run folder")
    ca = sub.add_parser(
        "check-adapter",
        help="run each workflow of an adapter once without faults and say what is wrong "
        "with the adapter, in plain words (exit 0: ready; 2: the cause is printed)",
        allow_abbrev=False,
    )
    ca.add_argument(
        "spec",
        metavar="ADAPTER",
        help="an installed adapter's name (harness list adapters) or 'package.module:attr' "
        "(importable from PYTHONPATH)",
    )
    _adapter_opts(ca, "the adapter")
    ca.add_argument(
        "--profile",
        choices=list(PROFILES),
        help="the settings to check under (default: dev, or ci when $CI is set)",
    )
    ca.add_argument(
        "--preload-out",
        type=Path,
        metavar="FILE",
        help="write the modules the adapter's workers imported after the fork (a JSON list) "
        "to FILE, a new file: give it to the fork server as the preload entry '@FILE' "
        "(WorkerSet(workdir, [..., '@FILE'])) and each worker imports none of them again",
    )
    ls = sub.add_parser("list", help="list what exists", allow_abbrev=False)
    ls.add_argument("what", choices=["adapters", "faults", "properties", "bugs", "services"])
    _property_opt(ls, "with 'properties': list it too")
    ls.add_argument(
        "--adapter",
        default=None,
        metavar="NAME|module:attr",
        help="with 'properties': list the invariants this adapter's properties() returns too; "
        "with 'bugs': the adapter whose seeded bugs to list (default: reference)",
    )
    _adapter_opts(ls, "--adapter")
    ls.add_argument(
        "--services",
        metavar="FILE",
        type=Path,
        help="with `services`: your service declarations (TOML or JSON) too, checked "
        "(default: $HARNESS_SERVICES_FILE when set)",
    )
    it = sub.add_parser(
        "init",
        help="write an adapter for your runtime, a pytest suite and a CI workflow "
        "(never over an existing file)",
        description="Write harness_adapter.py, tests/test_resilience.py and "
        ".github/workflows/resilience.yml into DIR for your runtime's shape: 'queue' (a "
        "job queue with leases: fill in the four marked calls into your queue), or "
        "'langgraph', 'dbos', 'temporal' (the built-in adapter on your --app).",
        epilog="examples:\n  harness init --shape queue\n"
        "  harness init --shape langgraph --app myproject.graph:APP",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    it.add_argument(
        "--shape", required=True, choices=["queue", "langgraph", "dbos", "temporal"],
        help="how your runtime is built",
    )  # fmt: skip
    it.add_argument("--app", metavar="MODULE:ATTR", help="the framework app (not for queue)")
    it.add_argument(
        "dir", nargs="?", type=Path, default=Path("."), help="the project root (default: .)"
    )
    return p


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return [
        sp
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for sp in action.choices.values()
    ]
