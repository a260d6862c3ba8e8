"""The schemas of what the package writes and reads back: the measurement files the docs quote and the
summaries; each value at the edges its rule allows and one step past them."""

from __future__ import annotations

import json

import pytest
from helpers import REPO
from helpers.rules import problems

from attngeom.base import json_rules, schema_results

WHERE = {
    "date": "2026-12-03",
    "machine": "Linux (x86_64, AMD EPYC, 2 cores)",
    "command": "python bench/bench_verify.py --json=x",
    "git_commit": "0123abc",
    "load_average": [0.5, 1.0, 2.0],
}
VERIFY = {
    "measured": WHERE,
    "verify_s": 8.5,
    "runs": 3,
    "windows": 16,
    "verify_with_windows_s": 30.0,
    "census_keys": 3072,
    "census_s": 0.4,
}


def test_the_committed_measurement_files_pass_their_schemas():
    results = REPO / "bench" / "results"
    assert problems(json.loads((results / "verify.json").read_text()), schema_results.BENCH_VERIFY_JSON) == []
    assert problems(json.loads((results / "suite.json").read_text()), schema_results.SUITE_JSON) == []
    for path in results.glob("train-*.json"):
        assert problems(json.loads(path.read_text()), schema_results.BENCH_TRAIN_JSON) == [], path


@pytest.mark.parametrize(
    "change, where",
    [
        ({"verify_s": float("nan")}, "verify_s"),
        ({"verify_s": float("inf")}, "verify_s"),
        ({"verify_s": 0}, "verify_s"),
        ({"verify_s": -1.0}, "verify_s"),
        ({"verify_s": True}, "verify_s"),
        ({"verify_s": 1e7 + 1}, "verify_s"),
        ({"runs": 0}, "runs"),
        ({"runs": 2.5}, "runs"),
        ({"census_keys": 0}, "census_keys"),
        ({"measured": {**WHERE, "machine": None}}, "measured.machine"),
        ({"measured": {**WHERE, "machine": ""}}, "measured.machine"),
        ({"measured": {**WHERE, "machine": "<img src=x onerror=alert(1)>"}}, "measured.machine"),
        ({"measured": {**WHERE, "command": "a\x1b[2Jb"}}, "measured.command"),
        ({"measured": {**WHERE, "command": "run ```x```"}}, "measured.command"),
        ({"measured": {**WHERE, "date": "03/12/2026"}}, "measured.date"),
        ({"measured": {**WHERE, "git_commit": "xyz"}}, "measured.git_commit"),
        ({"measured": {**WHERE, "load_average": [1.0, 2.0]}}, "measured.load_average"),
        ({"measured": {**WHERE, "load_average": [1.0, 2.0, -1.0]}}, "measured.load_average"),
    ],
)
def test_a_damaged_verify_measurement_is_refused_where_it_is_damaged(change, where):
    assert problems(VERIFY, schema_results.BENCH_VERIFY_JSON) == []
    found = problems({**VERIFY, **change}, schema_results.BENCH_VERIFY_JSON)
    assert found and found[0].startswith(where), found


def test_the_edges_of_a_measured_time_are_allowed():
    for seconds in (1e-6, 1e7):
        assert problems({**VERIFY, "verify_s": seconds}, schema_results.BENCH_VERIFY_JSON) == []
    assert problems({**VERIFY, "verify_s": 1e-7}, schema_results.BENCH_VERIFY_JSON)


def test_free_text_is_at_most_ten_thousand_characters():
    assert json_rules.MAX_TEXT == 10_000
    what = schema_results.SUMMARY_JSON.fields["what"]
    assert list(what.errors("w" * 10_000, "what")) == [] and list(what.errors("w" * 10_001, "what"))
