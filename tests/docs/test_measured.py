"""The evidence's figures the docs quote: paths from the repository's root, claims by family, and the
published report's verdict, table and failing claims (here on a report made up for the test)."""

from __future__ import annotations

import pytest

from attngeom.base.files import REPO
from attngeom.docs import measured

REPORT = {
    "summary": {"passed": 3, "failed": 2, "skipped": 1, "verdict": "FAIL"},
    "claims": [
        {"id": "scale.yat_b.2x", "claim": "doubling", "measured": "1", "expected": "1", "verdict": "PASS"},
        {"id": "scale.softmax.moved", "claim": "moves", "measured": "0", "expected": "> 0", "verdict": "FAIL"},
        {
            "id": "toy.far.ninety",
            "claim": "crosses 90 %",
            "measured": "4.2",
            "expected": "4.0 ± 0.5",
            "verdict": "PASS",
        },
        {"id": "toy.far.saturates", "claim": "reaches 100 %", "measured": "99.9", "expected": "100", "verdict": "FAIL"},
        {"id": "toy.near.one", "claim": "one owner", "measured": "1", "expected": "1", "verdict": "PASS"},
        {"id": "occupancy.goat_v.final", "claim": "x", "measured": "-", "expected": "-", "verdict": "SKIP"},
    ],
}


@pytest.fixture
def published(monkeypatch):
    monkeypatch.setattr(measured, "_published", lambda: (REPORT, {}))


def test_a_path_is_named_from_the_repositorys_root_and_one_outside_as_given(tmp_path):
    assert measured.relative(REPO / "expected" / "measured" / "x.json") == "expected/measured/x.json"
    assert measured.relative(measured.MEASURED) == "expected/measured"
    assert measured.relative(tmp_path / "y.json") == str(tmp_path / "y.json")


@pytest.mark.parametrize(
    ("claim", "family"),
    [("scale.yat_b.2x", "scale"), ("toy.far.ninety", "toy.far"), ("toy.near.one", "toy.near"), ("setup", "setup")],
)
def test_a_claims_family_is_its_id_up_to_the_model_or_the_case(claim, family):
    assert measured.family(claim) == family


def test_the_verdict_counts_the_judged_claims(published):
    assert measured.published_verdict() == "All 5 claims are judged; 3 pass and 2 fail (1 skipped)."


def test_the_table_has_one_row_per_family_in_order_with_its_failing_claims(published):
    rows = measured.published_table().splitlines()
    assert rows[:2] == ["| claims | judged | pass | fail |", "| --- | --- | --- | --- |"]
    assert rows[2:] == [
        "| `scale` | 2 | 1 | `scale.softmax.moved` |",
        "| `toy.far` | 2 | 1 | `toy.far.saturates` |",
        "| `toy.near` | 1 | 1 | - |",
        "| `occupancy` | 1 | 0 | - |",
    ]


def test_the_failing_claims_are_one_line_each(published):
    assert measured.failing_claims().splitlines() == [
        "- `scale.softmax.moved`: moves: measured 0, expected > 0.",
        "- `toy.far.saturates`: reaches 100 %: measured 99.9, expected 100.",
    ]
    assert measured.published_report() is REPORT
