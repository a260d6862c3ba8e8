import json
from pathlib import Path

from attngeom import report


def _row(cid: str, verdict: str, reason: str = "why") -> dict:
    return {
        "id": cid,
        "claim": "a | b",
        "quote": "q\nq",
        "source": "post",
        "expected": "= 0",
        "measured": "1",
        "tolerance_reason": reason,
        "verdict": verdict,
    }


def _doc(rows: list[dict]) -> dict:
    prov = {
        "command": "reproduce.sh",
        "machine": "m",
        "git_commit": None,
        "versions": {"numpy": "2"},
        "expected_sha256": {"claims.json": "ab"},
        "inputs": {"x.npz": "cd"},
        "date": "2026-01-01T00:00:00+00:00",
    }
    passed = sum(r["verdict"] == "PASS" for r in rows)
    failed = sum(r["verdict"] == "FAIL" for r in rows)
    summary = {
        "passed": passed,
        "failed": failed,
        "skipped": len(rows) - passed - failed,
        "verdict": "FAIL" if failed else "PASS",
    }
    return {"summary": summary, "tier": "published", "claims": rows, "provenance": prov}


def test_markdown_escapes_cells_and_lists_every_claim():
    md = report.markdown(_doc([_row("a", "PASS"), _row("b", "SKIP")]), {"models": {}})
    assert "`a`" in md and "`b`" in md
    assert "a \\| b" in md and "q q" in md, "a pipe or newline never breaks the table"
    assert "1 passed, 0 failed, 1 skipped" in md
    assert "## Statistics per model" not in md


def test_write_report_writes_the_three_files(tmp_path: Path):
    doc = _doc([_row("a", "PASS")])
    results = {"models": {}, "mathematics": {"x": 1}}
    report.write_report(tmp_path, doc, results)
    assert json.loads((tmp_path / "report.json").read_text(encoding="utf-8")) == doc
    assert json.loads((tmp_path / "results.json").read_text(encoding="utf-8")) == results
    assert (tmp_path / "REPORT.md").read_text(encoding="utf-8") == report.markdown(doc, results)


def test_markdown_opens_with_the_failing_claims_and_says_what_was_judged():
    doc = _doc([_row("a", "PASS"), _row("b.bad", "FAIL")])
    doc["evidence"] = {"line": "evidence: paper rerun (cfg has the paper's configuration): judged with the rerun tier"}
    doc["warnings"] = ["--tier published overrides the rerun tier"]
    doc["preflight"] = {"verdict": "ERROR", "steps": 3, "device": "cpu", "file": "fidelity.json"}
    lines = report.markdown(doc, {"models": {}}).splitlines()
    first = lines.index("Failing claims (1):")
    assert first < 6 and lines[first + 2] == "- `b.bad`: a \\| b: measured 1, expected = 0"
    assert first < lines.index(
        "| verdict | claim | quote (place in the post) | expected | measured | tolerance reason |"
    )
    assert "Warning: --tier published overrides the rerun tier" in lines
    assert "Evidence: paper rerun (cfg has the paper's configuration): judged with the rerun tier." in lines
    assert any(line.startswith("Fidelity preflight: **ERROR** (3 steps on cpu") for line in lines)
    assert "Failing claims" not in report.markdown(_doc([_row("a", "PASS")]), {"models": {}})
