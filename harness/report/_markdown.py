"""``summary.md``: a short Markdown summary, fit for ``$GITHUB_STEP_SUMMARY``."""

from __future__ import annotations

from ._schema import Report

_ICON = {"pass": "✅", "fail": "❌", "unknown": "❔", "not_tested": "⚪"}


def render_markdown(report: Report) -> str:
    """A few lines: verdict, the properties, the counterexample and its replay
    command, the faults that fired, what was not tested."""
    a = report.adapter
    opts = ", ".join(f"{k}={v}" for k, v in sorted(a.description.items()))
    title = "INCONCLUSIVE" if report.verdict == "unknown" else report.verdict.upper()
    lines = [
        f"### {_ICON[report.verdict]} harness: {title} -- {a.name}{f' ({opts})' if opts else ''}",
        "",
        f"{report.scenarios} scenarios in {report.duration_seconds:.1f} s, profile "
        f"`{report.profile}`, seed `{report.seed}`; {report.absorbed_duplicates} attempted "
        "duplicate effects absorbed by idempotency.",
        "",
        *(
            [
                f"Ran {report.searched_scenarios} of {report.planned_scenarios} planned scenarios.",
                "",
            ]
            if report.planned_scenarios is not None
            else []
        ),
        *(
            ["**Inconclusive:**", *(f"- {r}" for r in report.inconclusive), ""]
            if report.inconclusive
            else []
        ),
        "| property | verdict | |",
        "|---|---|---|",
    ]
    for p in report.properties:
        message = p.message.replace("|", "\\|").replace("\n", " ")
        if len(message) > 160:
            message = message[:157] + "..."
        lines.append(f"| `{p.name}` | {_ICON[p.verdict]} {p.verdict} | {message} |")
    ce = report.counterexample
    if ce is not None:
        serves = ", ".join(ce.counterexample_for or ce.failed_properties)
        lines += ["", f"**Minimal counterexample** ({serves}):", ""]
        lines += [f"{i}. {s}" for i, s in enumerate(ce.steps, 1)]
        lines += ["", "```sh", ce.replay, "```"]
    for other in report.other_failures:
        serves = ", ".join(other.counterexample_for or other.failed_properties)
        lines += ["", f"**Minimal counterexample** ({serves}), kept in `{other.folder}`:", ""]
        lines += [f"{i}. {s}" for i, s in enumerate(other.steps, 1)]
        if other.replay:
            lines += ["", "```sh", other.replay, "```"]
    fired = [f"{k} {c.fired}" for k, c in sorted(report.faults.items()) if c.fired]
    lines += ["", "Faults fired: " + (", ".join(fired) or "none") + "."]
    unfired = [k for k, c in sorted(report.faults.items()) if c.armed and not c.fired]
    if unfired:
        lines.append(f"Armed but never fired: {', '.join(unfired)}.")
    if report.crash_points:
        hit = sum(1 for c in report.crash_points.values() if c.fired)
        lines.append(f"Crash points fired: {hit} of {len(report.crash_points)}.")
    if report.not_tested:
        lines.append("Not tested: " + "; ".join(g.what for g in report.not_tested) + ".")
    return "\n".join(lines) + "\n"
