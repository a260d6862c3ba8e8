import json
import re
from pathlib import Path

import pytest
from helpers.reports import claim_row, report_doc, trajectory_report
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from attngeom.base.errors import InputError
from attngeom.report import markdown as report


def test_markdown_escapes_cells_and_lists_every_claim():
    md = report.markdown(report_doc([claim_row("a", "PASS"), claim_row("b", "SKIP")]), {"models": {}})
    assert "`a`" in md and "`b`" in md
    assert "a \\| b" in md and "q q" in md, "a pipe or newline never breaks the table"
    assert "1 passed, 0 failed, 1 skipped" in md
    assert "## Statistics per model" not in md
    assert "- package: attngeom 0.1.0, git commit None" in md  # the version a citation names, beside the commit


def test_write_report_writes_the_three_files(tmp_path: Path):
    doc = report_doc([claim_row("a", "PASS")])
    results = {"models": {}, "mathematics": {"x": 1}}
    report.write_report(tmp_path, doc, results)
    assert json.loads((tmp_path / "report.json").read_text(encoding="utf-8")) == doc
    assert json.loads((tmp_path / "results.json").read_text(encoding="utf-8")) == results
    assert (tmp_path / "REPORT.md").read_text(encoding="utf-8") == report.markdown(doc, results)


def test_markdown_opens_with_the_failing_claims_and_says_what_was_judged():
    doc = report_doc([claim_row("a", "PASS"), claim_row("b.bad", "FAIL")])
    doc["evidence"] = {"line": "evidence: paper rerun (cfg has the paper's configuration): judged with the rerun tier"}
    doc["warnings"] = ["--tier published overrides the rerun tier"]
    doc["preflight"] = {"verdict": "ERROR", "steps": 3, "device": "cpu", "file": "fidelity.json"}
    lines = report.markdown(doc, {"models": {}}).splitlines()
    first = lines.index("Failing claims (1):")
    assert first < 6 and lines[first + 2] == "- `b.bad`: a \\| b: measured 1, expected = 0"
    assert first < lines.index(
        "| verdict | claim | kind | quote (place in the post) | expected | measured | tolerance reason |"
    )
    assert "Warning: --tier published overrides the rerun tier" in lines
    assert "Evidence: paper rerun (cfg has the paper's configuration): judged with the rerun tier." in lines
    assert any(line.startswith("Fidelity preflight: **ERROR** (3 steps on cpu") for line in lines)
    assert "Failing claims" not in report.markdown(report_doc([claim_row("a", "PASS")]), {"models": {}})


SCRIPT, IMG = "<script>alert(1)</script>", "<img src=x onerror=alert(1)>"
BOLD, LINK = "**bold**", "[link](javascript:x)"
PATH = "runs/a`b\nc.npz"  # a backtick ends a naive code span, a newline a list item
RENDER = MarkdownIt("commonmark").enable("table")  # raw HTML passes, as on GitHub before its sanitiser


def _one_line(value: str) -> str:
    return re.sub(r"[\r\n\t]", " ", value)


def _hostilereport_doc() -> dict:
    bad = {**claim_row("bad", "FAIL"), "claim": f"{BOLD} | {LINK}", "quote": SCRIPT, "source": IMG, "measured": "a|b"}
    bad["ensemble"] = {"published": 1.0, "members": [0, 1], "min": 0.0, "max": 2.0, "mean": 1.0, "std": 0.5}
    bad.update(measured_value=1.0, ensemble={**bad["ensemble"], "source": "ens`e|mble\n.json"})
    doc = report_doc([claim_row("a", "PASS"), bad])
    doc["warnings"] = [f"runs/x/run_manifest.json: the run recorded an error ({SCRIPT}\r\n{IMG}\n{LINK})"]
    doc["evidence"] = {"line": f"evidence: {BOLD} {LINK}"}
    doc["preflight"] = {"verdict": IMG, "steps": 3, "device": SCRIPT, "file": "fide`lity|.json"}
    mirror = {"source": "mirror", "mirror": "/mir``ror\n", "url": f"https://e.org/{LINK}"}
    doc["provenance"] |= {
        "command": f"reproduce.sh --bundles {PATH}",
        "machine": IMG,
        "inputs": {PATH: "cd", "y.npz": "ef"},
        "sources": {PATH: mirror, "y.npz": {**mirror, "source": "cache", "fetched": BOLD, "stale": SCRIPT}},
    }
    return doc


