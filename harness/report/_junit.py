"""``junit.xml``: one test case per property, written with the standard library.

The layout is the common Jenkins/GitLab JUnit format (``testsuites`` >
``testsuite`` > ``testcase`` with ``failure``/``skipped``), which
``tests/report/junit.xsd`` describes. The class name names the adapter
variant -- ``harness.NAME[key=value,...]`` -- so that the same property
checked against several variants stays several test cases.

Every property keeps its test case (CI names a failure by it), however many
there are; the first :data:`~._shown.PROPERTIES_SHOWN` failures show their
witness and counterexample (:func:`failure_body`), the rest their message
and where ``report.json`` has the rest. The file is written as text, the
way ``ElementTree`` indents and escapes it, because building an element
per property cost as much as reading the whole report.

Runtime strings reach every text and attribute (messages, steps, the
adapter's description), and XML 1.0 forbids most control characters in
either, even escaped: each such character (and a lone surrogate) is written
as a visible ``\\xNN``/``\\uXXXX`` escape instead, so the file always parses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from ..history import History
from ._schema import OtherFailure, PropertyReport, Report
from ._shown import PROPERTIES_SHOWN, WITNESS_SHOWN, more_steps, shown_steps
from ._store import load_history
from ._timeline import describe_event

#: What XML 1.0 forbids (``Char`` production): C0 controls but tab, newline and
#: carriage return; surrogates; U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot carry replaced by a
    visible escape (``\x1b``, ``\ud800``)."""
    return _NOT_XML.sub(_escape, text)


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: what an attribute value must escape (element content: the first three)
_MARKUP = re.compile('[&<>"\r\n\t]')


def _cdata(text: str) -> str:
    """``text`` escaped as element content."""
    if _MARKUP.search(text) is None:  # the usual case, in one scan
        return text
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    return text


def _attr(text: str) -> str:
    """``text`` escaped as a double-quoted attribute value; a newline, tab
    or carriage return as a character reference, so it survives parsing."""
    if _MARKUP.search(text) is None:
        return text
    text = _cdata(text)
    if '"' in text:
        text = text.replace('"', "&quot;")
    if "\r" in text:
        text = text.replace("\r", "&#13;")
    if "\n" in text:
        text = text.replace("\n", "&#10;")
    if "\t" in text:
        text = text.replace("\t", "&#09;")
    return text


#: joins the texts :func:`_each` escapes in one pass: no text of the
#: harness's own holds it, and one that does is escaped on its own
_JOIN = "\x00\x1e\x00"


def _each(texts: list[str], escape: Callable[[str], str]) -> list[str]:
    """``escape`` of each of ``texts``, in one pass over them all (a call
    per text cost more than the rest of writing a test case)."""
    parts = escape(_JOIN.join(texts)).split(_JOIN)
    return parts if len(parts) == len(texts) else [escape(t) for t in texts]


def _start(tag: str, attrs: Mapping[str, str]) -> str:
    return f"<{tag}" + "".join(f' {k}="{_attr(v)}"' for k, v in attrs.items())


def _leaf(tag: str, attrs: Mapping[str, str], text: str | None = None) -> str:
    """One element without children (text, if any, escaped)."""
    if not text:
        return _start(tag, attrs) + " />"
    return f"{_start(tag, attrs)}>{_cdata(text)}</{tag}>"


def classname(report: Report) -> str:
    """The JUnit class name of ``report``'s adapter variant."""
    opts = ",".join(f"{k}={_text(v)}" for k, v in sorted(report.adapter.description.items()))
    return f"harness.{report.adapter.name}" + (f"[{opts}]" if opts else "")


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_junit(report: Report, folder: Path) -> str:
    """The JUnit XML text of ``report`` (run kept in ``folder``)."""
    histories: dict[str, History | None] = {}
    shown: dict[str, str] = {}
    others = other_failures_by_folder(report)

    def history_of(p: PropertyReport) -> History | None:
        where = p.counterexample or "."
        if where not in histories:
            name = "history.jsonl"
            if where == "." and report.counterexample is not None:
                name = report.counterexample.history
            histories[where] = load_history(folder / where / name, folder)
        return histories[where]

    failures = 0
    skipped = 0
    for p in report.properties:
        if p.verdict == "fail":
            failures += 1
        elif p.verdict in ("unknown", "not_tested"):
            skipped += 1
    per_case = report.duration_seconds / max(len(report.properties), 1)
    cls = classname(report)
    counts = {
        "tests": str(len(report.properties)),
        "failures": str(failures),
        "errors": "0",
        "skipped": str(skipped),
        "time": f"{report.duration_seconds:.3f}",
    }
    # indented as ElementTree.indent does: two spaces a level
    out = [
        "<?xml version='1.0' encoding='utf-8'?>",
        _start("testsuites", {"name": "stateful-agent-harness", **counts}) + ">",
        "  " + _start("testsuite", {"name": cls, **counts}) + ">",
        "    <properties>",
    ]
    for name, value in (
        ("adapter", report.adapter.spec),
        ("profile", report.profile),
        ("seed", _text(report.seed)),
        ("scenarios", str(report.scenarios)),
        ("schema_version", str(report.schema_version)),
    ):
        out.append("      " + _leaf("property", {"name": name, "value": value}))
    out.append("    </properties>")
    # one line of text per test case, no element objects, the runtime's
    # strings escaped all at once: a report may hold hundreds of thousands
    properties = report.properties
    names = _each([p.name for p in properties], _attr)
    failed = [p for p in properties if p.verdict == "fail"]
    messages = _each([p.message for p in failed], _attr)
    briefly = _each([short_failure_body(p) for p in failed[PROPERTIES_SHOWN:]], _cdata)
    rest = f'" classname="{_attr(cls)}" time="{per_case:.3f}"'
    f = 0  # failures written
    for i, p in enumerate(properties):
        if p.verdict == "fail":
            if f < PROPERTIES_SHOWN:
                body = _cdata(failure_body(report, p, history_of(p), shown, others))
            else:
                body = briefly[f - PROPERTIES_SHOWN]
            out.append(
                f'    <testcase name="{names[i]}{rest}>\n      <failure message="'
                f'{messages[f]}" type="PropertyFailed">{body}</failure>\n    </testcase>'
            )
            f += 1
            continue
        if p.verdict == "pass":
            out.append(f'    <testcase name="{names[i]}{rest} />')
            continue
        case = {"name": p.name, "classname": cls, "time": f"{per_case:.3f}"}
        children = []
        if p.verdict == "unknown":
            reason = p.reason or p.message
            children.append(_leaf("skipped", {"message": f"could not be judged: {reason}"}))
            if p.traceback:  # a user's invariant raised: where, in its own code
                children.append(_leaf("system-err", {}, p.traceback))
        elif p.verdict == "not_tested":
            reason = p.reason or p.message
            children.append(_leaf("skipped", {"message": f"not tested: {reason}"}))
        if children:
            inner = "".join(f"\n      {c}" for c in children)
            out.append(f"    {_start('testcase', case)}>{inner}\n    </testcase>")
        else:
            out.append("    " + _leaf("testcase", case))
    lines = []
    if report.inconclusive:
        lines += ["inconclusive:", *(f"  {r}" for r in report.inconclusive)]
    if report.not_tested:
        lines += ["not tested:", *(f"  {g.capability}: {g.what}" for g in report.not_tested)]
    if lines:
        out.append("    " + _leaf("system-out", {}, "\n".join(lines)))
    out += ["  </testsuite>", "</testsuites>"]
    # every string went in escaped; what XML cannot carry at all goes in one pass
    return xml_text("\n".join(out)) + "\n"


