"""The full-length reruns of the docs, as Markdown made from `expected/measured/paper-step12000.json`.

Each run there is a CPU rerun of the paper's seed-0 training carried to step 12,000 across several
processes (`rerun --time-limit`, then `--resume`), summarised with its bundles kept beside it and
judged with them as one set (`summary --together`). These functions show its segments and speed,
every claim about the trained models on the reruns beside the published bundles, and each step of a
run beside the published run's. Called from cog blocks (`docs.pages`), like `docs.measured`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attngeom.base import json_rules, schema_results
from attngeom.base.files import REPO
from attngeom.base.variants import model_key
from attngeom.bundles.layout import BundleModel, load_models
from attngeom.docs.measured import MEASURED, published_report, relative
from attngeom.jobs import bands
from attngeom.judgement import expected
from attngeom.judgement.judge import Judgement, describe, judgement_for, passes
from attngeom.measures import stats
from attngeom.measures.table import checkpoint_labels

FULL = MEASURED / "paper-step12000.json"


def _kept(path: Path) -> dict | None:
    return json_rules.read_json(path, schema_results.SUMMARY_JSON) if path.is_file() else None


def _none_yet(path: Path) -> str:
    return f"No full-length rerun is kept yet (`{relative(path)}` does not exist)."


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def _segments(run: dict) -> list[tuple[int, int, float | None]]:
    """Each segment of a run as (first step, last step reached, wall seconds), summed over its models."""
    return [
        (
            sum(v or 0 for v in seg["from_steps"].values()),
            sum(v or 0 for v in seg.get("to_steps", {}).values()),
            seg.get("wall_s"),
        )
        for seg in run.get("segments") or []
    ]


def full_runs(path: Path = FULL) -> str:
    """Each full-length run: its segments (steps and wall time), its total, its step rate and where it trained."""
    doc = _kept(path)
    if doc is None:
        return _none_yet(path)
    rows = [
        "| run | segments: steps (wall time) | wall time | steps/s | trained on | judged alone |",
        "|---|---|---|---|---|---|",
    ]
    for name, run in doc["runs"].items():
        segs = _segments(run)
        wall = sum(w or 0 for _, _, w in segs)
        steps = sum(b - a for a, b, _ in segs)
        shown = ", ".join(f"{a:,} to {b:,} ({_hours(w or 0)})" for a, b, w in segs)
        machines = "; ".join(sorted({s["machine"] for s in run.get("segments") or [] if s.get("machine")}))
        v = run["verdict"]
        rows.append(
            f"| {name} | {len(segs)}: {shown} | {_hours(wall)} | {steps / wall:.2f} | {machines} "
            f"| {v['passed']} passed, {v['failed']} failed |"
        )
    return f"From `{relative(path)}`:\n\n" + "\n".join(rows)


ROWS = ("theorem", "statistic", "comparison")  # the kinds of claims about the models shown row by row
BESIDES = {
    "theorem": "theorems (exact in any trained model)",
    "setup": "facts of the setup (whatever was trained)",
    "mathematics": "claims of kind mathematics (exact computations on the posts' toy: no model is read)",
}


def full_claims(path: Path = FULL, rows_of: tuple[str, ...] = ROWS) -> str:
    """Every claim judged on the full-length reruns together: those about the models of the kinds `rows_of`
    one per row, beside the published bundles' value (the quote, both measurements, the rerun band and the
    verdict); the others counted by kind (expected.KINDS), the claims of mathematics apart."""
    doc = _kept(path)
    if doc is None or "together" not in doc:
        return _none_yet(path)
    together = doc["together"]
    entries = {c["id"]: c for c in expected.load_claims()}
    published = {c["id"]: c["measured"] for c in published_report()["claims"]}
    rows = [
        "| claim | kind | quoted | published bundles | rerun | rerun band | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    counted: dict[str, list[str]] = {}
    for c in together["judged"]:
        entry = entries[c["id"]]
        kind = entry["kind"]
        if kind in rows_of:
            rows.append(
                f"| `{c['id']}` | {kind} | {entry['value']} | {published.get(c['id'], '-')} | {c['measured']} "
                f"| {c['expected']} | {c['verdict']} |"
            )
        else:
            counted.setdefault(kind, []).append(c["verdict"])
    v = together["verdict"]
    tail = "; ".join(
        f"{len(verdicts)} {BESIDES[kind]}: {verdicts.count('PASS')} pass, {verdicts.count('FAIL')} fail"
        for kind in BESIDES
        if (verdicts := counted.get(kind))
    )
    return (
        f"The reruns' bundles judged as one set (`{together['command']}`, the {together['judged_by']['tier']} tier): "
        f"{v['passed']} passed, {v['failed']} failed, {v['skipped']} skipped.\n\n"
        + "\n".join(rows)
        + (f"\n\nBesides: {tail}." if tail else "")
        + "".join(f"\n\nSkipped: {', '.join(f'`{i}`' for i in ids)}: {why}." for why, ids in _skipped(together).items())
    )


NOT_RERUN = "its model is not among the reruns"


def _skipped(together: dict) -> dict[str, list[str]]:
    """The claims about the models that the set skipped, by why (the summary keeps only their count): the
    reason of a claim not judged in the set's tier (`judgement_for`), otherwise NOT_RERUN."""
    judged = {c["id"] for c in together["judged"]}
    claims = expected.load_claims()
    rerun = expected.load_rerun(claims=claims)
    skipped: dict[str, list[str]] = {}
    for entry in claims:
        if entry["kind"] != "mathematics" and entry["id"] not in judged:
            why = judgement_for(entry, together["judged_by"]["tier"], rerun)
            skipped.setdefault(why if isinstance(why, str) else NOT_RERUN, []).append(entry["id"])
    return skipped