def _texts(tokens: list) -> tuple[str, list[str]]:
    """The plain text of rendered Markdown (its text tokens, joined) and its code spans' texts."""
    inline = [t for b in tokens if b.children for t in b.children]
    return " ".join(t.content for t in inline if t.type == "text"), [
        t.content for t in inline if t.type == "code_inline"
    ]


def test_markdown_quotes_hostile_inputs_as_literal_text_on_one_line():
    doc = _hostilereport_doc()
    md = report.markdown(doc, {"models": {}})
    tokens = RENDER.parse(md)
    page = RENDER.render(md)
    assert "<script" not in page and "<img" not in page and "<a " not in page and "<strong>bold" not in page
    assert not [t for b in tokens for t in [b, *(b.children or [])] if t.type.startswith("html")], "no raw HTML"
    text, codes = _texts(tokens)
    for value in (SCRIPT, IMG, BOLD, LINK, f"{BOLD} | {LINK}", "a|b", doc["warnings"][0], f"https://e.org/{LINK}"):
        assert _one_line(value) in text, value
    quoted = [PATH, "fide`lity|.json", "ens`e|mble\n.json", doc["provenance"]["command"], "/mir``ror\n", "bad"]
    assert all(_one_line(v) in codes for v in quoted), codes
    rows = [[t for t in row if t.type in ("th_open", "td_open")] for row in _rows(tokens)]
    assert sorted(len(r) for r in rows) == [6, 6, 7, 7, 7], "a | in a cell never splits it"  # ensemble, claims
    assert all(t.map[1] - t.map[0] == 1 for t in tokens if t.type == "paragraph_open"), "each line is one paragraph"
    items = [line for line in md.splitlines() if line.startswith("  - ")]
    assert len(items) == 2 and _one_line(PATH) in _texts(RENDER.parse(items[0]))[1], "one input, one line"
    assert sum(line.startswith("Warning: ") for line in md.splitlines()) == 1 and md.count("\r") == 0


def _rows(tokens: list) -> list[list]:
    rows, row = [], None
    for t in tokens:
        if t.type == "tr_open":
            row = []
        elif t.type == "tr_close":
            rows.append(row)
            row = None
        elif row is not None:
            row.append(t)
    return rows


def _rendered(markdown: str) -> tuple[str, list[str]]:
    """The one paragraph's (or one table cell's) plain text and code spans."""
    tokens = RENDER.parse(markdown)
    inline = [t for t in tokens if t.type == "inline"][-1].children
    assert {t.type for t in inline} <= {"text", "code_inline"}, [t.type for t in inline]
    return "".join(t.content for t in inline if t.type == "text"), [
        t.content for t in inline if t.type == "code_inline"
    ]


def _as_rendered(value: str) -> str:
    """`value` with line breaks and tabs as spaces, and NUL as U+FFFD (CommonMark 2.3)."""
    return value.translate(str.maketrans(dict.fromkeys("\n\r\t\v\f\x1c\x1d\x1e\x85\u2028\u2029", " "))).replace(
        "\0", "\ufffd"
    )


@given(st.text())
@settings(max_examples=300, deadline=None)
def test_md_text_renders_as_the_literal_value(value: str):
    assert "\n" not in report.md_text(value) and "\r" not in report.md_text(value)
    assert _rendered(f"A{report.md_text(value)}Z") == (f"A{_as_rendered(value)}Z", [])
    assert _rendered(f"| h |\n| --- |\n| A{report.md_text(value)}Z |") == (f"A{_as_rendered(value)}Z", [])


