"""The measured figures of README.md and docs/, as Markdown made from the files that hold them.

Each function reads one committed measurement (`expected/measured/*.json`, a benchmark's `--json`
output in `bench/results/`) or judges the author's published bundles (pinned by sha256, judged
exactly), and returns the table or sentence the docs quote; the docs call it from a cog block
(`docs.pages`), so that no figure is typed by hand and none outlives the file it comes from. Every
figure names where it was measured: the machine, the date or commit, and the command.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from functools import cache
from pathlib import Path

from attngeom.base import json_rules, schema, schema_results
from attngeom.base.files import REPO
from attngeom.judgement.causes import far_field_settling
from attngeom.report.headline import kinds_sentence

MEASURED = REPO / "expected" / "measured"
STEP_STATISTICS = (("distinct_winners", "distinct winners of 128"), ("mean_norm_entropy", "entropy"))


def _read(path: Path, spec: json_rules.Spec | None = None) -> dict:
    return json_rules.read_json(path, spec)


def relative(path: Path) -> str:
    """A path as the docs name it: from the repository's root (one outside the checkout as given)."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


@cache
def _published() -> tuple[dict, dict]:
    """report.json and results.json of verify on the author's published bundles (fetched, sha256-checked), judged now."""
    from contextlib import redirect_stdout
    from io import StringIO

    from attngeom.base import fetch
    from attngeom.jobs import verify

    with tempfile.TemporaryDirectory() as tmp, redirect_stdout(StringIO()):
        verify.run_verify(fetch.fetch_bundles(), Path(tmp) / "report")
        return tuple(
            json.loads((Path(tmp) / "report" / f).read_text(encoding="utf-8")) for f in ("report.json", "results.json")
        )


def published_report() -> dict:
    """report.json of the published bundles (`_published`)."""
    return _published()[0]


def quality_sentence() -> str:
    """The quoted quality gap, from the companion's runs, beside the bundles' own seed-0 gap."""
    q = _published()[1]["quality"]
    m = q["companion"]["mechanisms"]
    gap = m["yat"]["mean"] / m["softmax"]["mean"] - 1
    own = q["bundle_gap_to_softmax"]
    seeds = len(m["softmax"]["seeds"])
    return (
        f"The means recomputed from its per-seed best validation losses ({seeds} seeds per mechanism) are "
        f"{m['softmax']['mean']:.4f} (softmax) and {m['yat']['mean']:.4f} (kernel): a {gap:.1%} gap. The bundles' own "
        f"seed-0 losses are "
        + ", ".join(f"{v} {g:.1%} from softmax" for v, g in own.items())
        + "; REPORT.md shows that gap "
        "on its own line as a statistic of one seed, not the quoted one."
    )


def _plateau(ff: dict) -> str:
    top = max(ff["agreement"])
    return f"plateaus at {top:.1%} from radius {ff['radius'][ff['agreement'].index(top)]:.0f}"


def far_field_sentence() -> str:
    """Where the toy's antipodal agreement stands: its crossings, its plateau, and the exact radius of 100 %."""
    report, results = _published()
    measured = {c["id"]: c["measured"] for c in report["claims"]}
    ff = results["mathematics"]["far_field"]
    exact = ff["exact"]
    return (
        f"It wins a majority at radius {float(measured['toy.far.majority']):.1f} and crosses 90 % at "
        f"{float(measured['toy.far.ninety']):.1f}, as quoted, but {_plateau(ff)} on and never reaches 100 % up to "
        f"radius {max(ff['radius']):g}. Measured exactly (for each direction, the radius beyond which its owner and "
        "its antipode's agree for good, from the roots of the pairwise differences of the two points' kernel scores; "
        "`results.json`, `mathematics.far_field.exact`), the counter reaches 100 % only at radius "
        f"{exact['full_agreement_radius']:.1f}: {far_field_settling(exact)}. "
        + (f"{exact['never_agree']}" if exact["never_agree"] else "No")
        + f" direction of the {len(exact['theta_deg'])} lies exactly on a far-field border; one that did would never "
        "agree with its antipode."
    )


def far_field_cause() -> str:
    """The far-field failures' cause in one sentence (in full: `far_field_sentence`): the plateau over the
    quoted sweep, and the directions that settle last (`causes.far_field_settling`, as the report says it)."""
    _, results = _published()
    ff = results["mathematics"]["far_field"]
    return (
        f"The toy's antipodal agreement climbs as quoted, but {_plateau(ff)} to the sweep's end at "
        f"{max(ff['radius']):g}: {far_field_settling(ff['exact'])}."
    )


