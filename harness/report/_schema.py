"""``report.json``: the published contract of a run's report.

Scripts and CI jobs read this file; the HTML, JUnit and Markdown renderings
are built from it (plus the kept histories) and nothing else. The JSON Schema
generated from :class:`Report` ships beside this module as
``report.schema.json`` (a test keeps the two equal).

Compatibility rule: a change that only *adds* an optional field keeps
``schema_version``; renaming, removing or retyping a field bumps it. A reader
refuses a report whose ``schema_version`` is newer than
:data:`REPORT_SCHEMA_VERSION` (it cannot know what the new fields mean).

Version history: 1 -- verdict, seed, adapter, profile, properties, faults,
counterexample, other failures, not tested; 2 -- adds per crash point
coverage (``crash_points``), runs survived per fault (``scenarios``,
``survived``, ``failed_after``), the counterexample's history file, the
folder of each other failure and the slowest example; 3 -- verdicts over
the whole search: ``not_tested`` beside ``pass``/``fail``/``unknown`` per
property (with ``reason``, ``exercised``, ``scenarios``, the property's own
``counterexample`` folder), the run's ``unknown`` verdict means
inconclusive (``inconclusive`` says why), the plan (``planned_scenarios``,
``searched_scenarios``), and which properties each counterexample serves
(``counterexample_for``); later in 3, ``interrupted`` (optional), then
``shard`` (a run of ``--shard K/N``), ``merged`` (a report ``harness merge``
joined from shards) and each property's ``failed`` and ``unknown`` counts,
then what fits the budget (``fit_scenarios``, ``scenario_seconds``,
``scenario_cost``) and whether each counterexample was fully shrunk
(``fully_shrunk``), then the (commit kind x fault) pairs of the plan
(``commit_faults``), the runs excused by evidence (``excused``) and the
world's model calls with their tokens (``model_usage``), then the names of
the targeted schedules the budget left unrun (``not_run_schedules``) (all
optional).
Older reports still load (the new fields default).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr

from ._canonical import canonical_json

#: Version of the report format this code writes (and the newest it reads).
REPORT_SCHEMA_VERSION = 3

VerdictName = Literal["pass", "fail", "unknown", "not_tested"]
RunVerdictName = Literal["pass", "fail", "unknown"]


def _inside(path: str) -> str:
    """A path a report names must stay inside the report's folder: a
    crafted report.json must not make ``harness report`` read ``/etc/passwd``."""
    p = PurePosixPath(path)
    if not path or "\x00" in path or "\\" in path or p.is_absolute() or ".." in p.parts:
        raise ValueError(f"{path!r} is not a path inside the report folder")
    return path


#: a path relative to the report folder, that stays inside it
InsidePath = Annotated[str, AfterValidator(_inside)]


class _Frozen(BaseModel):
    # A written report always has every field: the schema says so.
    # Every number is finite: NaN and Infinity are not JSON (RFC 8259).
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_serialization_defaults_required=True,
        allow_inf_nan=False,
    )


class AdapterInfo(_Frozen):
    """The adapter variant the run tested."""

    spec: str = Field(description="how it was named: 'reference' or 'module:attr'")
    options: dict[str, str] = Field(description="the --adapter-opt values, as given")
    name: str = Field(description="the adapter's own name")
    description: dict[str, Any] = Field(
        description="the adapter's full configuration (options with their defaults)"
    )
    capabilities: list[str] = Field(description="optional capabilities it declares, sorted")


class PropertyReport(_Frozen):
    """One property's verdict over the whole run, with its evidence.

    ``pass``: at least one scenario exercised it and none failed;
    ``fail``: a scenario failed it (``counterexample`` names its folder);
    ``not_tested``: nothing in this run could exercise it (``reason``);
    ``unknown``: it should have been judged and could not be (``reason``).
    """

    name: str
    verdict: VerdictName
    message: str = Field(description="the checker's explanation, over the whole search")
    witness: list[int] = Field(
        description="indexes of the history events that prove the verdict; for a failed "
        "property they index its counterexample's history.jsonl"
    )
    counts: dict[str, int] = Field(description="what the checker counted, summed over scenarios")
    reason: str | None = Field(None, description="why it is not_tested or unknown")
    exercised: int = Field(0, description="scenarios that gave it something to judge")
    scenarios: int = Field(0, description="scenarios in which it was checked")
    failed: int = Field(0, description="scenarios in which it failed")
    unknown: int = Field(0, description="scenarios in which it could not be judged")
    counterexample: InsidePath | None = Field(
        None,
        description="for a failed property: the folder of its counterexample, relative to "
        "the report ('.' for the main one, else 'failures/N')",
    )
    source: Literal["builtin", "run", "adapter", "installed"] = Field(
        "builtin",
        description="where the property comes from: built in, or a user's invariant given to "
        "the run (harness.run(properties=...), --property), returned by the adapter's "
        "properties(), or installed (the harness.properties entry-point group)",
    )
    spec: str | None = Field(
        None, description="for a user's invariant: the 'package.module:attr' it is imported by"
    )
    doc: str | None = Field(None, description="for a user's invariant: what it promises")
    needs: list[str] = Field(
        default_factory=list,
        description="for a user's invariant: the capabilities it needs (without them it is "
        "not_tested)",
    )
    family: str | None = Field(
        None, description="for a user's invariant: the fault family that exercises it"
    )
    traceback: str | None = Field(
        None,
        description="for a user's invariant that raised (verdict unknown): the traceback of "
        "its most common exception",
    )

    @property
    def user(self) -> bool:
        """Whether this is a user's invariant (not a built-in property)."""
        return self.source != "builtin"


