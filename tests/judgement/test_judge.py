import math

import pytest

from attngeom.base.variants import PUBLISHED
from attngeom.judgement import claims, expected, judge
from attngeom.judgement.judge import Judgement, passes


@pytest.mark.parametrize(
    "measured,j,ok",
    [
        (0, Judgement(0, "exact", None, ""), True),
        (1, Judgement(0, "exact", None, ""), False),
        ("disagree", Judgement("disagree", "exact", None, ""), False),
        (0.1207, Judgement(0.121, "abs", 0.0005, ""), True),
        (0.1204, Judgement(0.121, "abs", 0.0005, ""), False),
        (42.4, Judgement(45, "rel", 0.15, ""), True),
        (math.inf, Judgement(100, "rel", 0.3, ""), False),
        (math.nan, Judgement(1, "le", None, ""), False),
        (3.9e-4, Judgement(4e-4, "lt", None, ""), True),
        (4e-4, Judgement(4e-4, "lt", None, ""), False),
        (0.0, Judgement(0.0, "gt", None, ""), False),
        (True, Judgement(1, "ge", None, ""), False),
    ],
)
def test_passes(measured, j, ok):
    assert passes(measured, j) is ok


ABOVE, BELOW = math.nextafter(1.0, 2.0), math.nextafter(1.0, 0.0)  # the doubles either side of 1


@pytest.mark.parametrize(
    "comparison,tolerance,value,inside,outside",
    [  # binary-exact edges: the value at the tolerance passes, the next double beyond it fails
        ("abs", 0.25, 0.75, [1.0, 0.5, 0.75], [math.nextafter(1.0, 2.0), math.nextafter(0.5, 0.0)]),
        ("rel", 0.25, 2.0, [2.5, 1.5, 2.0], [math.nextafter(2.5, 3.0), math.nextafter(1.5, 1.0)]),
        ("rel", 0.25, -2.0, [-2.5, -1.5], [math.nextafter(-2.5, -3.0), math.nextafter(-1.5, -1.0)]),
        ("le", None, 1.0, [1.0, BELOW, -math.inf], [ABOVE, math.inf]),
        ("lt", None, 1.0, [BELOW], [1.0, ABOVE]),
        ("ge", None, 1.0, [1.0, ABOVE, math.inf], [BELOW, -math.inf]),
        ("gt", None, 1.0, [ABOVE], [1.0, BELOW]),
        ("abs", 0.0, 3, [3, 3.0], [2, math.nextafter(3.0, 4.0)]),
    ],
)
def test_a_value_exactly_at_its_tolerance_passes_and_the_next_float_beyond_fails(
    comparison, tolerance, value, inside, outside
):
    j = Judgement(value, comparison, tolerance, "")
    assert [passes(m, j) for m in inside] == [True] * len(inside)
    assert [passes(m, j) for m in outside] == [False] * len(outside)


def test_rerun_tier_and_smoke():
    entry = {
        "id": "x",
        "tier": "published bundles",
        "value": 0.12,
        "comparison": "abs",
        "tolerance": 0.001,
        "reason": "r",
    }
    math_entry = {**entry, "tier": "mathematics"}
    bands = {"x": {"comparison": "abs", "tolerance": 0.05, "reason": "drift", "smoke": False}}
    assert judge.judgement_for(entry, "published", bands, "all").tolerance == 0.001
    assert judge.judgement_for(entry, "rerun", bands, "all").tolerance == 0.05
    assert "smoke" in judge.judgement_for(entry, "rerun", bands, "smoke")
    assert judge.judgement_for(entry, "rerun", {}, "all").startswith("not judged on reruns")
    theorem = {"x": {"reason": "a theorem", "smoke": True}}
    assert judge.judgement_for(math_entry, "rerun", theorem, "smoke").tolerance == 0.001


def test_describe():
    assert judge.describe(Judgement(0.121, "abs", 0.0005, "")) == "0.121 ± 0.0005"
    assert judge.describe(Judgement(4e-4, "lt", None, "")) == "< 0.0004"
    assert judge.describe(Judgement(45.0, "rel", 0.15, "")) == "45 ± 15%"
    shown = {c: judge.describe(Judgement(2, c, None, "")) for c in ("exact", "le", "lt", "ge", "gt")}
    assert shown == {"exact": "= 2", "le": "≤ 2", "lt": "< 2", "ge": "≥ 2", "gt": "> 2"}


