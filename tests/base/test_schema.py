"""The bounded JSON reader: its limits and the field rules of each schema."""

from __future__ import annotations

import json

import pytest

from attngeom.base import schema
from attngeom.base.errors import InputError


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
    from attngeom.judgement.expected import EXPECTED_DIR

    schema.check(json.loads((EXPECTED_DIR / "claims.json").read_text()), schema.CLAIMS_JSON, "claims.json")
    schema.check(json.loads((EXPECTED_DIR / "rerun.json").read_text()), schema.RERUN_JSON, "rerun.json")


def _refused(doc: object, spec: schema.Spec, message: str) -> None:
    """`doc` breaks `spec` with exactly this one error line."""
    with pytest.raises(InputError) as caught:
        schema.check(doc, spec, "f.json")
    assert str(caught.value) == f"f.json: {message}"


@pytest.mark.parametrize(
    "doc, spec, message",
    [
        ({}, schema.Items(schema.Number()), "the document: an object where a list is due"),
        ("s", schema.Record(), "the document: a string where an object is due"),
        (None, schema.Text(), "the document: null where a string is due"),
        (5, schema.Text(), "the document: a number where a string is due"),
        ("s", schema.Number(), "the document: a string where a number is due"),
        ([1, "x"], schema.Items(schema.Number()), "[1]: a string where a number is due"),
        (
            {"a": {"b": "s"}},
            schema.Record({"a": schema.Record({"b": schema.Number()})}),
            "a.b: a string where a number is due",
        ),
        ({"a": 1, "b": 2, "c": 3}, schema.Record(max_len=2), "the document: an object of 3 keys (at most 2)"),
        ({}, schema.Record(required=("a", "b")), "the document: missing key(s) a, b"),
        ({"x": 1}, schema.Record({"final": schema.Number()}, keys=r"\d+"), "the document: unexpected key 'x'"),
        ({"k" * 100: 1}, schema.Record(other=None), f"the document: unexpected key {'k' * 80!r}"),
        ("ab1", schema.Text(pattern="[a-z]+"), "the document: 'ab1' does not match [a-z]+"),
        ("v" * 100, schema.Text(pattern="w+"), f"the document: {'v' * 80!r} does not match w+"),
        ("", schema.Text(min_len=1), "the document: a string of 0 characters (1 to 10000)"),
        (-0.5, schema.Number(0, 1), "the document: -0.5 is outside [0, 1]"),
    ],
)
def test_each_rule_names_what_it_found_and_what_is_due(doc, spec, message):
    _refused(doc, spec, message)


@pytest.mark.parametrize(
    "doc, spec",
    [
        (0, schema.Number(0, 10, integer=True)),  # both bounds belong to the range
        (10, schema.Number(0, 10, integer=True)),
        ("abc", schema.Text(3)),
        ("abc", schema.Text(pattern="[a-z]+")),
        ({"a": 1, "b": 2}, schema.Record(max_len=2)),
        ({"y": [1, "z"]}, schema.Record()),  # other keys are anything by default
        ({"final": 1, "12": 2}, schema.Record({"final": schema.Number()}, other=schema.Number(), keys=r"\d+")),
        ({"a": 1}, schema.Either((schema.Text(), schema.Record()))),  # the second option holds
    ],
)
def test_what_meets_a_rule_at_its_edges_passes(doc, spec):
    schema.check(doc, spec, "f.json")


