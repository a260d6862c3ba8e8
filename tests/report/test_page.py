"""The report page: one self-contained file with the verdict, every claim, figures and provenance."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
from helpers import REPO
from PIL import Image

from attngeom.report import headline
from attngeom.report import page as html_report
from attngeom.report import trajectory_words as words


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


def _report() -> dict:
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
    return report


RESULTS = {"models": {"softmax": {}, "yat_b": {}}, "mathematics": {}}


def _write_gif(path: Path, frames: int = 3) -> None:
    images = [Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)) for i in range(frames)]
    images[0].save(path, save_all=True, append_images=images[1:], duration=100, loop=0)


def _text(fragment: str) -> str:
    """An HTML fragment as the text a reader sees: tags dropped, entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def test_verdict_claims_and_provenance(tmp_path: Path):
    page = html_report.write_html(tmp_path, _report(), RESULTS, []).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    verdict = re.search(r'<div class="verdict (\w+)" id="verdict">(.*?)</div>', page, re.DOTALL)
    assert verdict.group(1) == "FAIL" and "FAIL: 1 of 2 judged claims pass, 1 fail, 1 skipped." in _text(
        verdict.group(2)
    )
    assert page.index('id="verdict"') < page.index('id="claims"')
    rows = re.findall(r'<tr class="(\w+)" id="claim-([\w.]+)"', page)
    assert rows == [("PASS", "a.pass"), ("FAIL", "b.fail"), ("SKIP", "c.skip")]
    assert 'href="#claim-b.fail"' in verdict.group(2)  # the failing claim is linked from the verdict
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page
    assert "<td>from the network (https://example.org/g.npz)</td>" in page  # where each input came from
    page = page.replace("<wbr>", "")  # ids and function names may wrap after a dot or an underscore
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
    assert "mean normalised entropy at step 12,000" in table
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
    svg = re.search(r"<svg.*?</svg>", strips[0][1]).group(0)
    assert svg.count('<circle class="value"') == 2 and svg.count('<line class="quote"') == 1
    assert "these bundles: 53.96" in svg
    one = doc["trajectories"]["claims"]["occupancy.yat_b.final"]
    band = one["rerun_band"]["interval"]
    assert f"rerun band: {band[0]:.4g} to {band[1]:.4g}" in svg  # the band and the tolerance, drawn as intervals
    assert "the quote&#x27;s tolerance: 53.5 to 54.5" in svg
    legend = re.search(r'<p class="legend">.*?</p>', strips[0][1]).group(0)  # the legend sits on the strip
    assert all(k in legend for k in ("these bundles", "quoted", "the quote&#x27;s tolerance", "rerun band"))
    assert "none: no trajectory of yat_b measured at step 12,000" in section
    item = re.search(r'<li data-claim="inversion">(.*?)</li>', section).group(1)
    assert _text(item).startswith("inversion: at step 12,000 (quoted)") and "fails on 1 of 2" in item
    assert html.escape(words.MEANING) in page  # a trajectory and a band are said where the page first uses them


def _failing_report() -> dict:
    """A report as verify writes it: counts by kind, a failing claim with its cause, a skipped one, a
    rerun's line on what it leaves out; hostile text in each."""
    doc = _report()
    doc["summary"]["by_kind"] = {
        "statistic": {"passed": 1, "failed": 0, "skipped": 1},
        "mathematics": {"passed": 0, "failed": 1, "skipped": 0},
    }
    a, b, c = doc["claims"]
    a |= {"kind": "statistic", "quoted": "0.121", "tolerance": "± 0.0005"}
    b |= {"kind": "mathematics", "quoted": "[0, 1200, 6000, 12000]", "tolerance": "exact", "function": "far_field"}
    b |= {"cause": "the direction at 76° agrees only from radius 309 <b>", "claim": "$1/t$ <i>sets</i> it"}
    c |= {"kind": "statistic", "tolerance_reason": "no bundle of <goat_v>", "measured": "-"}
    doc["left_out"] = "This rerun leaves 13 claims of mathematics to the default verify <script>"
    return doc


