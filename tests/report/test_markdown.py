import json
import re
from pathlib import Path

import pytest
from helpers.reports import claim_row, report_doc, trajectory_report
from markdown_it import MarkdownIt

from attngeom.base.errors import InputError
from attngeom.report import markdown as report
from attngeom.report.markdown_text import LONGEST


def _flat(md: str) -> str:
    """Markdown's text with its line breaks as spaces: what a wrapped paragraph says."""
    return " ".join(md.split())


def test_markdown_escapes_cells_and_lists_every_claim():
    md = report.markdown(report_doc([claim_row("a", "PASS"), claim_row("b", "SKIP")]), {"models": {}})
    assert "| `a` |" in md and "| `b` |" in md
    assert "a \\| b" in md and "“q q”" in md, "a pipe or newline never breaks a line"
    assert md.startswith("# attngeom: verification report\n\n**PASS**: 1 of 1 judged claims pass, 0 fail, 1 skipped.")
    assert "- 1 skipped: why (b)." in md  # a skip with its reason, grouped
    assert "## Statistics per model" not in md
    assert "- package: attngeom 0.1.0, git commit None" in md  # the version a citation names, beside the commit


def test_write_report_writes_the_three_files(tmp_path: Path):
    doc = report_doc([claim_row("a", "PASS")])
    results = {"models": {}, "mathematics": {"x": 1}}
    report.write_report(tmp_path, doc, results)
    assert json.loads((tmp_path / "report.json").read_text(encoding="utf-8")) == doc
    assert json.loads((tmp_path / "results.json").read_text(encoding="utf-8")) == results
    assert (tmp_path / "REPORT.md").read_text(encoding="utf-8") == report.markdown(doc, results)


def test_markdown_opens_with_the_verdict_by_kind_and_why_each_failure_fails():
    rows = [claim_row("a", "PASS") | {"kind": "theorem"}, claim_row("b.bad", "FAIL") | {"kind": "mathematics"}]
    rows[1]["cause"] = "measured 309, above the accepted 70 to 130: the direction at 76° settles last"
    doc = report_doc(rows)
    doc["summary"] |= {
        "by_kind": {
            "theorem": {"passed": 1, "failed": 0, "skipped": 0},
            "mathematics": {"passed": 0, "failed": 1, "skipped": 0},
        }
    }
    doc["evidence"] = {"line": "evidence: paper rerun (cfg has the paper's configuration): judged with the rerun tier"}
    doc["warnings"] = ["--tier published overrides the rerun tier"]
    doc["preflight"] = {"verdict": "ERROR", "steps": 3, "device": "cpu", "file": "fidelity.json"}
    md = report.markdown(doc, {"models": {}})
    top = _flat(md[: md.index("## Claims")])
    assert top.startswith(
        "# attngeom: verification report **FAIL**: 1 of 2 judged claims pass, 1 fail. Every judged claim about the "
        "trained models passes (theorems 1 of 1); of the claims of mathematics (the posts' toy, no model), 0 pass "
        "and 1 fail. Why it fails: - `b.bad`: a \\| b: measured 309, above the accepted 70 to 130: the direction "
        "at 76° settles last."
    )
    assert "Warning: --tier published overrides the rerun tier" in top
    assert "Evidence: paper rerun (cfg has the paper's configuration): judged with the rerun tier." in top
    assert "Fidelity preflight: **ERROR** (3 steps on cpu" in top
    assert "| `b.bad` | mathematics | - | 1 | - | **FAIL** |" in md
    assert "Why it fails" not in report.markdown(report_doc([claim_row("a", "PASS")]), {"models": {}})