def test_fmt_shows_each_kind_of_value_as_a_reviewer_reads_it():
    assert [judge.fmt(x) for x in (True, None, "disagree", [1, 2], 15240, math.inf, 0.1234567)] == [
        "True",
        "None",
        "disagree",
        "[1, 2]",
        "15,240",
        "never (inf)",
        "0.123457",
    ]


def test_a_number_written_as_text_or_nothing_never_passes_a_numeric_judgement():
    for measured in ("0.5", None, [0.5]):
        assert not passes(measured, Judgement(0.5, "abs", 1.0, ""))
        assert not passes(measured, Judgement(0.5, "le", None, ""))


BAND_FIELDS = {"value": 7.0, "comparison": "le", "tolerance": 0.5, "reason": "the band's"}


@pytest.mark.parametrize("tier", ["published bundles", "mathematics"])
def test_each_scope_skips_with_its_reason_what_the_evidence_cannot_show_and_a_band_overrides_field_by_field(tier):
    entry = {"id": "x", "tier": tier, "value": 0.12, "comparison": "abs", "tolerance": 0.001, "reason": "r"}
    published = Judgement(0.12, "abs", 0.001, "r")
    shown = {"smoke": {"smoke": True}, "truncated": {"truncated": True}, "both": {"smoke": True, "truncated": True}}
    for scope, why in (
        ("smoke", "a paper-preset statistic: skipped on the smoke preset"),
        ("truncated", "needs the final model: skipped on a run stopped before its last step"),
    ):
        for bands in ({}, {"x": {"reason": "b"}}, {"x": {"reason": "b", "smoke": False, "truncated": False}}):
            got = judge.judgement_for(entry, "published", bands, scope)
            assert got == (published if tier == "mathematics" else why), (scope, bands)
        for band in (shown[scope], shown["both"]):
            assert judge.judgement_for(entry, "published", {"x": {"reason": "b", **band}}, scope) == published
    assert judge.judgement_for(entry, "published", {}, "all") == published
    assert judge.judgement_for(entry, "rerun", {"x": BAND_FIELDS}, "all") == Judgement(7.0, "le", 0.5, "the band's")
    assert judge.judgement_for(entry, "rerun", {"x": {"reason": "b"}}, "all") == Judgement(0.12, "abs", 0.001, "b")
    unjudged = {"x": {"reason": "the published run's own number", "judged": False, "smoke": True, "truncated": True}}
    for scope in judge.SCOPES:  # skipped on reruns for its reason, in every scope; judged as published
        assert judge.judgement_for(entry, "rerun", unjudged, scope) == "the published run's own number"
    assert judge.judgement_for(entry, "published", unjudged, "all") == published
    assert judge.judgement_for(entry, "rerun", {"x": BAND_FIELDS}, "smoke") == (
        Judgement(7.0, "le", 0.5, "the band's")
        if tier == "mathematics"
        else judge.judgement_for(entry, "rerun", {}, "smoke")
    )
    stopped = {**entry, "tier": judge.STOPPED_RUN}
    assert judge.judgement_for(stopped, "rerun", {"x": BAND_FIELDS}, "truncated") == published  # its own band


def _claim(cid: str, model: str, value, comparison: str = "exact", **fields) -> dict:
    return _entry(cid, "scale_comparisons", model=model) | {"value": value, "comparison": comparison} | fields