def family(claim_id: str) -> str:
    """A claim's family: its id up to the model or the case (`scale.yat_b.2x` -> `scale`, `toy.far.ninety` -> `toy.far`)."""
    parts = claim_id.split(".")
    return ".".join(parts[:2]) if parts[0] == "toy" else parts[0]


def published_verdict() -> str:
    """One sentence: how many claims the published bundles pass."""
    s = published_report()["summary"]
    judged = s["passed"] + s["failed"]
    return f"All {judged} claims are judged; {s['passed']} pass and {s['failed']} fail ({s['skipped']} skipped)."


def published_kinds() -> str:
    """One sentence: the published bundles' verdict counted by kind of claim, as the report's headline says it."""
    return kinds_sentence(published_report()) or ""


def published_table() -> str:
    """The claims of the published bundles by family: how many, how many pass, and the failing ones by id."""
    claims = published_report()["claims"]
    counts, passed = Counter(), Counter()
    failed: dict[str, list[str]] = {}
    for c in claims:
        f = family(c["id"])
        counts[f] += 1
        passed[f] += c["verdict"] == "PASS"
        if c["verdict"] == "FAIL":
            failed.setdefault(f, []).append(f"`{c['id']}`")
    rows = ["| claims | judged | pass | fail |", "| --- | --- | --- | --- |"]
    rows += [f"| `{f}` | {n} | {passed[f]} | {', '.join(failed.get(f, [])) or '-'} |" for f, n in counts.items()]
    return "\n".join(rows)


def failing_claims() -> str:
    """The failing claims of the published bundles, one line each: the claim, measured against expected."""
    return "\n".join(
        f"- `{c['id']}`: {c['claim']}: measured {c['measured']}, expected {c['expected']}."
        for c in published_report()["claims"]
        if c["verdict"] == "FAIL"
    )


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.0f} min"