@given(st.text(min_size=1))
@settings(max_examples=300, deadline=None)
def test_md_code_round_trips(value: str):
    assert _rendered(f"A {report.md_code(value)} Z") == ("A  Z", [_as_rendered(value)])
    assert _rendered(f"| h |\n| --- |\n| A {report.md_code(value, cell=True)} Z |") == ("A  Z", [_as_rendered(value)])


def test_markdown_shows_each_statistic_beside_the_trajectories_and_each_comparison_on_their_pairings():
    md = report.markdown(trajectory_report(), {"models": {}})
    section = md[md.index("## Beside every measured trajectory") :]
    assert "3 trajectories from expected/measured/x.json" in section
    final = next(line for line in section.splitlines() if "`occupancy.yat_b.final`" in line)
    assert final.endswith(
        "| 12,000 | 54 | 53.9583 | 2: 53 to 54.2 | inside their range (+0.5 sd from their mean) | 1 of 2 "
        "| these bundles inside; 2 of 2 |"  # the rerun band, 54 ± 5, holds the bundles' value and both trajectories
    )
    scale = next(line for line in section.splitlines() if "`scale.yat_b.0.5x`" in line)
    assert "none: no trajectory of yat\\_b measured at step 12,000 | - | - | - |" in scale
    inversion = next(line for line in section.splitlines() if line.startswith("- `inversion`"))
    assert (
        "at step 12,000 (quoted): no pairing of trajectories measured (trajectories there: softmax 1, yat\\_b 2)"
        in (inversion)
    ), "the end has no entropy: no pairing"
    assert "At step 1,200: fails on 1 of 2 pairings" in inversion and "distinct winners 47.5 to 66" in inversion
    rows = [[t for t in row if t.type in ("th_open", "td_open")] for row in _rows(RENDER.parse(section))]
    assert {len(r) for r in rows} == {len(report.TRAJECTORY_COLUMNS)} == {8}, "one cell per column in every row"


def test_the_report_json_written_is_valid_against_its_schema_with_its_trajectories(tmp_path: Path):
    from attngeom.base import schema

    doc = trajectory_report()
    report.write_report(tmp_path, doc, {"models": {}})
    assert schema.read_json(tmp_path / "report.json", schema.REPORT_JSON)["trajectories"] == doc["trajectories"]
    doc["trajectories"]["claims"]["inversion"]["steps"][0]["measured"]["softmax"] = 0.5
    report.write_report(tmp_path, doc, {"models": {}})
    with pytest.raises(InputError, match=r"trajectories\.claims\.inversion\.steps\[0\]\.measured\.softmax"):
        schema.read_json(tmp_path / "report.json", schema.REPORT_JSON)


def test_a_comparison_counts_the_trajectories_its_pairings_used_not_those_that_lack_its_statistic():
    """At the end two yat_b trajectories are measured, but only one has a census (the other, like the
    author's telemetry reruns, has maps and no keys): the census comparison pairs that one alone."""
    from attngeom.judgement import expected, trajectories
    from attngeom.judgement.trajectories import Trajectory

    claims = [e for e in expected.load_claims() if e["id"] == "census.kernel_fewer"]
    winners = {"distinct_winners": {"0": 30.0, "11999": 53.0}}
    runs = [
        Trajectory("s", "softmax", 12000, {**winners, "final": {"census_distinct_final": 73}}),
        Trajectory("y0", "yat_b", 12000, {**winners, "final": {"census_distinct_final": 45}}),
        Trajectory("y1", "yat_b", 12000, winners),
    ]
    rows = [{**claim_row(e["id"], "PASS"), "claim": e["claim"], "measured_value": True} for e in claims]
    doc = report_doc(rows)
    doc["trajectories"] = trajectories.section(claims, rows, runs, ["expected/measured/x.json"], expected.load_rerun())
    census = doc["trajectories"]["claims"]["census.kernel_fewer"]["steps"][0]
    assert census["measured"] == {"yat_b": 2, "softmax": 1} and census["pairings"] == 1
    md = report.markdown(doc, {"models": {}})
    line = next(line for line in md.splitlines() if line.startswith("- `census.kernel_fewer`"))
    assert "holds on every one of 1 pairings (yat\\_b (1): census distinct final 45; softmax (1):" in line