def test_the_verdict_says_what_reports_opening_says(tmp_path: Path):
    """The page's first screen has REPORT.md's sentences (report.headline): the verdict, the counts by kind,
    what a rerun leaves out, each failure's one-sentence cause linked to its row, the skipped with why."""
    doc = _failing_report()
    page = html_report.render(tmp_path, doc, RESULTS, [])
    box = re.search(r'<div class="verdict FAIL" id="verdict">(.*?)</div>', page, re.DOTALL).group(1)
    said = _text(box)
    for sentence in headline.headline(doc):
        assert sentence in said, sentence
    for cid, why in headline.failure_lines(doc["claims"]):
        assert f"{cid}: {why.replace('$', '')}" in said
        assert f'<a href="#claim-{cid}">' in box
    for why, ids in headline.skip_groups(doc["claims"]):
        assert headline.skip_sentence(why, ids) in said
    assert "verify <script>" not in page and "verify &lt;script&gt;." in box
    assert "<b>" not in box and "&lt;goat_v&gt;" in box
    assert said.index("pass, 1 fail") < said.index("Why it fails") < said.index("1 skipped:")


def test_claims_are_short_rows_with_their_details_below(tmp_path: Path):
    """REPORT.md's columns, a number never wrapped inside, ids wrapping only after a dot or an underscore,
    and the quote, its place, the reason and the function in a details element of the claim's own tbody
    (open where the claim fails, with its cause first)."""
    page = html_report.render(tmp_path, _failing_report(), RESULTS, [])
    table = re.search(r'<table id="claims">.*?</table>', page, re.DOTALL).group(0)
    heads = re.findall(r"<th>([^<]*)</th>", table)
    assert heads == ["claim", "kind", "quoted", "measured", "tolerance", "verdict"]
    bodies = re.findall(r'<tbody class="claim (\w+)">(.*?)</tbody>', table, re.DOTALL)
    assert [v for v, _ in bodies] == ["PASS", "FAIL", "SKIP"]
    failing = bodies[1][1]
    assert '<td class="id"><code>b.<wbr>fail</code></td>' in failing
    assert '<td class="num list" data-label="quoted">[0, 1200, 6000, 12000]</td>' in failing  # wraps between items
    assert '<td class="tol" data-label="tolerance">exact</td>' in failing
    assert re.search(r'<td class="num" data-label="quoted">0\.121</td>', bodies[0][1])
    assert '<td class="tol" data-label="tolerance">±&nbsp;0.0005</td>' in bodies[0][1]  # never "±" alone on a line
    details = re.search(r"<details( open)?><summary>(.*?)</summary>(.*?)</details>", failing, re.DOTALL)
    assert details.group(1) == " open" and details.group(2) == "1/t &lt;i&gt;sets&lt;/i&gt; it"
    more = _text(details.group(3))
    assert more.startswith("Why it fails: the direction at 76° agrees only from radius 309 <b>.")
    assert "Measuring Attention's Geometry, 'The census'" in more and "Computed by far_field." in more
    assert "float16 round-off" in more and "&lt;script&gt;alert(1)&lt;/script&gt;" in details.group(3)
    assert re.search(r"<details>", bodies[0][1]) and "Skipped: no bundle of &lt;goat_v&gt;" in bodies[2][1]
    assert "far_<wbr>field" in failing and '<span class="badge FAIL">FAIL</span>' in failing


def test_the_style_sheet_keeps_numbers_and_verdicts_whole():
    """Numbers and badges never wrap inside; ids are never broken anywhere (they carry <wbr> instead);
    the claims become cards and wide tables scroll in their own box on a narrow screen."""
    css = re.sub(r"/\*.*?\*/", "", (html_report.ASSETS / "report.css").read_text(encoding="utf-8"), flags=re.DOTALL)
    rule = {m.group(1).strip(): m.group(2) for m in re.finditer(r"([^{}]+)\{([^{}]*)\}", css)}
    assert "white-space: nowrap" in rule["td.num, td.tol, .num"] and "white-space: nowrap" in rule[".badge"]
    assert "overflow-x: auto" in rule[".wide"]
    assert "@media (max-width: 640px)" in css and "content: attr(data-label)" in css
    assert not any("anywhere" in body for sel, body in rule.items() if "#claims" in sel or "code" in sel.split(","))
