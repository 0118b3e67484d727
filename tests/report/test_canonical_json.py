"""``report.json``'s canonical text is ``json.dumps(indent=2, sort_keys=True)``
to the byte, however it is written: the same report always gives the same
bytes, whichever harness wrote it (issue 27 made the writing fast)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.report._canonical import _fast_is_exact, canonical_json

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=8)
)
KEYS = st.text(st.sampled_from('ab"\\\n\u00e9,[]{}: '), max_size=4)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=40,
)


def _standard(data: Any) -> str:
    try:
        return json.dumps(data, indent=2, sort_keys=True, allow_nan=False)
    except ValueError as exc:
        return f"ValueError: {exc}"


def _canonical(data: Any) -> str:
    try:
        return canonical_json(data)
    except ValueError as exc:
        return f"ValueError: {exc}"


def test_this_pythons_c_encoder_writes_what_the_fast_path_expects() -> None:
    # else every report.json is written by json.dumps: right, and slow
    assert _fast_is_exact()


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_the_canonical_text_is_json_dumps_to_the_byte(data: Any) -> None:
    assert _canonical(data) == _standard(data)


@pytest.mark.parametrize(
    "data",
    [
        {},
        [],
        {"a": {}, "b": [], "c": [[]], "d": [{}]},
        {"z": 1, "a": [1, 2.5, "x", None, True, False]},
        {"rows": [{"k": 1, "v": [1, 2]}, {"k": 2, "v": []}, {"v": {"x": "\n"}, "k": 3}]},
        {"s": '\u00e9\ud800\x00\n"\\ \u2028 \U0001f600 ],\n  ['},
        {"f": [1e-05, 1e16, -0.0, 1.5e300, 123456789012345678901234567890]},
        {1: "a", 2: "b"},  # not strings: json.dumps's own rules
        {"n": [math.nan]},  # not JSON: json.dumps's own error
        {"t": (1, (2, 3))},  # a tuple is a list
    ],
)
def test_what_json_dumps_treats_specially_comes_out_the_same(data: Any) -> None:
    assert _canonical(data) == _standard(data)
