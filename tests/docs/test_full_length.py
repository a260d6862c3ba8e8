"""The full-length reruns' figures of the docs (docs_full), on a summary `summary --together` wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attngeom import cli
from attngeom.docs import full_length
from attngeom.judgement import expected


@pytest.fixture(scope="module")
def kept(two_runs, tmp_path_factory) -> Path:
    """The two full-length runs summarised into one file, their bundles kept and judged together, with
    segments of known steps and wall times."""
    root = tmp_path_factory.mktemp("full")
    out = root / "paper-step12000.json"
    assert (
        cli.main(
            [
                "summary",
                str(two_runs["softmax"]),
                str(two_runs["yat_b"]),
                "--out",
                str(out),
                "--together",
                str(root / "kept"),
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    for name, run in doc["runs"].items():
        model = f"{name}_s0"
        run["segments"] = [
            {"machine": "M", "from_steps": {model: 0}, "to_steps": {model: 4000}, "wall_s": 7200.0},
            {"machine": "M", "from_steps": {model: 4000}, "to_steps": {model: 12000}, "wall_s": 14400.0},
        ]
    out.write_text(json.dumps(doc))
    return out


def test_each_run_shows_its_segments_total_wall_time_and_step_rate(kept):
    table = full_length.full_runs(kept).splitlines()
    rows = {line.split(" | ")[0]: line for line in table if line.startswith("| softmax") or line.startswith("| yat_b")}
    assert rows["| softmax"].startswith(
        "| softmax | 2: 0 to 4,000 (2.0 h), 4,000 to 12,000 (4.0 h) | 6.0 h | 0.56 | M | "
    )
    assert set(rows) == {"| softmax", "| yat_b"}


def test_every_claim_of_the_models_is_shown_beside_the_published_bundles(kept):
    doc = json.loads(kept.read_text())
    text = full_length.full_claims(kept)
    v = doc["together"]["verdict"]
    assert f"{v['passed']} passed, {v['failed']} failed, {v['skipped']} skipped.\n" in text
    skipped = [line for line in text.splitlines() if line.startswith("Skipped: ")]  # each skipped claim, by why
    assert skipped == [
        f"Skipped: `scale.goat_v.0.5x`, `scale.goat_v.2x`, `scale.goat_v.4x`: {full_length.NOT_RERUN}.",
        "Skipped: `reconstruction.yat_b`: " + expected.load_rerun()["reconstruction.yat_b"]["reason"] + ".",
    ]
    assert sum(line.count("`") // 2 for line in skipped) == v["skipped"]
    rows = {
        line.split(" | ")[0][2:].strip("`"): line.split(" | ") for line in text.splitlines() if line.startswith("| `")
    }
    judged = {c["id"]: c for c in doc["together"]["judged"]}
    assert set(rows) == {
        i
        for i, c in judged.items()
        if not i.startswith(("toy.", "setup."))
        and i not in ("scale.softmax.comparisons", "hull.softmax.total", "hull.yat_b.total")
    }
    assert {"inversion", "census.kernel_fewer", "entropy.yat_b", "occupancy.softmax.final"} <= set(rows)
    entropy = rows["entropy.yat_b"]
    assert entropy[1:] == [
        "statistic",
        "0.72",
        "0.720953",
        judged["entropy.yat_b"]["measured"],
        judged["entropy.yat_b"]["expected"],
        "PASS |",
    ]
    setup = sum(1 for i in judged if i.startswith("setup.") or i.endswith((".total", ".comparisons")))
    toy = sum(1 for i in judged if i.startswith("toy."))  # the toy's mathematics, where a rerun judges it
    assert text.split("\n\nSkipped: ")[0].endswith(
        f"Besides: {setup} facts of the setup (whatever was trained): {setup} pass, 0 fail"
        + (
            f"; {toy} claims of kind mathematics (exact computations on the posts' toy: no model is read): "
            f"{toy} pass, 0 fail."
            if toy
            else "."
        )
    )


def test_the_claims_shown_row_by_row_can_be_some_kinds_the_others_counted(kept):
    text = full_length.full_claims(kept, ("statistic", "comparison"))
    rows = [line.split(" | ")[1] for line in text.splitlines() if line.startswith("| `")]
    assert set(rows) == {"statistic", "comparison"} and len(rows) == 15
    assert "Besides: 5 theorems (exact in any trained model): 5 pass, 0 fail; " in text


def test_a_run_is_shown_step_by_step_beside_the_published_run(kept):
    sentence, table = full_length.retrace_sentence("softmax", kept), full_length.retrace("softmax", kept).splitlines()
    assert table[:2] == [sentence, ""]
    table = table[2:]
    steps = [line.split(" | ")[0][2:] for line in table[2:]]
    assert (
        steps[0] == "0" and steps[-1] == "12,000" and len(steps) == 24 + 2
    )  # 24 evaluations; maps at 0 and 1200 too (6000, 12000 are both)
    last = table[-1].split(" | ")
    assert last[1] == "1.531921 / 1.531921" and last[2] == "72.2917 / 72.2917" and last[4] == "0.00% (0) |"
    moved = next(line for line in table if line.startswith("| 1,200 |")).split(" | ")[4]
    assert moved != "0.00% (0) |"  # one row of the softmax run's step-1200 map was reweighed
    assert sentence == (
        "softmax: its validation loss equals the published run's, to the six decimals kept, at 24 of the 24 "
        "evaluations (largest difference 0.000000, at step 500); its final maps differ from the published ones "
        "in 0.00% of the entries, by at most 0."
    )


def test_without_the_file_or_the_run_each_figure_says_so(kept, tmp_path):
    missing = tmp_path / "paper-step12000.json"
    for text in (
        full_length.full_runs(missing),
        full_length.full_claims(missing),
        full_length.retrace("yat_b", missing),
    ):
        assert text.startswith("No full-length rerun is kept yet (") and "does not exist" in text
    assert full_length.retrace("goat_v", kept).startswith("No full-length rerun of goat_v is kept in ")


def test_each_final_band_is_shown_with_every_trajectory_it_was_checked_against():
    from attngeom.judgement import expected

    bands = {cid: b for cid, b in expected.load_rerun().items() if "measured" in b}
    rows = {
        line.split(" | ")[0][3:-1]: line for line in full_length.final_bands().splitlines() if line.startswith("| `")
    }
    assert set(rows) == set(bands) and len(rows) >= 13
    for cid, band in bands.items():
        assert rows[cid].count(" inside") + rows[cid].count(" OUTSIDE") == len(band["measured"])
    assert "kgl_blog-yatattn-b-telem 0.731664 inside" in rows["entropy.yat_b"]


def test_the_readmes_verdict_is_one_sentence_naming_the_failing_claims(kept, tmp_path):
    doc = json.loads(kept.read_text())
    v = doc["together"]["verdict"]
    failing = [c["id"] for c in doc["together"]["judged"] if c["verdict"] == "FAIL"]
    text = full_length.full_verdict(kept)
    assert text.startswith(f"Judged as one set with the {doc['together']['judged_by']['tier']} tier (`")
    assert f": {v['passed']} passed, {v['failed']} failed" in text and text.count("\n") == 0
    assert all(f"`{i}`" in text for i in failing)
    goat_v = "`scale.goat_v.0.5x`, `scale.goat_v.2x`, `scale.goat_v.4x`"  # no goat_v among the two runs
    assert text.endswith(
        f"{v['skipped']} skipped ({goat_v}: {full_length.NOT_RERUN}) (`reconstruction.yat_b`: not judged on reruns)."
    ), text
    assert full_length.full_verdict(tmp_path / "none.json").startswith("No full-length rerun is kept yet")


def test_the_sweeps_head_is_shown_beside_every_head_of_the_published_and_the_kept_models(kept, tmp_path):
    """The claim reads one head by position; the figure gives that head's value (the claim's, as verify
    measures it) beside the spread over all 24 heads, for the published bundles and each kept rerun."""
    published = next(c["measured"] for c in full_length.published_report()["claims"] if c["id"] == "sweep.yat_b.max")
    table = full_length.sweep_heads("yat_b", kept).splitlines()
    assert table[0].startswith("| yat_b, final model | the sweep's head (layer 1, head 1) | ")
    assert table[0].endswith("| heads inside the rerun band 0.25 ± 0.08 |")
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in table[2:]}
    assert set(rows) == {"the published bundles", "yat_b (rerun)"}, "softmax has no sweep of its own to show"
    assert rows["yat_b (rerun)"] == rows["the published bundles"], "the fixture's yat_b run is the published model"
    head, spread, inside = rows["the published bundles"]
    low, mid, high = spread.split(", ")
    assert float(head) == pytest.approx(float(published), abs=5e-4) and float(low) <= float(head) <= float(high)
    assert float(low) < float(mid) < float(high) and inside.endswith(" of 24 |") and 1 <= int(inside.split()[0]) < 24
    assert full_length.sweep_heads("yat_b", tmp_path / "none.json").startswith("No full-length rerun is kept yet")
