"""``junit.xml``: one test case per property, written with the standard library.

The layout is the common Jenkins/GitLab JUnit format (``testsuites`` >
``testsuite`` > ``testcase`` with ``failure``/``skipped``), which
``tests/report/junit.xsd`` describes. The class name names the adapter
variant -- ``harness.NAME[key=value,...]`` -- so that the same property
checked against several variants stays several test cases.

Runtime strings reach every text and attribute (messages, steps, the
adapter's description), and XML 1.0 forbids most control characters in
either, even escaped: each such character (and a lone surrogate) is written
as a visible ``\\xNN``/``\\uXXXX`` escape instead, so the file always parses.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

from ..history import History
from ._schema import OtherFailure, PropertyReport, Report
from ._shown import WITNESS_SHOWN, more_steps, shown_steps
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


def _sanitize(root: ET.Element) -> None:
    for el in root.iter():
        if el.text:
            el.text = xml_text(el.text)
        if el.tail:
            el.tail = xml_text(el.tail)
        el.attrib = {xml_text(k): xml_text(v) for k, v in el.attrib.items()}


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

    failures = len(report.failed)
    skipped = sum(1 for p in report.properties if p.verdict in ("unknown", "not_tested"))
    per_case = report.duration_seconds / max(len(report.properties), 1)
    cls = classname(report)
    counts = {
        "tests": str(len(report.properties)),
        "failures": str(failures),
        "errors": "0",
        "skipped": str(skipped),
        "time": f"{report.duration_seconds:.3f}",
    }
    root = ET.Element("testsuites", {"name": "stateful-agent-harness", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": cls, **counts})
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("adapter", report.adapter.spec),
        ("profile", report.profile),
        ("seed", _text(report.seed)),
        ("scenarios", str(report.scenarios)),
        ("schema_version", str(report.schema_version)),
    ):
        ET.SubElement(props, "property", {"name": name, "value": value})
    for p in report.properties:
        case = ET.SubElement(
            suite, "testcase", {"name": p.name, "classname": cls, "time": f"{per_case:.3f}"}
        )
        if p.verdict == "fail":
            failure = ET.SubElement(
                case, "failure", {"message": p.message, "type": "PropertyFailed"}
            )
            failure.text = failure_body(report, p, history_of(p), shown, others)
        elif p.verdict == "unknown":
            reason = p.reason or p.message
            ET.SubElement(case, "skipped", {"message": f"could not be judged: {reason}"})
            if p.traceback:  # a user's invariant raised: where, in its own code
                ET.SubElement(case, "system-err").text = p.traceback
        elif p.verdict == "not_tested":
            ET.SubElement(case, "skipped", {"message": f"not tested: {p.reason or p.message}"})
    lines = []
    if report.inconclusive:
        lines += ["inconclusive:", *(f"  {r}" for r in report.inconclusive)]
    if report.not_tested:
        lines += ["not tested:", *(f"  {g.capability}: {g.what}" for g in report.not_tested)]
    if lines:
        out = ET.SubElement(suite, "system-out")
        out.text = "\n".join(lines)
    _sanitize(root)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


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