def test_judge_all_writes_every_field_of_each_row(monkeypatch):
    """Rows as the report shows them: a pass, a fail, a skip (with its reason), an infinite measurement, an ensemble."""
    claims = [
        _claim("pass", "softmax", 15240),
        _claim("fail", "yat_b", 3.0, "le", tolerance=None, ensemble={"members": [1.0, 2.0]}),
        _claim("skip", "goat_v", 1),
        _claim("never", "yat_x", 5.0, "ge"),
    ]
    asked = []
    monkeypatch.setattr(expected, "load_rerun", lambda claims: asked.append(claims) or {"fail": {"reason": "band"}})
    monkeypatch.setattr(expected, "load_claims", lambda: pytest.fail("the claims given are judged, not claims.json"))
    models = {"softmax": {"scale_comparisons": 15240}, "yat_b": {"scale_comparisons": 3.5}}
    models["yat_x"] = {"scale_comparisons": math.inf}
    rows = judge.judge_all({"models": models}, "rerun", "all", claims=claims)
    assert asked == [claims]
    common = {"claim": None, "quote": "q", "source": "s", "function": "scale_comparisons", "unit": "comparisons"}
    common |= {"tier": "published bundles", "kind": "setup", "tolerance": "-"}
    want = [
        {"id": "pass", "measured_value": None, "measured": "-", "verdict": "SKIP", "expected": "-", "quoted": "15,240"},
        {"id": "fail", "measured_value": 3.5, "measured": "3.5", "verdict": "FAIL", "expected": "≤ 3", "quoted": "3"},
        {"id": "skip", "measured_value": None, "measured": "-", "verdict": "SKIP", "expected": "-", "quoted": "1"},
        {"id": "never", "measured_value": None, "measured": "-", "verdict": "SKIP", "expected": "-", "quoted": "5"},
    ]
    want[1] |= {"tolerance": "upper bound", "cause": "measured 3.5, above the bound ≤ 3", "accepted": [None, 3.0]}
    reasons = ["not judged on reruns (it does not depend on the run; the default verify judges it)", "band"]
    reasons += ["not judged on reruns (it does not depend on the run; the default verify judges it)"] * 2
    for row, w, why in zip(rows, want, reasons):
        assert row == common | {"claim": w["id"]} | w | {"tolerance_reason": why} | (
            {"ensemble": {"members": [1.0, 2.0]}} if w["id"] == "fail" else {}
        )
    published = judge.judge_all({"models": models}, "published", "all", claims=claims)
    assert [(r["verdict"], r["expected"], r["measured"], r["measured_value"]) for r in published] == [
        ("PASS", "= 15,240", "15,240", 15240),
        ("FAIL", "≤ 3", "3.5", 3.5),
        ("SKIP", "-", "-", None),
        ("PASS", "≥ 5", "never (inf)", None),
    ]
    assert [r["tolerance_reason"] for r in published] == ["r", "r", "needs goat_v, not in these bundles", "r"]
    smoke = judge.judge_all({"models": models}, "published", "smoke", claims=claims)
    assert {r["tolerance_reason"] for r in smoke} == {"a paper-preset statistic: skipped on the smoke preset"}


@pytest.mark.parametrize("cid", [c for c, b in expected.load_rerun().items() if b.get("comparison") in ("abs", "rel")])
def test_each_rerun_band_fails_just_outside_it(cid):
    entry = next(e for e in expected.load_claims() if e["id"] == cid)
    j = judge.judgement_for(entry, "rerun", expected.load_rerun(), scope="all")
    width = j.tolerance * (abs(j.value) if j.comparison == "rel" else 1)
    assert passes(j.value, j) and passes(j.value + 0.99 * width, j)
    assert not passes(j.value + 1.01 * width, j) and not passes(j.value - 1.01 * width, j)


def test_rerun_bands_cover_the_authors_own_rerun(tmp_path):
    """The telemetry rerun of yat_b (same seed and configuration) passes the rerun bands."""
    import numpy as np

    from attngeom.base import fetch
    from attngeom.measures import stats

    root = fetch.fetch_bundles(fetch.TELEMETRY_BUNDLES)
    with np.load(root / "kgl_blog-yatattn-b-telem" / "attn_yat_b_s0.npz") as z:
        maps = {k: z[k] for k in z.files if k.startswith("step")}
    measured = {
        "occupancy.yat_b.final": stats.occupancy(maps["step11999"], False).mean() * 128,
        "occupancy.yat_b.step0": stats.occupancy(maps["step0"], False).mean() * 128,
        "entropy.yat_b": stats.norm_entropy(maps["step11999"], False).mean(),
    }
    bands, entries = expected.load_rerun(), {e["id"]: e for e in expected.load_claims()}
    for cid, value in measured.items():
        j = judge.judgement_for(entries[cid], "rerun", bands, scope="all")
        assert passes(float(value), j), (cid, value)
        assert not passes(float(value), judge.judgement_for(entries[cid], "published", bands, "all")) or cid.endswith(
            "step0"
        )