def short_failure_body(prop: PropertyReport) -> str:
    """A failure's body past the first :data:`~._shown.PROPERTIES_SHOWN`:
    its message and where the rest of its evidence is."""
    where = prop.counterexample or "."
    return (
        f"{prop.name}: {prop.message}\n"
        f"its witness ({len(prop.witness)} events) and minimal counterexample ({where}) are in "
        f"report.json: junit.xml shows the first {PROPERTIES_SHOWN} failures in full"
    )


def failure_body(
    report: Report,
    prop: PropertyReport,
    history: History | None,
    shown: dict[str, str] | None = None,
    others: Mapping[str, OtherFailure] | None = None,
) -> str:
    """What a failed property's test case shows: the message, the witness
    events, the minimal counterexample, and (last) the replay command.

    ``shown`` (one JUnit file's failures): the counterexample folders
    already shown in full, by the property shown with each; a later
    property served by the same one names it instead of repeating its
    steps, so the file grows with the report, not with its square.
    ``others``: :func:`other_failures_by_folder` of ``report``, built once."""
    lines = [f"{prop.name}: {prop.message}"]
    if prop.witness:
        lines.append("witness (events of the counterexample's history.jsonl):")
        for i in prop.witness[:WITNESS_SHOWN]:
            event = history.event(i) if history is not None else None
            lines.append(f"  {describe_event(event)}" if event is not None else f"  #{i}")
        if len(prop.witness) > WITNESS_SHOWN:
            lines.append(f"  ... and {len(prop.witness) - WITNESS_SHOWN} more (see report.json)")
    steps, replay, where = own_counterexample(report, prop, others)
    if steps is not None:
        head = "minimal counterexample" if where == "." else f"minimal counterexample ({where})"
        first = None if shown is None else shown.setdefault(where, prop.name)
        if first is not None and first != prop.name:
            lines.append(f"{head}: the one shown with {first} ({len(steps)} steps)")
            return "\n".join(lines)
        lines.append(f"{head}:")
        listed, left_out = shown_steps(steps)
        lines += [f"  {i}. {s}" for i, s in enumerate(listed, 1)]
        if left_out:
            lines.append(f"  {more_steps(left_out)}")
        if replay:
            lines.append(f"replay: {replay}")
    return "\n".join(lines)


def own_counterexample(
    report: Report, prop: PropertyReport, others: Mapping[str, OtherFailure] | None = None
) -> tuple[list[str] | None, str | None, str]:
    """The steps, replay command and folder of ``prop``'s *own* minimal
    counterexample: the primary one (``"."``) or the ``failures/N`` it names.

    A property whose counterexample lives in ``failures/N`` must never be
    shown with the primary one: its witness indexes that folder's history,
    and the primary's replay would not reproduce it."""
    where = prop.counterexample or "."
    if where != ".":
        other = (others if others is not None else other_failures_by_folder(report)).get(where)
        if other is not None:
            return other.steps, other.replay, where
        return None, None, where
    ce = report.counterexample
    if ce is None:
        return None, None, where
    return ce.steps, ce.replay, where


def other_failures_by_folder(report: Report) -> dict[str, OtherFailure]:
    """The report's other failures by folder (the first of each)."""
    index: dict[str, OtherFailure] = {}
    for other in report.other_failures:
        if other.folder is not None:
            index.setdefault(other.folder, other)
    return index
