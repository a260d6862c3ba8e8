"""The bounded JSON reader: its limits, and the rules a document is checked by."""

from __future__ import annotations

import pytest
from helpers.rules import refused

from attngeom.base import json_rules
from attngeom.base.errors import InputError


def test_nesting_is_counted_without_recursion_and_ignores_strings():
    assert json_rules.nesting_depth('{"a": [1, {"b": "[[[[{{{{"}]}') == 3
    assert json_rules.nesting_depth("[" * 300_000 + "]" * 300_000) == 300_000
    assert json_rules.nesting_depth('"\\"[["') == 0


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
        json_rules.parse_json(text, "x.json")


def test_json_within_the_limits_parses():
    assert json_rules.parse_json("[" * 64 + "]" * 64, "x") == eval("[" * 64 + "]" * 64)
    assert json_rules.parse_json('{"n": -9223372036854775807, "f": 1.5}', "x") == {"n": -(2**63) + 1, "f": 1.5}


def test_read_json_refuses_large_and_non_utf8_files(tmp_path):
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 600 + "0]")
    with pytest.raises(InputError, match="larger than"):
        json_rules.read_json(big, max_bytes=1000)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InputError, match="not UTF-8"):
        json_rules.read_json(bad)
    with pytest.raises(InputError, match="missing file"):
        json_rules.read_json(tmp_path / "none.json")


RULE = json_rules.Record(
    {
        "n": json_rules.Number(0, 10, integer=True),
        "x": json_rules.Maybe(json_rules.Number()),
        "s": json_rules.Text(3),
        "l": json_rules.Items(json_rules.Flag(), max_len=2),
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
        json_rules.check(doc, RULE, "f.json")


def test_a_sound_document_passes():
    json_rules.check({"n": 3, "x": None, "s": "ab", "l": [False]}, RULE, "f.json")


@pytest.mark.parametrize(
    "doc, spec, message",
    [
        ({}, json_rules.Items(json_rules.Number()), "the document: an object where a list is due"),
        ("s", json_rules.Record(), "the document: a string where an object is due"),
        (None, json_rules.Text(), "the document: null where a string is due"),
        (5, json_rules.Text(), "the document: a number where a string is due"),
        ("s", json_rules.Number(), "the document: a string where a number is due"),
        ([1, "x"], json_rules.Items(json_rules.Number()), "[1]: a string where a number is due"),
        (
            {"a": {"b": "s"}},
            json_rules.Record({"a": json_rules.Record({"b": json_rules.Number()})}),
            "a.b: a string where a number is due",
        ),
        ({"a": 1, "b": 2, "c": 3}, json_rules.Record(max_len=2), "the document: an object of 3 keys (at most 2)"),
        ({}, json_rules.Record(required=("a", "b")), "the document: missing key(s) a, b"),
        ({"x": 1}, json_rules.Record({"final": json_rules.Number()}, keys=r"\d+"), "the document: unexpected key 'x'"),
        ({"k" * 100: 1}, json_rules.Record(other=None), f"the document: unexpected key {'k' * 80!r}"),
        ("ab1", json_rules.Text(pattern="[a-z]+"), "the document: 'ab1' does not match [a-z]+"),
        ("v" * 100, json_rules.Text(pattern="w+"), f"the document: {'v' * 80!r} does not match w+"),
        ("", json_rules.Text(min_len=1), "the document: a string of 0 characters (1 to 10000)"),
        (-0.5, json_rules.Number(0, 1), "the document: -0.5 is outside [0, 1]"),
    ],
)
def test_each_rule_names_what_it_found_and_what_is_due(doc, spec, message):
    refused(doc, spec, message)


@pytest.mark.parametrize(
    "doc, spec",
    [
        (0, json_rules.Number(0, 10, integer=True)),  # both bounds belong to the range
        (10, json_rules.Number(0, 10, integer=True)),
        ("abc", json_rules.Text(3)),  # both lengths belong to the range, of a string and of a list
        ("a", json_rules.Text(3, min_len=1)),
        ([1, 2], json_rules.Items(json_rules.Number(), max_len=2)),
        ([1], json_rules.Items(json_rules.Number(), max_len=2, min_len=1)),
        ("abc", json_rules.Text(pattern="[a-z]+")),
        ({"a": 1, "b": 2}, json_rules.Record(max_len=2)),
        ({"y": [1, "z"]}, json_rules.Record()),  # other keys are anything by default
        (
            {"final": 1, "12": 2},
            json_rules.Record({"final": json_rules.Number()}, other=json_rules.Number(), keys=r"\d+"),
        ),
        ({"a": 1}, json_rules.Either((json_rules.Text(), json_rules.Record()))),  # the second option holds
    ],
)
def test_what_meets_a_rule_at_its_edges_passes(doc, spec):
    json_rules.check(doc, spec, "f.json")


# Either reports the option that got furthest into the value (of options equally far, the first); the
# furthest is the last option, so that taking the first of equals would report another.
DEEP = json_rules.Record(
    {
        "dots": json_rules.Either((json_rules.Number(), json_rules.Record({"a": json_rules.Number()}))),
        "brackets": json_rules.Either((json_rules.Number(), json_rules.Items(json_rules.Number()))),
        "ties": json_rules.Either(
            (json_rules.Record({"a": json_rules.Number()}), json_rules.Record({"b": json_rules.Number()}))
        ),
    }
)


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"dots": {"a": "s"}}, "dots.a: a string where a number is due"),
        ({"brackets": ["s"]}, "brackets[0]: a string where a number is due"),
        ({"brackets": "s"}, "brackets: a string where a number is due"),  # no option got further than the other
        ({"ties": {"a": "s", "b": "s"}}, "ties.a: a string where a number is due"),  # of equals, the first
    ],
)
def test_either_reports_the_option_that_got_furthest(doc, message):
    refused(doc, DEEP, message)