def _entry(cid: str, function: str, **args) -> dict:
    return {
        "id": cid,
        "claim": cid,
        "quote": "q",
        "source": "s",
        "function": function,
        "args": args,
        "value": 15240,
        "unit": "comparisons",
        "comparison": "exact",
        "tolerance": None,
        "reason": "r",
        "tier": "published bundles",
        "kind": "setup",
    }


def test_skip_only_for_an_absent_model_and_a_typo_is_an_internal_error(monkeypatch):
    entries = [
        _entry("absent", "scale_comparisons", model="goat_v"),
        _entry("present", "scale_comparisons", model="softmax"),
    ]
    monkeypatch.setattr(expected, "load_claims", lambda: [dict(e) for e in entries])
    monkeypatch.setattr(expected, "load_rerun", dict)
    rows = judge.judge_all({"models": {"softmax": {"scale_comparisons": 15240}}}, "published")
    assert [(r["id"], r["verdict"]) for r in rows] == [("absent", "SKIP"), ("present", "PASS")]
    assert rows[0]["tolerance_reason"] == "needs goat_v, not in these bundles" and rows[0]["measured"] == "-"
    with pytest.raises(RuntimeError, match=r"claim present: scale_comparisons raised KeyError"):
        judge.judge_all({"models": {"softmax": {"scale_comparison": 15240}}}, "published")


def test_every_model_argument_names_a_model_and_nothing_else_does():
    for e in expected.load_claims():
        named = judge.models_needed(e)
        assert all(m in PUBLISHED for m in named), e["id"]
        others = {k: v for k, v in e["args"].items() if k not in claims.MODEL_ARGS}
        if "runs_json" in others:  # the companion's mechanisms, named as in its runs file, are not bundle models
            others = {"runs_json": others["runs_json"]}
        assert not set(PUBLISHED) & set(map(str, others.values())), e["id"]
        reads_bundles = (
            e["tier"] == "published bundles" and e["function"] != "setup_fact" and "runs_json" not in e["args"]
        )
        assert bool(named) == reads_bundles, e["id"]


def test_summarise_counts_and_fails_on_any_failure():
    rows = [{"verdict": v, "kind": k} for v, k in (("PASS", "setup"), ("SKIP", "theorem"), ("PASS", "mathematics"))]
    assert judge.summarise(rows) == {
        "passed": 2,
        "failed": 0,
        "skipped": 1,
        "verdict": "PASS",
        "by_kind": {  # in expected.KINDS' order, only the kinds there are
            "theorem": {"passed": 0, "failed": 0, "skipped": 1},
            "setup": {"passed": 1, "failed": 0, "skipped": 0},
            "mathematics": {"passed": 1, "failed": 0, "skipped": 0},
        },
    }
    failed = judge.summarise([*rows, {"verdict": "FAIL", "kind": "setup"}])
    assert failed["verdict"] == "FAIL" and failed["by_kind"]["setup"] == {"passed": 1, "failed": 1, "skipped": 0}


def test_a_rerun_leaves_the_claims_of_mathematics_to_the_default_job_and_says_so_in_one_line():
    entries = [{"id": "m", "tier": "mathematics"}, {"id": "b", "tier": "published bundles"}]
    assert judge.judged_in("published", entries) == (entries, [])
    assert judge.judged_in("rerun", entries) == (entries[1:], entries[:1])
    assert judge.left_out_line([]) is None
    line = judge.left_out_line(entries[:1] * 13)
    assert line.startswith("13 claims of mathematics") and "./reproduce.sh verify judges them" in line


@pytest.mark.parametrize(
    "j,quoted,words",
    [
        (Judgement(0.121, "abs", 0.0005, ""), 0.121, "± 0.0005"),
        (Judgement(100.0, "rel", 0.3, ""), 100.0, "± 30%"),
        (Judgement(0, "exact", None, ""), 0, "exact"),
        (Judgement(1e-9, "le", None, ""), 1e-9, "upper bound"),
        (Judgement(4e-4, "lt", None, ""), 4e-4, "upper bound"),
        (Judgement(0, "ge", None, ""), 0, "lower bound"),
        (Judgement(0, "gt", None, ""), 0, "lower bound"),
        (Judgement(52.0, "abs", 8.0, ""), 54.0, "52 ± 8"),  # a band centred elsewhere: the whole of it
        (Judgement(1, "exact", None, ""), True, "= 1"),  # 1 is not True: never shown as the quote's own
    ],
)
def test_the_tolerance_column_says_what_the_judgement_accepts_around_the_quote(j, quoted, words):
    assert judge.tolerance_text(j, quoted) == words


