"""``summary.md``: a short Markdown summary, fit for ``$GITHUB_STEP_SUMMARY``.

The summary is appended to a page GitHub renders as Markdown *with* inline
HTML, and most of what it shows comes from the runtime (messages, steps, the
adapter's description). Every such string goes through :func:`md_text`:
markup is escaped (``<`` becomes ``&lt;``, ``|`` and backticks are
backslash-escaped, so a table keeps its columns and no code span opens),
newlines become spaces, and control characters and lone surrogates become
visible ``\\xNN``/``\\uXXXX`` escapes.
"""

from __future__ import annotations

import re

from ..outcome._verdicts import never_fired
from ..vocabulary import KIND_FAMILY
from ._schema import Report
from ._shown import (
    COUNTEREXAMPLES_SHOWN,
    NAMES_SHOWN,
    more_counterexamples,
    more_names,
    more_properties,
    more_steps,
    shown_names,
    shown_properties,
    shown_steps,
)
from ._start import StartHere, start_here

_ICON = {"pass": "✅", "fail": "❌", "unknown": "❔", "not_tested": "⚪"}

#: Control characters (C0 but tab, DEL, C1), lone surrogates, and the two
#: non-characters: none is text a reader should get raw.
_CONTROL = re.compile("[\\x00-\\x08\\x0a-\\x1f\\x7f-\\x9f\\ud800-\\udfff\\ufffe\\uffff]")
#: Markdown syntax inside a line: code, emphasis, links, table cells, strike,
#: math (``$``, which GitHub renders; escaped, it also cannot substitute a
#: command should the file ever reach a shell); an underscore only where it
#: could emphasize (not inside a word like exactly_once), a hash only where
#: it could start a heading.
_MARKDOWN = re.compile(r"[\\`*\[\]|~$]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|^#")
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
#: What may appear between backticks as it is (names, profiles, seeds, paths).
_PLAIN = re.compile(r"[\w.:/=,+@%-]+")


def _visible(m: re.Match[str]) -> str:
    char = m.group()
    if char in "\n\r":
        return " "
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def md_text(value: object) -> str:
    """``value`` as inline Markdown text that renders as exactly that text."""
    text = _CONTROL.sub(_visible, str(value))
    text = _MARKDOWN.sub(lambda m: "\\" + m.group(), text)
    return text.translate(_HTML)


def _code(value: object) -> str:
    """``value`` in a code span when it is a plain name, else as escaped text."""
    text = str(value)
    return f"`{text}`" if _PLAIN.fullmatch(text) else md_text(text)


def _block(text: str) -> list[str]:
    """A fenced shell block of ``text``: the fence is longer than any run of
    backticks in it, and control characters are made visible."""
    text = _CONTROL.sub(_visible, text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}sh", text, fence]


def _part(report: Report) -> str:
    """Which part of a search spread over machines the report covers."""
    if report.shard is not None:
        whole = f" of a {report.shard.plan}-scenario plan" if report.shard.plan is not None else ""
        return f"Shard {report.shard.k} of {report.shard.n}{whole} (merge with `harness merge`)."
    assert report.merged is not None
    m = report.merged
    text = f"Merged from shards {', '.join(f'{k}/{m.n}' for k in m.shards)}"
    missing = f"; missing {', '.join(f'{k}/{m.n}' for k in m.missing)}" if m.missing else ""
    return text + missing + "."


def _names(names: list[str]) -> str:
    """Up to :data:`~._shown.NAMES_SHOWN` names, escaped, and how many more."""
    listed, left_out = shown_names(names)
    return ", ".join([*(md_text(n) for n in listed), *([more_names(left_out)] if left_out else [])])


def _start_here(start: StartHere | None) -> list[str]:
    """The failing report's first block: what failed, the shortest
    counterexample and its replay, each failure by property with its hint."""
    if start is None:
        return []
    g = start.first
    named = g.also[:NAMES_SHOWN]
    also = ", ".join(_code(p.name) for p in named)
    if g.also_count > len(named):
        also += f", {more_names(g.also_count - len(named))}"
    # GitHub's Markdown: a trailing backslash breaks the line, and a list may
    # follow a paragraph without a blank line (a step summary stays short)
    head = (
        f"**Start here:** {_code(g.first.name)} failed"
        + (f"; in the same scenario, probably as consequences, so did {also}" if also else "")
        + f". {md_text(g.first.message)}"
    )
    lines = [head + ("\\" if g.first.hint else "")]
    if g.first.hint:
        lines.append(f"*What it usually means:* {md_text(g.first.hint)}")
    n = len(g.steps)
    where = f", kept in {_code(g.folder)}" if g.folder != "." else ""
    shrunk = "" if g.fully_shrunk else " (not fully shrunk)"
    lines += ["", f"The shortest counterexample, {n} step{'' if n == 1 else 's'}{shrunk}{where}:"]
    lines += _step_lines(g.steps)
    if g.replay:
        lines += ["", *_block(g.replay)]
    lines += ["", "**Every failure, by property:**"]
    for i, grp in enumerate(start.groups):
        where = f", in {_code(grp.folder)}" if grp.folder != "." else ""
        replay = f": {_code(grp.replay)}" if grp.replay and i > 0 else ""
        for j, p in enumerate(grp.properties):
            hint = f" -- {md_text(p.hint)}" if p.hint else ""
            if j == 0:
                lines.append(f"- {_code(p.name)}{hint} ({len(grp.steps)} steps{where}{replay})")
            else:
                lines.append(f"  - {_code(p.name)}, same scenario{hint}")
    if start.left_out:
        lines += ["", md_text(more_properties(start.left_out, "failed"))]
    return [*lines, ""]


