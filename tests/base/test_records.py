"""The typed documents: report.json's and results.json's records name exactly the fields their writers put
and their readers check."""

from __future__ import annotations

from dataclasses import fields

from attngeom.base import json_rules, records, schema_results
from attngeom.bundles import evidence
from attngeom.judgement import judge
from attngeom.report import markdown


def keys(record) -> set[str]:
    return set(record.__annotations__)


def test_report_json_as_read_back_checks_only_fields_the_report_record_has():
    assert set(schema_results.REPORT_JSON.fields) <= keys(records.Report)
    assert set(schema_results.REPORT_JSON.required) <= keys(records.Report)
    summary = schema_results.REPORT_JSON.fields["summary"]
    assert set(summary.required) == keys(records.Counts) - {"by_kind"} and set(summary.fields) == keys(records.Counts)
    provenance = schema_results.REPORT_JSON.fields["provenance"]
    assert set(provenance.fields) <= keys(records.Provenance)


def test_the_verdict_counts_are_the_counts_record():
    rows = [{"verdict": v, "kind": "setup"} for v in ("PASS", "FAIL", "SKIP", "PASS")]
    counts = judge.summarise(rows)
    assert set(counts) == keys(records.Counts)
    assert counts == {
        "passed": 2,
        "failed": 1,
        "skipped": 1,
        "verdict": "FAIL",
        "by_kind": {"setup": {"passed": 2, "failed": 1, "skipped": 1}},
    }


def test_every_judged_row_has_the_claim_row_fields(monkeypatch):
    monkeypatch.setattr(judge, "_measure", lambda entry, results: 0.5)
    monkeypatch.setattr(judge, "CAUSES", {})  # no results to read a cause from: the generic sentence
    rows = judge.judge_all({"models": {}}, "published")
    assert rows and {r["verdict"] for r in rows} >= {"SKIP", "FAIL"}  # the models' claims: none loaded
    for row in rows:
        assert set(row) | {"cause", "accepted"} == keys(records.ClaimRow) - {"ensemble"}, row["id"]
        assert ("accepted" in row) == (row["verdict"] != "SKIP") and ("cause" in row) == (row["verdict"] == "FAIL")


def test_the_provenance_has_the_provenance_records_fields(tmp_path):
    (tmp_path / "a.npz").write_bytes(b"x")
    doc = markdown.provenance({tmp_path / "a.npz": "ab" * 32}, {"claims.json": "cd" * 32})
    assert set(doc) == keys(records.Provenance)
    assert doc["inputs"] == {str(tmp_path / "a.npz"): "ab" * 32}
    json_rules.check(
        {"inputs": doc["inputs"], "machine": doc["machine"], "git_commit": doc["git_commit"]},
        schema_results.REPORT_JSON.fields["provenance"],
        "provenance",
    )


def test_the_evidence_record_is_what_evidence_knows_and_its_line():
    known = {f.name for f in fields(evidence.Evidence)}
    assert keys(records.EvidenceRecord) - {"line"} <= known
    assert callable(evidence.Evidence.line)


def test_the_results_record_names_the_sections_verify_writes():
    assert keys(records.Results) == {"models", "quality", "mathematics", "robustness"}
    assert {"variant", "seed", "best_val", "per_head", "occupancy_by_step"} <= keys(records.ModelResults)