def _by_step(stats: dict, steps: int) -> dict[int, dict]:
    """A model's statistics in a run's summary, the run's and the published run's, by step as the posts
    count them (the last map, stored at step STEPS-1, counts as STEPS): (side, statistic) -> value, and
    `maps` -> how far the run's map is from the published one."""
    out: dict[int, dict] = {}
    for side in ("run", "published_seed0"):
        for name, values in stats.get(side, {}).items():
            if name != "final":
                for step in values:
                    out.setdefault(checkpoint_labels([int(step)], steps)[0], {})[(side, name)] = values[step]
    for step, moved in stats.get("maps_against_published_seed0", {}).items():
        out.setdefault(checkpoint_labels([int(step)], steps)[0], {})["maps"] = moved
    return dict(sorted(out.items()))


def _run_of(variant: str, path: Path) -> tuple[dict | None, str]:
    """The kept full-length run of `variant`, or None and the sentence saying why there is none."""
    doc = _kept(path)
    if doc is None:
        return None, _none_yet(path)
    run = next((r for r in doc["runs"].values() if model_key(variant, 0) in r["statistics"]), None)
    return run, f"No full-length rerun of {variant} is kept in `{relative(path)}`."


def _pair(cells: dict, name: str, digits: int) -> str:
    run, published = cells.get(("run", name)), cells.get(("published_seed0", name))
    return "-" if run is None else f"{run:.{digits}f} / " + ("-" if published is None else f"{published:.{digits}f}")


def retrace(variant: str, path: Path = FULL) -> str:
    """A full-length run of `variant` beside the published run: its sentence (retrace_sentence), then at
    every evaluation and telemetry step the validation loss, distinct winners, entropy, and how far its
    maps are from the published ones."""
    run, why = _run_of(variant, path)
    if run is None:
        return why
    rows = [
        f"| {variant}: step | validation loss (rerun / published) | distinct winners of 128 | entropy | map entries that differ (largest difference) |",
        "|---|---|---|---|---|",
    ]
    for step, cells in _by_step(run["statistics"][model_key(variant, 0)], run["steps"]).items():
        moved = cells.get("maps")
        maps = "-" if moved is None else f"{moved['entries_that_differ']:.2%} ({moved['max_abs_difference']:.2g})"
        rows.append(
            f"| {step:,} | {_pair(cells, 'validation_loss', 6)} | {_pair(cells, 'distinct_winners', 4)} "
            f"| {_pair(cells, 'mean_norm_entropy', 6)} | {maps} |"
        )
    return _sentence(variant, run) + "\n\n" + "\n".join(rows)


def retrace_sentence(variant: str, path: Path = FULL) -> str:
    """One sentence: at how many evaluations the rerun's validation loss is the published one's, and how far
    its final maps are from the published ones."""
    run, why = _run_of(variant, path)
    return why if run is None else _sentence(variant, run)


