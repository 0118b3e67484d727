"""``output_diff`` shows where two long outputs differ (issue 34).

It used to cut both values to 40 characters from the start, so two strings
that differ only past that point printed identically ("'The refund of
order o-1 has been...' vs 'The refund of order o-1 has been...'"). The
differing part must be in view, with an ellipsis where text was left out.
"""

from __future__ import annotations

from harness.checkers._runs import output_diff

HEAD = "The refund of order o-1 has been processed and the customer was told "


def test_strings_that_differ_at_the_end_show_the_differing_part() -> None:
    text = output_diff({"answer": HEAD + "once."}, {"answer": HEAD + "twice."})
    assert text is not None
    assert "once" in text and "twice" in text
    mine, theirs = text.split("answer: ", 1)[1].split(" vs ")
    assert mine != theirs
    assert mine.startswith("...") and theirs.startswith("...")


def test_a_difference_in_the_middle_is_shown_with_ellipses_on_both_sides() -> None:
    a = "x" * 60 + "AAA" + "y" * 60
    b = "x" * 60 + "BBB" + "y" * 60
    text = output_diff({"k": a}, {"k": b})
    assert text is not None
    mine, theirs = text.split("k: ", 1)[1].split(" vs ")
    assert "AAA" in mine and "BBB" in theirs
    assert mine.startswith("...") and mine.endswith("...")
    assert len(mine) <= 40 and len(theirs) <= 40


def test_short_values_are_shown_whole() -> None:
    assert output_diff({"k": "a"}, {"k": "b"}) == "output differs in k: 'a' vs 'b'"


def test_a_long_string_that_is_a_prefix_of_the_other_shows_where_it_ends() -> None:
    text = output_diff({"k": HEAD}, {"k": HEAD + "and more."})
    assert text is not None
    mine, theirs = text.split("k: ", 1)[1].split(" vs ")
    assert "and more" in theirs
    assert mine != theirs


def test_non_dict_outputs_show_the_differing_part_too() -> None:
    text = output_diff(HEAD * 2 + "once.", HEAD * 2 + "twice.")
    assert text is not None
    assert "once" in text and "twice" in text


def test_nested_values_show_the_differing_part_too() -> None:
    mine = {"reply": {"text": HEAD + "once.", "to": "c-1"}}
    theirs = {"reply": {"text": HEAD + "twice.", "to": "c-1"}}
    text = output_diff(mine, theirs)
    assert text is not None
    shown_mine, shown_theirs = text.split("reply: ", 1)[1].split(" vs ")
    assert "once" in shown_mine and "twice" in shown_theirs
    assert shown_mine.startswith("...") and len(shown_mine) <= 40
    listed = output_diff([HEAD, [HEAD + "once."]], [HEAD, [HEAD + "twice."]])
    assert listed is not None and "once" in listed and "twice" in listed