def render_markdown(report: Report) -> str:
    """A few lines: verdict, the properties, the counterexample and its replay
    command, the faults that fired, what was not tested."""
    a = report.adapter
    opts = ", ".join(f"{md_text(k)}={md_text(v)}" for k, v in sorted(a.description.items()))
    title = "INCONCLUSIVE" if report.verdict == "unknown" else report.verdict.upper()
    start = start_here(report)
    lines = [
        f"### {_ICON[report.verdict]} harness: {title} -- {md_text(a.name)}"
        f"{f' ({opts})' if opts else ''}",
        "",
        *_start_here(start),
        f"{report.scenarios} scenarios in {report.duration_seconds:.1f} s, profile "
        f"{_code(report.profile)}, seed {_code(report.seed)}; {report.absorbed_duplicates} "
        "attempted duplicate effects absorbed by idempotency.",
        "",
        *(
            [
                f"R{(report.plan_line() or '')[1:]}.",
                "",
            ]
            if report.planned_scenarios is not None
            else []
        ),
        *([_part(report), ""] if report.shard is not None or report.merged is not None else []),
        *(
            ["**Inconclusive:**", *(f"- {md_text(r)}" for r in report.inconclusive), ""]
            if report.inconclusive
            else []
        ),
        "| property | verdict | |",
        "|---|---|---|",
    ]
    listed, left_out = shown_properties(report.properties)
    for p in listed:
        message = p.message
        if len(message) > 160:  # cut the raw text: a cut escape would break the row
            message = message[:157] + "..."
        name = _code(p.name) + (" (your invariant)" if p.user else "")
        lines.append(f"| {name} | {_ICON[p.verdict]} {p.verdict} | {md_text(message)} |")
    if left_out:  # after a blank line: a line right below a table is one of its rows
        lines += ["", md_text(more_properties(left_out))]
    for p in listed:
        if p.traceback:  # a user's invariant raised: its traceback, below the table
            lines += ["", f"**{_code(p.name)} raised** (a bug in the invariant):", ""]
            lines += _block(p.traceback)
    ce = report.counterexample
    # the start-here block shows its shortest counterexample in full already
    shown = start.first.folder if start is not None else None
    if ce is not None and shown != ".":
        serves = _names(ce.counterexample_for or ce.failed_properties)
        lines += ["", f"**Minimal counterexample** ({serves}):", ""]
        lines += _step_lines(ce.steps)
        lines += ["", *_block(ce.replay)]
    others = report.other_failures
    for n, other in enumerate(others[:COUNTEREXAMPLES_SHOWN], 1):
        if shown is not None and shown == (other.folder or f"failures/{n}"):
            continue
        serves = _names(other.counterexample_for or other.failed_properties)
        lines += [
            "",
            f"**Minimal counterexample** ({serves}), kept in {_code(other.folder)}:",
            "",
        ]
        lines += _step_lines(other.steps)
        if other.replay:
            lines += ["", *_block(other.replay)]
    if len(others) > COUNTEREXAMPLES_SHOWN:
        lines += ["", md_text(more_counterexamples(len(others) - COUNTEREXAMPLES_SHOWN))]
    fired = [f"{md_text(k)} {c.fired}" for k, c in sorted(report.faults.items()) if c.fired]
    lines += ["", "Faults fired: " + (", ".join(fired) or "none") + "."]
    excused = report.excused_line()
    if excused is not None:
        lines.append(md_text(excused[0].upper() + excused[1:]) + ".")
    model = report.model_line()
    if model is not None:
        lines.append(md_text(model[0].upper() + model[1:]) + ".")
    pairs = report.commit_fault_summary()
    if pairs is not None:
        lines.append(md_text(pairs[0].upper() + pairs[1:]) + " (report.html shows which).")
    unfired = [
        f"{md_text(k)} ({md_text(never_fired([k], c.armed, {k: c.unfired}))})"
        for k, c in sorted(report.faults.items())
        if c.armed and not c.fired
    ]
    if unfired:
        # A kind whose family fired otherwise leaves no family untried: the
        # run is not inconclusive for it (exit 3 is for a family never fired).
        fired_families = {KIND_FAMILY.get(k, k) for k, c in report.faults.items() if c.fired}
        spared = all(
            KIND_FAMILY.get(k, k) in fired_families
            for k, c in report.faults.items()
            if c.armed and not c.fired
        )
        said = " (each of a family that fired otherwise: not inconclusive)" if spared else ""
        lines.append(f"Armed but never fired{said}: {', '.join(unfired)}.")
    # never armed there, with why: the runtime left the fault nothing to aim
    # at (said even where the kind was armed or fired elsewhere)
    moot = [
        f"{md_text(k)} ({md_text('; '.join(c.not_tested()))})"
        for k, c in sorted(report.faults.items())
        if c.not_tested()
    ]
    if moot:
        lines.append(f"Not tested: {', '.join(moot)}.")
    if report.crash_points:
        hit = sum(1 for c in report.crash_points.values() if c.fired)
        lines.append(f"Crash points fired: {hit} of {len(report.crash_points)}.")
    if report.not_tested:
        lines.append("Not tested: " + "; ".join(md_text(g.what) for g in report.not_tested) + ".")
    return "\n".join(lines) + "\n"


def _step_lines(steps: list[str]) -> list[str]:
    """A numbered list of the steps a rendering shows, and a line for the rest."""
    shown, left_out = shown_steps(steps)
    lines = [f"{i}. {md_text(s)}" for i, s in enumerate(shown, 1)]
    return lines + ([md_text(more_steps(left_out))] if left_out else [])