def test_read_json_reads_at_most_one_byte_beyond_its_limit(tmp_path, monkeypatch):
    """However large the file, only max_bytes + 1 bytes are read before it is refused."""
    path = tmp_path / "big.json"
    path.write_text("[" + "0," * 999 + "0]")
    asked = []

    def opened(*args, **kwargs):
        f = open(*args, **kwargs)
        read = f.read
        f.read = lambda size=-1: asked.append(size) or read(size)
        return f

    monkeypatch.setattr(json_rules, "open", opened, raising=False)
    with pytest.raises(InputError, match="larger than"):
        json_rules.read_json(path, max_bytes=1000)
    assert asked == [1001]


def test_read_json_at_its_limit_parses_and_beyond_says_the_limit_in_mib(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("[" + " " * (2**20 - 2) + "]")
    assert json_rules.read_json(path, max_bytes=2**20) == []  # exactly the limit
    path.write_text("[" + " " * (2**20 - 1) + "]")
    with pytest.raises(InputError) as caught:
        json_rules.read_json(path, max_bytes=2**20)
    assert str(caught.value) == f"{path}: larger than 1 MiB, not a file of this kind"


def test_read_json_names_the_file_in_each_refusal_and_checks_the_spec(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('{"n": 1.5}')
    assert json_rules.read_json(path) == {"n": 1.5}
    with pytest.raises(InputError) as caught:
        json_rules.read_json(path, RULE)
    assert str(caught.value) == f"{path}: n: a number where an integer is due"
    path.write_text("[]")
    with pytest.raises(InputError) as caught:
        json_rules.read_json(path, RULE)
    assert str(caught.value) == f"{path}: the document: a list where an object is due"
    path.write_text("{bad")
    with pytest.raises(InputError) as caught:
        json_rules.read_json(path)
    assert str(caught.value).startswith(f"{path}: not valid JSON (")
    with pytest.raises(InputError) as caught:
        json_rules.read_json(tmp_path)
    assert str(caught.value) == f"{tmp_path}: unreadable (Is a directory)"


def test_nesting_depth_counts_closing_brackets():
    assert json_rules.nesting_depth("[][][]") == 1
    assert json_rules.nesting_depth('[{}, {"a": [[]]}]') == 4
