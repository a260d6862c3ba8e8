"""The bounded JSON reader: its limits and the field rules of each schema."""

from __future__ import annotations

import json

import pytest

from attngeom import schema
from attngeom.errors import InputError


def test_nesting_is_counted_without_recursion_and_ignores_strings():
    assert schema.nesting_depth('{"a": [1, {"b": "[[[[{{{{"}]}') == 3
    assert schema.nesting_depth("[" * 300_000 + "]" * 300_000) == 300_000
    assert schema.nesting_depth('"\\"[["') == 0


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 65 + "]" * 65, "nested deeper than 64"),
        ("[" + "9" * 20 + "]", "an integer of 20 digits"),
        ("[-" + "9" * 5000 + "]", "an integer of 5000 digits"),
        ("{not json", "not valid JSON"),
    ],
)
def test_json_beyond_the_limits_is_one_clear_error(text, message):
    with pytest.raises(InputError, match=message):
        schema.parse_json(text, "x.json")


def test_json_within_the_limits_parses():
    assert schema.parse_json("[" * 64 + "]" * 64, "x") == eval("[" * 64 + "]" * 64)
    assert schema.parse_json('{"n": -9223372036854775807, "f": 1.5}', "x") == {"n": -(2**63) + 1, "f": 1.5}


def test_read_json_refuses_large_and_non_utf8_files(tmp_path):
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 600 + "0]")
    with pytest.raises(InputError, match="larger than"):
        schema.read_json(big, max_bytes=1000)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InputError, match="not UTF-8"):
        schema.read_json(bad)
    with pytest.raises(InputError, match="missing file"):
        schema.read_json(tmp_path / "none.json")


RULE = schema.Record(
    {
        "n": schema.Number(0, 10, integer=True),
        "x": schema.Maybe(schema.Number()),
        "s": schema.Text(3),
        "l": schema.Items(schema.Flag(), max_len=2),
    },
    required=("n",),
    other=None,
)


@pytest.mark.parametrize(
    "doc, message",
    [
        ([], "the document: a list where an object is due"),
        ({}, "the document: missing key\\(s\\) n"),
        ({"n": True}, "n: a boolean where an integer is due"),
        ({"n": 11}, "n: 11 is outside \\[0, 10\\]"),
        ({"n": 1.0}, "n: a number where an integer is due"),
        ({"n": 1, "x": float("nan")}, "x: nan is not a finite number"),
        ({"n": 1, "x": float("inf")}, "x: inf is not a finite number"),
        ({"n": 1, "s": "abcd"}, "s: a string of 4 characters"),
        ({"n": 1, "l": [True, 1]}, "l\\[1\\]: a number where true or false is due"),
        ({"n": 1, "l": [True] * 3}, "l: a list of 3 items"),
        ({"n": 1, "y": 0}, "the document: unexpected key 'y'"),
    ],
)
def test_rules_name_the_place_and_the_problem(doc, message):
    with pytest.raises(InputError, match=f"f.json: {message}"):
        schema.check(doc, RULE, "f.json")


def test_a_sound_document_passes():
    schema.check({"n": 3, "x": None, "s": "ab", "l": [False]}, RULE, "f.json")


def test_the_shipped_expected_files_meet_their_schemas():
    from attngeom.expected import EXPECTED_DIR

    schema.check(json.loads((EXPECTED_DIR / "claims.json").read_text()), schema.CLAIMS_JSON, "claims.json")
    schema.check(json.loads((EXPECTED_DIR / "rerun.json").read_text()), schema.RERUN_JSON, "rerun.json")
