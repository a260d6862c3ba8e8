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


def _claim(cid: str, kind: str, verdict: str, tier: str = "published bundles") -> dict:
    return {"id": cid, "kind": kind, "tier": tier, "verdict": verdict}


def test_the_verdict_by_kind_is_the_reports_headline(monkeypatch):
    by_kind = {
        "theorem": {"passed": 1, "failed": 0, "skipped": 0},
        "mathematics": {"passed": 1, "failed": 1, "skipped": 0},
    }
    report = {"summary": {"passed": 2, "failed": 1, "skipped": 0, "verdict": "FAIL", "by_kind": by_kind}}
    monkeypatch.setattr(measured, "_published", lambda: (report, {}))
    assert measured.published_kinds() == (
        "Every judged claim about the trained models passes (theorems 1 of 1); of the claims of mathematics (the "
        "posts' toy, no model), 1 pass and 1 fail."
    )


def test_the_far_fields_cause_names_the_plateau_and_the_directions_that_settle_last(monkeypatch):
    far = {
        "radius": [2.0, 50.0, 74.0, 120.0],
        "agreement": [0.0, 0.9, 0.978, 0.978],
        "exact": {"settle_radius": [10.0, 309.02, 133.9, 72.3], "theta_deg": [0.0, 76.0, 78.0, 2.0], "never_agree": 0},
    }
    monkeypatch.setattr(measured, "_published", lambda: ({}, {"mathematics": {"far_field": far}}))
    assert measured.far_field_cause() == (
        "The toy's antipodal agreement climbs as quoted, but plateaus at 97.8% from radius 74 to the sweep's end "
        "at 120: the direction at 76° agrees with its antipode for good only from radius 309.0, the one at 78° "
        "from 133.9, and every other of the 4 by 72.3."
    )
