"""History: loading, saving, indexes, the declaration, and the append-only writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from history_builder import CHARGE, H

from harness.history import (
    History,
    HistoryClosedError,
    HistoryFormatError,
    HistoryWriter,
)
from harness.model import EventF


def test_a_saved_history_loads_back_equal(tmp_path: Path) -> None:
    h = H().declaration({CHARGE: "exactly_once"}).run("r1", (CHARGE, "h1")).build()
    h.save(tmp_path / "h.jsonl")
    back = History.load(tmp_path / "h.jsonl")
    assert back.events == h.events
    assert back.problems == ()


def test_an_unreadable_line_is_a_problem_not_an_exception(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(H().submit("r1").build().to_jsonl() + '{"index": 2, "tim\n')
    h = History.load(path)
    assert len(h) == 2
    assert len(h.problems) == 1 and "h.jsonl:3" in h.problems[0]


def test_a_strict_load_raises_on_an_unreadable_line(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text("not json\n")
    with pytest.raises(HistoryFormatError) as info:
        History.load(path, strict=True)
    assert info.value.line == 1


def test_a_gap_in_the_indexes_is_reported_as_lost_events() -> None:
    events = H().submit("r1").final("r1", "completed").events
    h = History([events[0], events[2]])
    assert any("index 2 where 1 was expected" in p for p in h.problems)


def test_events_are_indexed_by_f_and_by_run() -> None:
    h = H().submit("r1").submit("r2", outcome="fail").effect("r1").final("r1", "completed").build()
    assert [e.index for e in h.by_run("r1")] == [0, 1, 4, 5]
    assert len(h.by_f(EventF.SUBMIT)) == 4
    assert h.by_f("no-such-f") == ()
    assert h.submitted_ok() == ("r1",)
    assert h.submitted_failed() == ("r2",)
    assert set(h.finals()) == {"r1"}
    assert h.tenant_of("r1") == "t1"
    assert len(h.effects(applied=True)) == 1


def test_one_ok_submission_outweighs_a_failed_retry() -> None:
    h = H().submit("r1", outcome="fail").submit("r1").build()
    assert h.submissions() == {"r1": "ok"}


def test_the_declaration_is_read_with_defaults_and_its_problems() -> None:
    h = H().declaration({CHARGE: "at_least_once", "x.y": "twice"}).build()
    decl = h.declaration()
    assert decl is not None
    assert decl.delivery_for(CHARGE) == "at_least_once"
    assert decl.delivery_for("other.kind") == "exactly_once"
    assert decl.transitions is None
    assert decl.has_capability("context")
    assert any("'twice'" in p for p in decl.problems)
    assert H().build().declaration() is None


def test_the_writer_assigns_indexes_and_flushes_every_line(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path) as w:
        first = w.append("invoke", EventF.SUBMIT, "runner", {"run_id": "r1"}, 0.0)
        second = w.append("ok", "submit", "runner", {"run_id": "r1"}, 0.5)
        # flushed: readable before close
        assert History.load(path).events == (first, second)
    assert (first.index, second.index) == (0, 1)


def test_a_reopened_writer_continues_after_a_half_written_line(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path) as w:
        w.append("info", EventF.NOTE, "runner", {"text": "a"}, 0.0)
    with open(path, "a") as fh:
        fh.write('{"index": 1, "ti')  # the harness died mid-line
    with HistoryWriter(path) as w:
        ev = w.append("info", EventF.NOTE, "runner", {"text": "b"}, 1.0)
    assert ev.index == 1
    h = History.load(path)
    assert [e.value["text"] for e in h] == ["a", "b"]
    assert len(h.problems) == 1


def test_the_writer_copies_the_value_it_records(tmp_path: Path) -> None:
    value = {"items": [1, 2]}
    with HistoryWriter(tmp_path / "h.jsonl") as w:
        ev = w.append("info", EventF.NOTE, "runner", value, 0.0)
    value["items"].append(3)
    assert ev.value == {"items": [1, 2]}


@pytest.mark.parametrize("value", [{"x": {1, 2}}, {"x": float("nan")}, {"x": object()}])
def test_the_writer_refuses_a_value_that_is_not_plain_json(tmp_path: Path, value: object) -> None:
    with HistoryWriter(tmp_path / "h.jsonl") as w, pytest.raises(HistoryFormatError):
        w.append("info", EventF.NOTE, "runner", value, 0.0)  # type: ignore[arg-type]
    assert (tmp_path / "h.jsonl").read_text() == ""


def test_the_writer_refuses_an_unknown_type_or_f(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "h.jsonl") as w:
        with pytest.raises(HistoryFormatError):
            w.append("maybe", EventF.NOTE, "runner", {}, 0.0)
        with pytest.raises(HistoryFormatError):
            w.append("info", "gossip", "runner", {}, 0.0)
        assert w.next_index == 0


def test_the_writer_refuses_to_append_after_close(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path / "h.jsonl")
    w.close()
    w.close()
    with pytest.raises(HistoryClosedError):
        w.append("info", EventF.NOTE, "runner", {}, 0.0)


def test_written_lines_are_one_json_object_each(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path) as w:
        for i in range(3):
            w.append("info", EventF.NOTE, "runner", {"i": i}, float(i))
    lines = path.read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [0, 1, 2]
