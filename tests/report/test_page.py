"""The report page: one self-contained file with the verdict, every claim, figures and provenance."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
from helpers import REPO
from PIL import Image

from attngeom.report import page as html_report


def _claim(cid: str, verdict: str, quote: str = "exactly 0 winners move") -> dict:
    return {
        "id": cid,
        "claim": f"claim {cid}",
        "quote": quote,
        "source": "Measuring Attention's Geometry, 'The census'",
        "expected": "0.121 ± 0.0005",
        "measured": "0.1213",
        "measured_value": 0.1213,
        "tolerance_reason": "float16 round-off",
        "verdict": verdict,
        "function": "scale_changed",
        "tier": "published",
    }


def _report(rerun: list | None = None) -> dict:
    claims = [
        _claim("a.pass", "PASS"),
        _claim("b.fail", "FAIL", quote="<script>alert(1)</script> & more"),
        _claim("c.skip", "SKIP"),
    ]
    report = {
        "summary": {"passed": 1, "failed": 1, "skipped": 1, "verdict": "FAIL"},
        "tier": "published",
        "claims": claims,
        "provenance": {
            "inputs": {"bundles/geom_softmax_s0.npz": "ab" * 32},
            "sources": {"bundles/geom_softmax_s0.npz": {"source": "network", "url": "https://example.org/g.npz"}},
            "expected_sha256": "cd" * 32,
            "versions": {"numpy": "2.4.6"},
            "machine": "x86_64, 2 cores",
            "date": "2026-07-19T00:00:00Z",
            "command": "./reproduce.sh verify --out report",
        },
    }
    if rerun is not None:
        report["rerun"] = rerun
    return report


RESULTS = {"models": {"softmax": {}, "yat_b": {}}, "mathematics": {}}


def _write_gif(path: Path, frames: int = 3) -> None:
    images = [Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)) for i in range(frames)]
    images[0].save(path, save_all=True, append_images=images[1:], duration=100, loop=0)


def test_verdict_claims_and_provenance(tmp_path: Path):
    page = html_report.write_html(tmp_path, _report(), RESULTS, []).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    verdict = re.search(r'<div class="verdict (\w+)" id="verdict">([^<]*)', page)
    assert verdict.group(1) == "FAIL" and "1 passed, 1 failed, 1 skipped" in verdict.group(2)
    assert page.index('id="verdict"') < page.index('id="claims"')
    rows = re.findall(r'<tr class="(\w+)" id="claim-([\w.]+)"', page)
    assert rows == [("PASS", "a.pass"), ("FAIL", "b.fail"), ("SKIP", "c.skip")]
    assert 'href="#claim-b.fail"' in page  # the failing claim is linked from the verdict
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page
    assert "<td>from the network (https://example.org/g.npz)</td>" in page  # where each input came from
    for text in (
        "0.121 ± 0.0005",
        "0.1213",
        "float16 round-off",
        "scale_changed",
        "Geometry, &#x27;The census&#x27;",
        "ab" * 32,
        "cd" * 32,
        "numpy 2.4.6",
        "x86_64, 2 cores",
        "./reproduce.sh verify --out report",
    ):
        assert text in page, text


def test_self_contained(tmp_path: Path):
    page = html_report.write_html(tmp_path, _report(), RESULTS, []).read_text(encoding="utf-8")
    assert not re.search(r'(src|href)\s*=\s*"(?!#|data:)', page), "every resource is inline"
    assert "@import" not in page and "url(" not in page
    assert "window.attngeomTerritory" in page and page.count("<canvas") == 2


def test_rerun_pairs_only_when_given(tmp_path: Path):
    assert 'id="rerun-table"' not in html_report.render(tmp_path, _report(), RESULTS, [])
    pairs = [{"id": "a.pass", "published": "0.121", "rerun": "0.118", "drift": "-0.003"}]
    page = html_report.render(tmp_path, _report(pairs), RESULTS, [])
    row = re.search(r'<table id="rerun-table">.*?</table>', page, re.DOTALL).group(0)
    assert all(v in row for v in ("a.pass", "0.121", "0.118", "-0.003"))


def test_figures_embedded_when_present(tmp_path: Path):
    """The page shows the entries it is given whose GIF is there, in their order, with title, caption and counters."""
    assert "No figures in this folder yet" in html_report.render(tmp_path, _report(), RESULTS, [])
    folder = tmp_path / html_report.FIGURES_DIR
    folder.mkdir()
    _write_gif(folder / "b.gif")
    _write_gif(folder / "a.gif")
    entries = [{"file": f, "title": f, "caption": ""} for f in ("a.gif", "b.gif", "absent.gif")]
    page = html_report.render(tmp_path, _report(), RESULTS, entries)
    assert page.count('src="data:image/gif;base64,') == 2 and page.index('id="fig-a"') < page.index('id="fig-b"')
    entry = {"file": "b.gif", "title": "Hull crossing", "caption": "the orange body", "counters_text": "0.0 %"}
    page = html_report.render(tmp_path, _report(), RESULTS, [entry])
    assert page.count("data:image/gif;base64,") == 1
    assert all(t in page for t in ("Hull crossing", "the orange body", '<div class="counters">0.0 %</div>'))


def test_claims_file_round_trip(tmp_path: Path):
    """Every claim of expected/claims.json gets its own row."""
    claims = json.loads((REPO / "expected" / "claims.json").read_text(encoding="utf-8"))["claims"]
    report = _report()
    report["claims"] = [{**c, "verdict": "PASS"} for c in claims]
    page = html_report.render(tmp_path, report, RESULTS, [])
    assert re.findall(r'data-claim="([^"]+)"', page) == [c["id"] for c in claims]


def test_inline_latex_reads_as_text():
    assert html_report.math_text("the $1/t$ correction") == "the 1/t correction"
    rendered = html_report.math_text(r"2\,(u \cdot k)\,((u \cdot k)^2 + b)/t")
    assert rendered == "2\u2009(u · k)\u2009((u · k)<sup>2</sup> + b)/t"
    assert html_report.math_text(r"$\epsilon < 1$ & $x^{n+1}$") == "ε &lt; 1 &amp; x<sup>n+1</sup>"


def test_quotes_on_the_page_show_no_latex(tmp_path: Path):
    claims = json.loads((REPO / "expected" / "claims.json").read_text(encoding="utf-8"))["claims"]
    report = _report()
    report["claims"] = [{**c, "verdict": "PASS"} for c in claims]
    page = html_report.render(tmp_path, report, RESULTS, [])
    table = re.search(r'<table id="claims">.*?</table>', page, re.DOTALL).group(0)
    assert "$" not in table and "\\cdot" not in table and "\\," not in table
    assert "the 1/t correction sets" in table


def _stats_model(window: int = 128) -> dict:
    return {
        "setup": {"window": window, "steps": 12000, "checkpoints": [0, 1200, 6000, 11999]},
        "scale_t": [0.5, 2.0],
        "scale_changed": {"0.5": 0.0, "2.0": 0.25},
        "mean_norm_entropy_final": 0.4941,
        "mean_norm_entropy_by_step": {"0": 0.9, "11999": 0.4941},
        "occupancy_by_step": {"0": 0.25, "11999": 0.5},
        "occupancy_final_min": 0.25,
        "occupancy_final_max": 0.75,
        "census_head": {"distinct_by_step": {"0": 17, "11999": 73}},
        "keys_inside_hull": 0,
        "keys_total": 3072,
        "winner_is_nearest": 0.5,
        "winner_is_aligned": 0.75,
        "scale_sweep": {"changed": [0.0, 0.1]},
        "best_val": 1.4838,
        "bpc": 2.1407,
    }


def test_statistics_table_says_what_the_markdown_says(tmp_path: Path):
    from attngeom.report import markdown as report

    results = {
        "models": {"softmax": _stats_model(), "yat_b": {**_stats_model(), "best_val": 1.5169}},
        "mathematics": {},
    }
    page = html_report.render(tmp_path, _report(), results, [])
    table = re.search(r'<table id="statistics-table">.*?</table>', page, re.DOTALL).group(0)
    cells = [html.unescape(c) for c in re.findall(r"<td[^>]*>([^<]*)</td>", table)]
    markdown = "\n".join(report.statistics_table(results))
    assert cells and all(c in markdown for c in cells)
    assert "1.4838 (2.141)" in cells and "1.5169 (2.141)" in cells
    assert "steps 0, 1,200, 6,000, 12,000" in table
    assert 'id="statistics-table"' not in html_report.render(tmp_path, _report(), RESULTS, [])


def test_evidence_warnings_and_a_failed_preflight_in_red(tmp_path: Path):
    doc = _report()
    doc["evidence"] = {
        "line": "evidence: smoke rerun (manifest.json: config.preset = smoke): judged with the rerun tier"
    }
    doc["warnings"] = ["--tier published overrides the rerun tier"]
    doc["preflight"] = {"verdict": "FAIL", "steps": 3, "device": "cpu", "file": "fidelity.json"}
    page = html_report.render(tmp_path, doc, RESULTS, [])
    assert "Evidence: smoke rerun (manifest.json: config.preset = smoke)" in page
    assert '<small class="warning">Warning: --tier published overrides the rerun tier</small>' in page
    assert re.search(r'id="preflight" class="preflight FAIL">Fidelity preflight: <span class="badge FAIL">FAIL', page)
    doc["preflight"]["verdict"] = "PASS"
    assert 'class="preflight PASS"' in html_report.render(tmp_path, doc, RESULTS, [])


def test_each_trajectory_statistic_has_a_row_and_a_strip_where_one_is_measured(tmp_path: Path):
    from helpers.reports import trajectory_report

    doc = trajectory_report()
    page = html_report.render(tmp_path, doc, RESULTS, [])
    section = page[page.index('<h2 id="trajectories">') : page.index("</ul>", page.index('<h2 id="trajectories">'))]
    rows = re.findall(r'<tr data-claim="([^"]+)">', section)
    assert rows == ["scale.yat_b.0.5x", "occupancy.yat_b.final"]
    strips = re.findall(r'<figure class="trajectory" data-claim="([^"]+)">(.*?)</figure>', section)
    assert [cid for cid, _ in strips] == ["occupancy.yat_b.final"], "no strip where none is measured"
    svg = strips[0][1]
    assert svg.count('fill="#1565c0"') == 2 and svg.count('stroke="#c62828"') == 1 and "these bundles: 53.96" in svg
    assert "none: no trajectory of yat_b measured at step 12,000" in section
    assert re.search(
        r'<li data-claim="inversion"><code>inversion</code>: at step 12,000 \(quoted\).*fails on 1 of 2', section
    )