class FaultCoverage(_Frozen):
    """How one fault kind (or one crash point) was exercised."""

    armed: int = Field(description="times it was armed, over every scenario")
    fired: int = Field(description="times it actually fired")
    scenarios: int = Field(0, description="scenarios in which it fired at least once")
    survived: int = Field(0, description="of those, scenarios in which every property held")
    failed_after: int = Field(0, description="of those, scenarios in which a property failed")
    unfired: dict[str, int] = Field(
        default_factory=dict,
        description="why it did not fire when armed, as the history recorded it, with how often",
    )
    untested: dict[str, int] = Field(
        default_factory=dict,
        description="why it was not tested where the runtime left it nothing to aim at (never "
        "armed there: a barrier race the runtime serialized before the site), with how often",
    )

    def not_tested(self) -> dict[str, int]:
        """Why it was not tested where it was never armed, with how often
        (a report written before ``untested`` kept these in ``unfired``,
        under a kind armed 0 times)."""
        if self.untested:
            return dict(self.untested)
        return {} if self.armed or self.fired else dict(self.unfired)


class CommitFaultPair(_Frozen):
    """One (commit kind x fault) pair of the targeted plan, and whether a
    schedule aimed it."""

    kind: str = Field(
        description="the commit: decision, intent, sent_mark, result, checkpoint, inbox_ack, last"
    )
    fault: str = Field(
        description="kill_inside, operator_write, delivery_while_held, storage_cut, reset, ack_lost"
    )
    status: Literal["covered", "budget", "shard", "not_offered", "not_planned"] = Field(
        description="covered: its schedule ran; budget: the budget cut it; shard: another "
        "shard's or job's part; not_offered: no schedule can aim it (why); not_planned: its "
        "schedule is past the plan's targeted share"
    )
    schedule: str | None = Field(None, description="the targeted schedule that aims it")
    why: str | None = Field(None, description="why none does: 'capability: ...' or 'trace: ...'")


class NotTested(_Frozen):
    """An optional capability the adapter lacks, and what that leaves untested."""

    capability: str
    what: str


class Counterexample(_Frozen):
    """The smallest failing scenario the search found."""

    steps: list[str] = Field(description="the scenario's steps, as readable lines")
    failed_properties: list[str]
    counterexample_for: list[str] = Field(
        default_factory=list, description="the properties whose minimal counterexample this is"
    )
    replay: str = Field(description="the shell command that replays it")
    history: InsidePath = Field("history.jsonl", description="its history, relative to the report")
    fully_shrunk: bool = Field(
        True,
        description="false: shrinking stopped at its budget (--shrink-budget) before it "
        "finished: a smaller failing scenario may exist",
    )
    dropped_steps: int = Field(
        0,
        ge=0,
        description="steps the last pass of shrinking deleted from the scenario Hypothesis "
        "shrank, one at a time, each kept only when the shorter scenario failed the same "
        "property (0: none could go)",
    )


class OtherFailure(_Frozen):
    """The smallest failing scenario for another set of failed properties."""

    failed_properties: list[str]
    counterexample_for: list[str] = Field(
        default_factory=list, description="the properties whose minimal counterexample this is"
    )
    steps: list[str]
    replay: str | None = Field(None, description="the shell command that replays it")
    folder: InsidePath | None = Field(None, description="where it is kept, relative to the report")
    fully_shrunk: bool = Field(
        True,
        description="false: shrinking stopped at its budget (--shrink-budget) before it "
        "finished: a smaller failing scenario may exist",
    )
    dropped_steps: int = Field(
        0,
        ge=0,
        description="steps the last pass of shrinking deleted from the scenario Hypothesis "
        "shrank, one at a time, each kept only when the shorter scenario failed the same "
        "property (0: none could go)",
    )


class ShardInfo(_Frozen):
    """Which part of a search a ``--shard K/N`` run ran."""

    k: int = Field(ge=1, description="this shard's number, from 1")
    n: int = Field(ge=1, description="how many shards the search was split into")
    plan: int | None = Field(
        None, ge=0, description="scenarios the whole search planned, over all N shards"
    )