def test_a_stopped_run_says_so_first_with_the_step_it_reached_and_a_rerun_what_it_leaves_out():
    doc = report_doc([claim_row("a", "PASS")])
    doc["evidence"] = {"line": "evidence: truncated paper run", "stopped_after": 49, "steps": 12000}
    doc["left_out"] = "13 claims of mathematics (the posts' toy: no model is read) are not judged here"
    top = _flat(report.markdown(doc, {"models": {}}))
    assert "**PASS** so far: the run stopped after step 49 of 12,000, so only what it can show is judged: 1 of 1" in top
    assert "13 claims of mathematics (the posts' toy: no model is read) are not judged here." in top


def test_no_line_of_the_report_is_longer_than_a_terminal_reads_unless_it_is_one_unbreakable_name():
    doc = _hostilereport_doc()
    doc["claims"][0]["claim"] = "a long claim " * 40
    doc["claims"][0]["quote"] = "a long quote " * 40
    md = report.markdown(doc, {"models": {}})
    for line in md.splitlines():
        assert len(line) <= LONGEST or re.fullmatch(r" *(- )?`[^`]+`", line), line


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
    quoted = [PATH, "fide`lity|.json", "ens`e|mble\n.json", doc["provenance"]["command"], "bad"]
    assert all(_one_line(v) in codes for v in quoted), codes
    assert _one_line("/mir``ror\n") in text  # where an input came from: a sentence, quoted literally
    rows = [[t for t in row if t.type in ("th_open", "td_open")] for row in _rows(tokens)]
    assert sorted(len(r) for r in rows) == [6, 6, 6], "a | in a cell never splits it"  # the claims table
    items = [line for line in md.splitlines() if line.startswith("  - ")]
    assert len(items) == 2 and _one_line(PATH) in _texts(RENDER.parse(items[0]))[1], "one input, one item"
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


def test_markdown_shows_each_statistic_beside_the_trajectories_and_each_comparison_on_their_pairings():
    md = report.markdown(trajectory_report(), {"models": {}})
    section = _flat(md[md.index("## Beside other trajectories of the same training") :])
    assert section.split("## Beside other trajectories of the same training ")[1].startswith(
        "A trajectory is one training"
    )
    assert "3 trajectories from expected/measured/x.json" in section
    assert (
        "- `occupancy.yat_b.final` (Distinct winners of 128 at the end of training, yat\\_b (mean over 24 heads)): at step 12,000, quoted 54, these bundles 53.9583; trajectories "
        "measured: 2, 53 to 54.2; the quote is inside their range (+0.5 sd from their mean); within the quote's "
        "tolerance: 1 of 2; inside the rerun band: these bundles inside; 2 of 2."  # the band, 54 ± 5, holds all three
    ) in section
    assert "trajectories measured: none: no trajectory of yat\\_b measured at step 12,000." in section
    inversion = section[section.index("- `inversion`") :]
    assert (
        "at step 12,000 (quoted): no pairing of trajectories measured (trajectories there: softmax 1, yat\\_b 2)"
        in inversion
    ), "the end has no entropy: no pairing"
    assert "At step 1,200: fails on 1 of 2 pairings" in inversion and "distinct winners 47.5 to 66" in inversion


def test_the_report_json_written_is_valid_against_its_schema_with_its_trajectories(tmp_path: Path):
    from attngeom.base import json_rules, schema_results

    doc = trajectory_report()
    report.write_report(tmp_path, doc, {"models": {}})
    assert (
        json_rules.read_json(tmp_path / "report.json", schema_results.REPORT_JSON)["trajectories"]
        == doc["trajectories"]
    )
    doc["trajectories"]["claims"]["inversion"]["steps"][0]["measured"]["softmax"] = 0.5
    report.write_report(tmp_path, doc, {"models": {}})
    with pytest.raises(InputError, match=r"trajectories\.claims\.inversion\.steps\[0\]\.measured\.softmax"):
        json_rules.read_json(tmp_path / "report.json", schema_results.REPORT_JSON)


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
    said = _flat(md[md.index("- `census.kernel_fewer`") :])
    assert "holds on the one pairing (yat\\_b (1): census distinct final 45; softmax (1):" in said