def step1200_runs() -> str:
    """The CPU reruns stopped after step 1200 (paper-step1200.json): each statistic beside the published run's."""
    path = MEASURED / "paper-step1200.json"
    doc = _read(path, schema_results.SUMMARY_JSON)
    rows = [
        "| variant | wall time | distinct winners of 128 | entropy | val. loss at 1000 | step-1200 map against the published | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    machines = set()
    for name, run in doc["runs"].items():
        machines.add(run["judged_by"]["machine"])
        for s in run["statistics"].values():
            pair = [f"{s['run'][k]['1200']:g} / {s['published_seed0'][k]['1200']:g}" for k, _ in STEP_STATISTICS] + [
                f"{s['run']['validation_loss']['1000']:.6f} / {s['published_seed0']['validation_loss']['1000']:.6f}"
            ]
            moved = s["maps_against_published_seed0"]["1200"]
            v = run["verdict"]
            rows.append(
                f"| {name} | {_minutes(run['wall_s'])} | {' | '.join(pair)} | at most {moved['max_abs_difference']:.2g}, "
                f"in {moved['entries_that_differ']:.1%} of entries | {v['passed']} passed, {v['failed']} failed |"
            )
    where = "; ".join(sorted(machines))
    return f"From `{relative(path)}` (run / published; judged on {where}):\n\n" + "\n".join(rows)


def ensemble_table(variant: str) -> str:
    """One variant's ensemble at step 1200 (ensemble-step1200.json): each member's value, the spread, the published value."""
    path = MEASURED / "ensemble-step1200.json"
    run = _read(path, schema_results.SUMMARY_JSON)["runs"][variant]
    stats = run["ensemble"]["statistics"][f"{variant}_s0"]
    wanted = [(k, "1200", label) for k, label in STEP_STATISTICS] + [
        ("validation_loss", step, f"validation loss at step {step}") for step in ("500", "1000")
    ]
    ids = stats["distinct_winners"]["1200"]["member_ids"]
    rows = [
        f"| {variant} at step 1200 | members {', '.join(map(str, ids))} | mean ± sd | published | published inside the members' range |",
        "|---|---|---|---|---|",
    ]
    for key, step, label in wanted:
        s = stats[key][step]
        where = "yes" if s["published_inside"] else "no"
        if s.get("published_in_std") is not None:
            where += f" ({s['published_in_std']:+.1f} sd from the mean)"
        rows.append(
            f"| {label} | {', '.join(map(str, s['members']))} | {s['mean']:.4g} ± {s['std']:.2g} "
            f"| {s['published']} | {where} |"
        )
    walls = [m["wall_s"] for m in run["ensemble"]["member_runs"].values() if m.get("wall_s")]
    machine = next(iter(run["members"].values()))["judged_by"]["machine"]
    return (
        f"From `{relative(path)}`: {len(ids)} members on {machine}, {_minutes(min(walls))} to {_minutes(max(walls))} "
        f"each ({run.get('note', '')}).\n\n" + "\n".join(rows)
    )


def fidelity_table() -> str:
    """The side-by-side check against the author's script (fidelity-*.json): parameters and every loss, both sides."""
    from attngeom.jobs.summary import shown_command

    tables = []
    for path in sorted(MEASURED.glob("fidelity-*.json")):
        doc = _read(path)
        lines = []
        lines.append(
            f"From `{relative(path)}` (`{shown_command(doc['command'])}`, "
            f"{doc['cpu']['model']}, {doc['cpu']['cores']} cores, commit {doc['git_commit'][:7]}): **{doc['verdict']}**"
            f"{' (bit for bit)' if doc['exact'] else ''}.\n"
        )
        lines += [
            "| variant | parameters (script, harness) | losses from step 0 (script) | largest relative loss difference |"
        ]
        lines += ["| --- | --- | --- | --- |"]
        for v in doc["variants"]:
            o, h = doc["original"][v], doc["harness"][v]
            losses = o["losses"]
            worst = max(abs(a - b) / abs(a) for a, b in zip(losses, h["losses"]))
            shown = ", ".join(f"{x:.7f}" for x in losses[:3]) + (f", ..., {losses[-1]:.7f}" if len(losses) > 3 else "")
            lines.append(f"| {v} | {o['parameters']:,}, {h['parameters']:,} | {shown} | {worst:.1e} |")
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


def bands_table(step: int = 1200) -> str:
    """The rerun bands in force at `step` (expected/rerun.json): each model's band, what grounds it, and
    whether the pairs the posts compare stay apart."""
    from attngeom.judgement import expected

    doc = _read(REPO / "expected" / "rerun.json", schema.RERUN_JSON)
    rows = ["| statistic | model | band | grounded in |", "| --- | --- | --- | --- |"]
    notes = []
    for band in doc["steps"][str(step)].values():
        for model, b in band["models"].items():
            e = b.get("ensemble")
            ground = (
                f"an ensemble of {len(e['members'])} ({e['source']})" if e else "the author's reruns on the same GPU"
            )
            lo, hi = b["published"] - b["tolerance"], b["published"] + b["tolerance"]
            rows.append(
                f"| {band['label']} | {model} | {b['published']:g} ± {b['tolerance']:g} ({lo:.4g} to {hi:.4g}) | {ground} |"
            )
        apart = [f"{a} and {c}" for a, c in band.get("separates", []) if (a, c) not in expected.overlaps(band)]
        if apart:
            notes.append(f"{band['label']}: the bands of {', '.join(apart)} stay apart")
    return "\n".join(rows) + ("\n\n" + "; ".join(notes) + "." if notes else "")


def judged_again(step: int = 1200) -> str:
    """The runs of paper-step1200.json judged again with the bands in force (`bands --judge`)."""
    from attngeom.jobs import bands

    kept = _read(MEASURED / "paper-step1200.json", schema_results.SUMMARY_JSON)
    now = _read(REPO / "expected" / "rerun.json", schema.RERUN_JSON)
    rows = ["| run | statistic | value | band | verdict |", "| --- | --- | --- | --- | --- |"]
    for who, _, name, value, published, t, inside in bands.judge_summaries(kept, now, step):
        rows.append(f"| {who} | {name} | {value:g} | {published:g} ± {t:g} | {'PASS' if inside else 'FAIL'} |")
    return "\n".join(rows)


def kinds_table() -> str:
    """What each claim is a property of (`kind` in expected/claims.json): the kinds and their claims."""
    from attngeom.judgement import expected

    claims = expected.load_claims()
    rows = ["| kind | what it means | claims |", "| --- | --- | --- |"]
    for kind, meaning in expected.KINDS.items():
        ids = [f"`{c['id']}`" for c in claims if c["kind"] == kind]
        rows.append(f"| {kind} | {meaning} | {len(ids)}: {', '.join(ids)} |")
    return "\n".join(rows)


def trajectory_spread() -> str:
    """The published bundles' trajectory statistics beside every measured trajectory at their step
    (report.json's `trajectories`, in REPORT.md's words): those measured, those not, and each comparison."""
    from attngeom.report.trajectory_words import comparison_text, statistic_sentence

    section = published_report()["trajectories"]
    lines, unmeasured = [], []
    for cid, one in section["claims"].items():
        if one["kind"] == "comparison":
            lines.append(f"- `{cid}`: {comparison_text(one)}")
        elif "spread" in one:
            lines.append(f"- `{cid}`: {statistic_sentence(one)}")
        else:
            unmeasured.append(f"`{cid}`")
    head = (
        f"{len(section['trajectories'])} measured trajectories of the same training "
        f"({', '.join(section['sources'])}); no trajectory measured at its step: {', '.join(unmeasured)}."
    )
    return "\n".join([head, "", *lines])