class MergeInfo(_Frozen):
    """What ``harness merge`` joined into this report."""

    n: int = Field(ge=1, description="how many shards the search was split into")
    shards: list[int] = Field(description="the shards merged (their K), in order")
    missing: list[int] = Field(
        default_factory=list, description="shards not merged (--partial): the verdict is unknown"
    )
    folders: dict[str, InsidePath] = Field(
        default_factory=dict,
        description="by shard K: where the shard's kept counterexamples were copied, relative "
        "to the report",
    )


class Report(_Frozen):
    """Everything one ``harness run`` found, as written to ``report.json``."""

    #: the run folder this report was written to or loaded from (not serialized)
    _folder: Path | None = PrivateAttr(default=None)

    schema_version: int = Field(REPORT_SCHEMA_VERSION, description="version of this format")
    verdict: RunVerdictName = Field(
        description="fail: a property failed; unknown: inconclusive (see inconclusive); "
        "pass: every property the adapter's capabilities allow was exercised and held"
    )
    inconclusive: list[str] = Field(
        default_factory=list, description="why the run is inconclusive (empty: it is not)"
    )
    interrupted: str | None = Field(
        None,
        description="the signal (SIGINT, SIGTERM) that stopped the run before its plan ended; "
        "null: it was not interrupted",
    )
    seed: int | None = Field(description="repeat the search with --seed SEED")
    profile: str
    adapter: AdapterInfo
    duration_seconds: float
    slowest_seconds: float = Field(0.0, description="wall seconds of the slowest scenario")
    scenarios: int = Field(description="scenarios executed (including shrinking)")
    planned_scenarios: int | None = Field(
        None, description="scenarios the search planned (targeted and sampled)"
    )
    searched_scenarios: int | None = Field(
        None, description="of those, how many ran before the search ended"
    )
    fit_scenarios: int | None = Field(
        None,
        description="of the planned scenarios, how many were expected to fit in the budget, "
        "said before the search from scenario_seconds; null: not known",
    )
    not_run: str | None = Field(
        None,
        description="what the budget left unrun of the plan, in words (targeted schedules, "
        "sampled scenarios, the kinds of schedule none of which ran, the --budget that would "
        "run it all); null: the plan ran to its end. A cut that left a kind of schedule "
        "unrun, or no sampled scenario, makes the run inconclusive; one that did not "
        "leaves the verdict to the scenarios that ran",
    )
    not_run_schedules: list[str] = Field(
        default_factory=list,
        description="the targeted schedules of the plan the budget left unrun, by name, in "
        "plan order (the count is in not_run; empty: every one ran, or none was planned)",
    )
    scenario_seconds: float | None = Field(
        None,
        description="the real time one scenario was expected to take, about; null: not known",
    )
    scenario_cost: Literal["declared", "measured"] | None = Field(
        None,
        description="how scenario_seconds is known: declared by the adapter "
        "(Adapter.scenario_seconds) or measured from the fault-free runs",
    )
    properties: list[PropertyReport]
    other_failures: list[OtherFailure]
    faults: dict[str, FaultCoverage] = Field(description="by fault kind")
    families: list[str] = Field(
        default_factory=list,
        description="the fault families this run had switched on (profile and capabilities)",
    )
    crash_points: dict[str, FaultCoverage] = Field(
        default_factory=dict,
        description="by crash point site; every site the adapter declares, armed or not",
    )
    absorbed_duplicates: int = Field(
        description="attempted duplicate effects that idempotency absorbed, over every scenario"
    )
    not_tested: list[NotTested]
    counterexample: Counterexample | None
    commit_faults: list[CommitFaultPair] = Field(
        default_factory=list,
        description="every (commit kind x fault) pair of the targeted plan and whether it ran; "
        "empty: no targeted plan (or a merged report)",
    )
    excused: dict[str, int] = Field(
        default_factory=dict,
        description="runs the comparisons with the fault-free run left out, by the fault kind "
        "whose evidence excused them, and not_excused: runs a fault named without the "
        "evidence (judged), summed over the scenarios",
    )
    model_usage: dict[str, int] = Field(
        default_factory=dict,
        description="calls of the world's model endpoint over every scenario (oracle runs "
        "left out) and their token counts: calls, prompt_tokens, completion_tokens (about "
        "four characters a token); empty: no app called it",
    )
    shard: ShardInfo | None = Field(
        None, description="a --shard K/N run: which part of the search it ran; null: all of it"
    )
    merged: MergeInfo | None = Field(
        None, description="a report harness merge joined from shards; null: one run's"
    )

    def to_json(self) -> str:
        """The canonical text of ``report.json`` (sorted keys, 2-space indent):
        the same report always gives the same bytes."""
        # (the free-form adapter description's non-finite floats dump as null)
        return canonical_json(self.model_dump(mode="json"))

    @property
    def folder(self) -> Path | None:
        """The run folder this report was written to or loaded from."""
        return self._folder

    def model_line(self) -> str | None:
        """ "model: N calls, P + C tokens" (None: no call of the world's model)."""
        calls = self.model_usage.get("calls", 0)
        if not calls:
            return None
        prompt = self.model_usage.get("prompt_tokens", 0)
        completion = self.model_usage.get("completion_tokens", 0)
        return (
            f"model: {calls} calls, {prompt + completion} tokens ({prompt} prompt, "
            f"{completion} completion; about four characters a token)"
        )

    def excused_line(self) -> str | None:
        """ "excused: N runs, by what", in words (None: no fault excused or
        named a run)."""
        by = {k: n for k, n in self.excused.items() if k != "not_excused"}
        judged = self.excused.get("not_excused", 0)
        if not by and not judged:
            return None
        shown = ", ".join(f"{k} {n}" for k, n in sorted(by.items(), key=lambda kv: -kv[1]))
        text = f"excused: {sum(by.values())} runs" + (f" (by {shown})" if shown else "")
        if judged:
            text += f"; {judged} named by a fault without the evidence, and judged"
        return text

    def commit_fault_lines(self) -> list[str]:
        """Which (commit kind x fault) pairs the plan covered, and which it
        did not, grouped by why (empty: no targeted plan, or no pair this
        adapter offers: no commit traced, the capabilities they need
        absent; the not-tested list says that already)."""
        pairs = self.commit_faults
        if not pairs or all(p.status == "not_offered" for p in pairs):
            return []
        covered = sum(1 for p in pairs if p.status == "covered")
        lines = [f"commit x fault pairs: {covered} of {len(pairs)} covered"]
        words = {
            "budget": "cut by the budget",
            "shard": "in another shard's part",
            "not_planned": "past the plan's targeted share",
        }
        groups: dict[str, dict[str, list[str]]] = {}
        for p in pairs:
            if p.status == "covered":
                continue
            why = words.get(p.status) or f"not offered ({p.why})"
            groups.setdefault(why, {}).setdefault(p.fault, []).append(p.kind)
        for why, faults in groups.items():
            shown = "; ".join(f"{f} at {', '.join(kinds)}" for f, kinds in faults.items())
            lines.append(f"{why}: {shown}")
        return lines

    def commit_fault_summary(self) -> str | None:
        """The pairs in one line: covered, and why the others are not (None
        as for :meth:`commit_fault_lines`)."""
        if not self.commit_fault_lines():
            return None
        status = Counter(p.status for p in self.commit_faults)
        words = {
            "budget": "cut by the budget",
            "shard": "in another shard",
            "not_planned": "past the targeted share",
            "not_offered": "not offered (capability or trace)",
        }
        rest = [f"{n} {words[k]}" for k, n in sorted(status.items()) if k in words]
        covered = status.get("covered", 0)
        return f"commit x fault pairs: {covered} of {len(self.commit_faults)} covered" + (
            f"; {', '.join(rest)}" if rest else ""
        )

    def plan_line(self) -> str | None:
        """How much of the search's plan ran, and how much was expected to
        fit its budget, in words (None: not a planned search)."""
        if self.planned_scenarios is None or self.searched_scenarios is None:
            return None
        planned = self.planned_scenarios
        text = f"ran {self.searched_scenarios} of {planned} planned scenarios"
        notes = []
        if self.fit_scenarios is not None:
            fit = "all" if self.fit_scenarios >= planned else f"about {self.fit_scenarios}"
            at = (
                ""
                if self.scenario_seconds is None
                else f", at about {self.scenario_seconds:.2g} s each, {self.scenario_cost}"
            )
            notes.append(f"{fit} expected to fit the budget{at}")
        if self.scenarios > self.searched_scenarios:
            notes.append("the rest were shrinking")
        text += f" ({'; '.join(notes)})" if notes else ""
        if self.not_run and self.not_run not in self.inconclusive:
            text += f"; {self.not_run}"
        if self.not_run_schedules:
            text += " (report.json's not_run_schedules names the targeted ones)"
        return text

    @property
    def failed(self) -> list[PropertyReport]:
        """The properties that failed."""
        return [p for p in self.properties if p.verdict == "fail"]


def report_schema() -> dict[str, Any]:
    """The JSON Schema of ``report.json``, generated from :class:`Report`."""
    schema = Report.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://stateful-agent-harness.invalid/report.schema.json"
    return schema


def report_schema_text() -> str:
    """The shipped ``report.schema.json``'s exact text."""
    return json.dumps(report_schema(), indent=2, sort_keys=True) + "\n"