def test_an_interval_holds_exactly_what_passes():
    for j in (  # binary-exact ends (the strips draw them; at round-off scale an end may differ by an ulp)
        Judgement(0.75, "abs", 0.25, ""),
        Judgement(-2.0, "rel", 0.25, ""),
        Judgement(1.0, "le", None, ""),
        Judgement(1.0, "ge", None, ""),
        Judgement(3, "exact", None, ""),
    ):
        lo, hi = judge.interval(j)
        for x, outward in ((lo, -math.inf), (hi, math.inf)):
            if math.isfinite(x):  # a finite end passes, the next double beyond it does not
                assert passes(x, j) and not passes(math.nextafter(x, outward), j), (j, x)
            else:  # an unbounded end: the bound holds however far that way
                assert passes(math.copysign(1e300, outward), j), (j, x)
    assert judge.interval(Judgement(1.0, "lt", None, "")) == (-math.inf, 1.0)
    assert judge.interval(Judgement(0.0, "gt", None, "")) == (0.0, math.inf)
    assert judge.interval(Judgement(True, "exact", None, "")) is None
    assert judge.interval(Judgement([0, 1200], "exact", None, "")) is None


@pytest.mark.parametrize(
    "measured,j,said",
    [
        (309.02, Judgement(100.0, "rel", 0.3, ""), "measured 309.02, above the accepted 70 to 130"),
        (60, Judgement(100.0, "rel", 0.3, ""), "measured 60, below the accepted 70 to 130"),
        (0.12, Judgement(0.121, "abs", 0.0005, ""), "measured 0.12, below the accepted 0.1205 to 0.1215"),
        (2, Judgement(0, "exact", None, ""), "measured 2, where exactly 0 is expected"),
        (1.5, Judgement(1, "le", None, ""), "measured 1.5, above the bound ≤ 1"),
        (4e-4, Judgement(4e-4, "lt", None, ""), "measured 0.0004, above the bound < 0.0004"),
        (0.0, Judgement(0.0, "gt", None, ""), "measured 0, below the bound > 0"),
        (-1, Judgement(0, "ge", None, ""), "measured -1, below the bound ≥ 0"),
        ("disagree: [1, 2]", Judgement(6, "abs", 0.5, ""), "measured disagree: [1, 2], where a number is expected"),
        (math.nan, Judgement(6, "abs", 0.5, ""), "measured nan, where a number is expected"),
        (True, Judgement(1, "ge", None, ""), "measured True, where a number is expected"),
    ],
)
def test_a_failure_says_where_its_measurement_lies_against_what_was_accepted(measured, j, said):
    assert not passes(measured, j)
    assert judge.against(measured, j) == said


def test_a_failure_of_the_far_field_says_which_direction_settles_where():
    exact = {"theta_deg": [0.0, 2.0, 4.0, 6.0], "settle_radius": [14.0, 309.02, 72.3, 133.9], "never_agree": 0}
    far = {"radius": [2.0, 60.0, 120.0], "agreement": [0.0, 0.5, 0.75], "exact": exact}
    results = {"mathematics": {"far_field": far}}
    entry = {"function": "far_field_full_radius"}
    said = judge.cause(entry, 309.02, Judgement(100.0, "rel", 0.3, ""), results)
    assert said == (
        "measured 309.02, above the accepted 70 to 130: the direction at 2° agrees with its antipode for good only "
        "from radius 309.0, the one at 6° from 133.9, and every other of the 4 by 72.3"
    )
    sweep = judge.cause({"function": "far_field_max_agreement"}, 0.75, Judgement(1, "exact", None, ""), results)
    assert "on the sweep (radius 2 to 120) at most 3 of 4 directions agree; the direction at 2°" in sweep
    never = {**exact, "settle_radius": [14.0, None, 72.3, 133.9], "never_agree": 1}
    assert "1 of the 4 directions lie on a far-field border" in judge.cause(
        entry, math.inf, Judgement(100.0, "rel", 0.3, ""), {"mathematics": {"far_field": {**far, "exact": never}}}
    )
    assert judge.cause({"function": "keys_total"}, 2, Judgement(0, "exact", None, ""), results) == (
        "measured 2, where exactly 0 is expected"
    )