# Either reports the option that got furthest into the value (of options equally far, the first); the
# furthest is the last option, so that taking the first of equals would report another.
DEEP = schema.Record(
    {
        "dots": schema.Either((schema.Number(), schema.Record({"a": schema.Number()}))),
        "brackets": schema.Either((schema.Number(), schema.Items(schema.Number()))),
        "ties": schema.Either((schema.Record({"a": schema.Number()}), schema.Record({"b": schema.Number()}))),
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
    _refused(doc, DEEP, message)


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

    monkeypatch.setattr(schema, "open", opened, raising=False)
    with pytest.raises(InputError, match="larger than"):
        schema.read_json(path, max_bytes=1000)
    assert asked == [1001]


def test_read_json_at_its_limit_parses_and_beyond_says_the_limit_in_mib(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("[" + " " * (2**20 - 2) + "]")
    assert schema.read_json(path, max_bytes=2**20) == []  # exactly the limit
    path.write_text("[" + " " * (2**20 - 1) + "]")
    with pytest.raises(InputError) as caught:
        schema.read_json(path, max_bytes=2**20)
    assert str(caught.value) == f"{path}: larger than 1 MiB, not a file of this kind"


def test_read_json_names_the_file_in_each_refusal_and_checks_the_spec(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('{"n": 1.5}')
    assert schema.read_json(path) == {"n": 1.5}
    with pytest.raises(InputError) as caught:
        schema.read_json(path, RULE)
    assert str(caught.value) == f"{path}: n: a number where an integer is due"
    path.write_text("[]")
    with pytest.raises(InputError) as caught:
        schema.read_json(path, RULE)
    assert str(caught.value) == f"{path}: the document: a list where an object is due"
    path.write_text("{bad")
    with pytest.raises(InputError) as caught:
        schema.read_json(path)
    assert str(caught.value).startswith(f"{path}: not valid JSON (")
    with pytest.raises(InputError) as caught:
        schema.read_json(tmp_path)
    assert str(caught.value) == f"{tmp_path}: unreadable (Is a directory)"


def test_nesting_depth_counts_closing_brackets():
    assert schema.nesting_depth("[][][]") == 1
    assert schema.nesting_depth('[{}, {"a": [[]]}]') == 4


# The ensemble and summary schemas are built from these rules when the module is imported; the tests
# build them afresh, so that they judge the builders themselves.
def _a_spread(**fields) -> dict:
    base = {
        "member_ids": [0, 63],
        "members": [0.25, 0.5],
        "mean": 0.375,
        "std": 0.0,
        "min": 0.25,
        "max": 0.5,
        "published": 0.5,
        "published_inside": True,
        "published_in_std": 0.5,
    }
    return {k: v for k, v in {**base, **fields}.items() if v is not None}


def test_a_spread_of_an_ensemble_needs_member_ids_of_at_most_64_members():
    rule = schema._spread(schema.Number(0, 1))
    schema.check(_a_spread(), rule, "f.json")
    schema.check(_a_spread(member_ids=[5], members=[0.5]), rule, "f.json")  # a single member is a spread
    _refused(_a_spread(member_ids=[64]), rule, "member_ids[0]: 64 is outside [0, 63]")
    _refused(_a_spread(member_ids=[1.5]), rule, "member_ids[0]: a number where an integer is due")
    _refused(_a_spread(member_ids=[]), rule, "member_ids: a list of 0 items (1 to 64)")
    _refused(_a_spread(member_ids=list(range(65))), rule, "member_ids: a list of 65 items (1 to 64)")
    _refused(_a_spread(members=[0.5] * 65), rule, "members: a list of 65 items (1 to 64)")
    _refused(_a_spread(members=[]), rule, "members: a list of 0 items (1 to 64)")
    _refused(_a_spread(members=[2]), rule, "members[0]: 2 is outside [0, 1]")
    _refused(_a_spread(std=-0.5), rule, "std: -0.5 is outside [0, inf]")
    _refused(_a_spread(published_in_std="s"), rule, "published_in_std: a string where a number is due")
    _refused(_a_spread(published_inside=1), rule, "published_inside: a number where true or false is due")
    _refused(_a_spread(extra=1), rule, "the document: unexpected key 'extra'")
    _refused({}, rule, "the document: missing key(s) member_ids, members, mean, std, min, max")
    for key in ("mean", "min", "max", "published"):
        _refused(_a_spread(**{key: 2}), rule, f"{key}: 2 is outside [0, 1]")


def test_a_spread_without_ids_names_no_members_and_holds_up_to_100000_values():
    rule = schema._spread(schema.Number(), ids=False)
    schema.check(_a_spread(member_ids=None, members=[0.5] * 100_000), rule, "f.json")
    _refused(_a_spread(member_ids=None, members=[0.5] * 100_001), rule, "members: a list of 100001 items (1 to 100000)")
    _refused(_a_spread(), rule, "the document: unexpected key 'member_ids'")
    _refused({}, rule, "the document: missing key(s) members, mean, std, min, max")


RUN = {
    "distinct_winners": {"1200": 64.0, "6000": 1},
    "mean_norm_entropy": {"1200": 0.5},
    "validation_loss": {"100": 3.5},
    "final": {"scale_moved_rows": -2.5},
}


def test_statistics_by_step_are_bounded_by_their_definitions():
    rule = schema._by_statistic(lambda bound: bound)
    schema.check(RUN, rule, "f.json")
    _refused({"mean_norm_entropy": {"1200": 1.5}}, rule, "mean_norm_entropy.1200: 1.5 is outside [0, 1]")
    _refused({"distinct_winners": {"1200": 0.5}}, rule, "distinct_winners.1200: 0.5 is outside [1, 65536]")
    _refused({"validation_loss": {"100": -1}}, rule, "validation_loss.100: -1 is outside [0, inf]")
    _refused({"distinct_winners": {"first": 64}}, rule, "distinct_winners: unexpected key 'first'")
    _refused({"winners": {}}, rule, "the document: unexpected key 'winners'")
    _refused({"final": {"x": "s"}}, rule, "final.x: a string where a number is due")
    schema.check({"final": {str(i): 0 for i in range(1000)}}, rule, "f.json")
    _refused({"final": {str(i): 0 for i in range(1001)}}, rule, "final: an object of 1001 keys (at most 1000)")


def test_an_ensembles_statistics_are_spreads_of_the_same_bounds():
    rule = schema._by_statistic(schema._spread)
    spread = _a_spread(members=[0.5], member_ids=[0], min=0.5)
    schema.check({"mean_norm_entropy": {"1200": spread}, "final": {"x": _a_spread(mean=7)}}, rule, "f.json")
    _refused(
        {"mean_norm_entropy": {"1200": {**spread, "mean": 7}}}, rule, "mean_norm_entropy.1200.mean: 7 is outside [0, 1]"
    )