def _sentence(variant: str, run: dict) -> str:
    """retrace_sentence of a kept run."""
    stats = run["statistics"][model_key(variant, 0)]
    ours, theirs = stats["run"]["validation_loss"], stats["published_seed0"]["validation_loss"]
    gaps = {int(s): abs(ours[s] - theirs[s]) for s in theirs if s in ours}
    worst = max(gaps, key=gaps.get)
    final = stats["maps_against_published_seed0"][max(stats["maps_against_published_seed0"], key=int)]
    same = sum(g == 0 for g in gaps.values())
    return (
        f"{variant}: its validation loss equals the published run's, to the six decimals kept, at {same} of the "
        f"{len(gaps)} evaluations (largest difference {gaps[worst]:.6f}, at step {worst:,}); its final maps "
        f"differ from the published ones in {final['entries_that_differ']:.2%} of the entries, by at most "
        f"{final['max_abs_difference']:.2g}."
    )


def final_bands() -> str:
    """Each final-step rerun band (expected/rerun.json) beside every full-length trajectory it was checked
    against (`bands --final`), and whether it covers each."""
    claims = expected.load_claims()
    rerun = expected.load_rerun(claims=claims)
    rows = ["| claim | rerun band | full-length trajectories: value, inside the band or OUTSIDE |", "|---|---|---|"]
    for entry in claims:
        band = rerun.get(entry["id"], {})
        if "measured" in band:
            how = describe(judgement_for(entry, "rerun", rerun))
            rows.append(f"| `{entry['id']}` | {how} | {bands.checked(band['measured'])} |")
    return "\n".join(rows)


def _heads_row(who: str, model: BundleModel, how: Judgement) -> str:
    """One model's row of sweep_heads: its sweep head's largest change, every head's spread, how many inside."""
    largest_LH = stats.scale_sweep(model, head=None).max(0)  # every head at once: (S, L, H) -> (L, H)
    low, mid, high = np.quantile(largest_LH, [0, 0.5, 1])
    inside = sum(passes(float(v), how) for v in largest_LH.flat)
    return (
        f"| {who} | {largest_LH[stats.SWEEP_HEAD]:.3f} | {low:.3f}, {mid:.3f}, {high:.3f} "
        f"| {inside} of {largest_LH.size} |"
    )


def sweep_heads(variant: str, path: Path = FULL) -> str:
    """The scale sweep's largest re-elected share (`sweep.<variant>.max`) on every head of the final model,
    the published bundles' and each kept full-length rerun's: the claim reads one head, by position, and
    its band is judged against the spread the other heads of the same models show."""
    doc = _kept(path)
    if doc is None or "together" not in doc:
        return _none_yet(path)
    from attngeom.base import fetch

    entry = next(e for e in expected.load_claims() if e["id"] == f"sweep.{variant}.max")
    how = judgement_for(entry, "rerun", expected.load_rerun())
    layer, head = stats.SWEEP_HEAD
    rows = [
        f"| {variant}, final model | the sweep's head (layer {layer + 1}, head {head + 1}) | every head: smallest, "
        f"median, largest | heads inside the rerun band {describe(how)} |",
        "|---|---|---|---|",
        _heads_row("the published bundles", load_models(fetch.fetch_bundles(), (variant,))[variant], how),
    ]
    kept = REPO / doc["together"]["bundles"]
    for name, run in doc["runs"].items():
        if model_key(variant, 0) in run["statistics"]:
            rows.append(_heads_row(f"{name} (rerun)", load_models(kept / name, (variant,))[variant], how))
    return "\n".join(rows)


def full_verdict(path: Path = FULL) -> str:
    """One sentence: the full-length reruns judged as one set (in full: `full_claims`), their failing claims named."""
    doc = _kept(path)
    if doc is None or "together" not in doc:
        return _none_yet(path)
    together = doc["together"]
    v = together["verdict"]
    failing = [f"`{c['id']}`" for c in together["judged"] if c["verdict"] == "FAIL"]
    return (
        f"Judged as one set with the {together['judged_by']['tier']} tier (`{together['command']}`): "
        f"{v['passed']} passed, {v['failed']} failed{' (' + ', '.join(failing) + ')' if failing else ''}, "
        f"{v['skipped']} skipped"
        + "".join(
            f" ({', '.join(f'`{i}`' for i in ids)}: {why.split(':')[0]})" for why, ids in _skipped(together).items()
        )
        + "."
    )