def test_a_stopped_run_gets_a_row_per_statistic_at_each_step_it_reached():
    assert judge.steps_reached("all", 1200) == judge.steps_reached("truncated", None) == {}  # not a stopped run
    assert judge.stopped_run_entries(judge.steps_reached("truncated", 1199)) == []
    entries = judge.stopped_run_entries(judge.steps_reached("truncated", 1200))
    assert {e["id"] for e in entries} == {
        f"step1200.{m}.{s}" for m in ("softmax", "yat_b", "goat_v") for s in ("occupancy", "entropy")
    }
    assert len(judge.stopped_run_entries(judge.steps_reached("truncated", 11998))) == 12
    row = next(e for e in entries if e["id"] == "step1200.yat_b.entropy")
    j = judge.judgement_for(row, "published", {}, "truncated")
    band = expected.load_steps()[1200]["entropy"]["models"]["yat_b"]
    assert (j.value, j.tolerance) == (0.753121, band["tolerance"])
    assert passes(0.753121 + 0.9 * j.tolerance, j) and not passes(0.753121 - 1.1 * j.tolerance, j)
    assert judge.models_needed(row) == ["yat_b"]


def test_a_stopped_runs_entry_names_its_step_model_and_band_in_every_field():
    one = {"published": 0.75, "tolerance": 0.01, "reason": "why"}
    band = {"statistic": "mean_norm_entropy", "label": "entropy", "unit": "nats", "models": {"yat_b": one}}
    band["models"]["goat_v"] = one | {"ensemble": {"members": [0.7, 0.8]}}
    entries = judge.stopped_run_entries({1200: {"ent": band}})
    common = {"function": "mean_norm_entropy_at", "value": 0.75, "unit": "nats", "comparison": "abs"}
    common |= {"tolerance": 0.01, "reason": "why", "tier": judge.STOPPED_RUN, "kind": "statistic"}
    assert entries == [
        common
        | {
            "id": f"step1200.{m}.ent",
            "claim": f"{m}: entropy at step 1200, as in the published run",
            "quote": f"(not a quote: the published bundles' step1200 map of {m})",
            "source": f"the published bundles, attn_{m}_s0.npz, key step1200",
            "args": {"model": m, "step": 1200},
        }
        | ({"ensemble": {"members": [0.7, 0.8], "published": 0.75}} if m == "goat_v" else {})
        for m in ("yat_b", "goat_v")
    ]
    band["separates"] = [["yat_b", "goat_v"]]
    assert judge.separation_notes({1200: {"ent": band}}) == [
        "at step 1200 the bands of yat_b and goat_v (entropy) overlap: a run inside both does not tell the two "
        "apart as the posts do"
    ]
    band["models"]["goat_v"] = one | {"published": 0.9}
    assert judge.separation_notes({1200: {"ent": band}}) == []


def test_a_stopped_run_measures_its_setup_facts_where_their_claims_wait_for_the_end(monkeypatch):
    """A setup fact holds at any step: a run stopped early shows what it trained (setup.steps: the steps
    trained) on a row skipped for its stop; a statistic of the final model is neither judged nor measured."""
    claims = [_claim("steps", "softmax", 12000), _claim("stat", "softmax", 12000) | {"kind": "statistic"}]
    bands = {"steps": {"reason": "band", "truncated": False}, "stat": {"reason": "band", "truncated": False}}
    monkeypatch.setattr(expected, "load_rerun", lambda claims: bands)
    rows = judge.judge_all({"models": {"softmax": {"scale_comparisons": 900}}}, "rerun", "truncated", claims=claims)
    assert [(r["verdict"], r["measured"]) for r in rows] == [("SKIP", "900"), ("SKIP", "-")]
    assert rows[0]["tolerance_reason"] == "needs the final model: skipped on a run stopped before its last step"
    absent = judge.judge_all({"models": {}}, "rerun", "truncated", claims=claims[:1])
    assert [(r["verdict"], r["measured"]) for r in absent] == [("SKIP", "-")]  # no model, nothing to measure
