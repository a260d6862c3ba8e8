"""The default job: evidence -> numbers -> judgement -> report.

Loads the bundles (the author's published ones unless a folder is given), says on one line what
they are and so how they are judged, computes every statistic, judges every claim in expected/
against it, writes the report and prints one line per claim and a closing `N passed, M failed`
line. Exit status: 0 all judged claims pass, 1 a claim fails, 2 unusable input (raised as
InputError before anything is written); the report's files are replaced together or not at all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from attngeom.base import blocks, fetch
from attngeom.base.errors import EXIT_FAIL, EXIT_PASS, one_line
from attngeom.base.files import REPO, sha256_file, shown
from attngeom.base.records import EvidenceRecord, Report
from attngeom.base.variants import PUBLISHED
from attngeom.bundles import evidence, layout
from attngeom.judgement import expected, judge, robustness, trajectories
from attngeom.measures import stats, table
from attngeom.measures.results import compute_results, mathematics_results
from attngeom.report import headline, markdown, outputs, page


def judge_evidence(
    root: Path, models: dict, tier: str | None = None, listing: layout.Listing | None = None
) -> tuple[evidence.Evidence, str, list[str], dict[Path, str]]:
    """What the bundles are, the tier used (the override, else the evidence's), warnings, input hashes
    (`listing`: the folder's files, searched once already)."""
    inputs = sorted({path for m in models.values() for path in m.files.values()})
    hashes = {path: sha256_file(path) for path in inputs}
    ev = evidence.describe(models, root, hashes, listing)
    warnings = list(ev.warnings)
    if tier is not None and tier != ev.tier:
        warnings.append(f"--tier {tier} overrides the {ev.tier} tier chosen for these bundles ({ev.kind}: {ev.why})")
    return ev, tier or ev.tier, warnings, hashes


def measured_trajectories(
    ev: evidence.Evidence, models: dict, hashes: dict[Path, str]
) -> tuple[list, list[str], list[Path]]:
    """The trajectories measured of the published runs' training (expected/measured/, the author's
    telemetry reruns, and the judged bundles when they are a rerun of it whose models expected/measured/
    does not keep already: `hashes`, their files' sha256), where they were read (as the report names them), and the
    files read: what the report's `trajectories` section (trajectories.section) sets each trajectory
    statistic beside."""
    measured, files = trajectories.read_measured()
    names = fetch.TELEMETRY_BUNDLES
    author, author_files = trajectories.telemetry_reruns(fetch.fetch_bundles(names), names)
    own = (
        [trajectories.of_model(m, "this run", final=ev.scope == "all") for m in models.values()]
        if ev.kind in evidence.SAME_TRAINING
        and not {hashes[m.files["geom"]] for m in models.values()} <= trajectories.kept_bundles()
        else []
    )
    sources = [shown(p.relative_to(REPO) if p.is_relative_to(REPO) else p) for p in files]
    sources += [f"the author's telemetry reruns ({', '.join(names)})"] + ["this run"] * bool(own)
    return [*measured, *author, *own], sources, [*files, *author_files]


def judge_bundles(
    root: Path,
    tier: str | None = None,
    variants: tuple[str, ...] | None = PUBLISHED,
    on_evidence: Callable[[evidence.Evidence, list[str]], None] | None = None,
) -> tuple[Report, dict]:
    """The judgement of the bundles in `root` and every statistic behind it, nothing written.

    `variants`: the models to judge (None: each published variant the folder holds, `layout.held_variants`).
    The bundles say what they are (evidence.describe), which sets the tier and the claims that apply;
    `tier` overrides the tier, and a mismatch is a warning in the report. `on_evidence` hears what the
    bundles are and the warnings as soon as they are known, before the statistics are computed.
    """
    listing = layout.list_bundles(root)  # the one search of the folder
    variants = layout.held_variants(root, listing) if variants is None else variants
    models = layout.load_models(root, variants, heads=stats.FIXED_HEADS, listing=listing)
    ev, tier, warnings, hashes = judge_evidence(root, models, tier, listing)
    if on_evidence is not None:
        on_evidence(ev, warnings)
    companion_runs = fetch.fetch_companion()
    claims = expected.load_claims()  # parsed once, for the robustness pass and the judgement
    plain = {name: table.Measures.of(m) for name, m in models.items()}
    with blocks.one_blas_thread():
        # the mathematics needs no bundle: it runs beside the windows pass and the measured trajectories
        (robust, robust_inputs), mathematics, (measured, sources, spread_inputs) = blocks.each(
            lambda work: work(),
            [
                # the posts quote the paper's models only: a smaller model's statistics stand beside no quote
                lambda: robustness.measure(listing, models, plain, claims if ev.scope != "smoke" else []),
                mathematics_results,
                # beside the trajectories of the published runs' training: not a smoke run's
                lambda: measured_trajectories(ev, models, hashes) if ev.scope != "smoke" else ([], [], []),
            ],
        )
        results = {**compute_results(models, companion_runs, plain, mathematics), "robustness": robust}
    reached = judge.steps_reached(ev.scope, ev.stopped_after)  # rerun.json's steps, read once
    rows = judge.judge_all(results, tier, ev.scope, claims, reached)
    left_out = judge.left_out_line(judge.judged_in(tier, claims)[1])
    spread = trajectories.section(claims, rows, measured, sources, expected.load_rerun(claims=claims))
    if ev.scope == "truncated":  # a stopped run stands beside the steps it reached
        spread = trajectories.reached(spread, ev.stopped_after)
    warnings += judge.separation_notes(reached)
    unhashed = [p for p in dict.fromkeys([*robust_inputs, companion_runs, *spread_inputs]) if p not in hashes]
    inputs = {**hashes, **dict(zip(unhashed, blocks.each(sha256_file, unhashed)))}
    doc = Report(
        summary=judge.summarise(rows),
        tier=tier,
        evidence=EvidenceRecord(
            kind=ev.kind, why=ev.why, scope=ev.scope, stopped_after=ev.stopped_after, steps=ev.steps, line=ev.line()
        ),
        warnings=warnings,
        preflight=ev.preflight,
        bundles=shown(root),
        claims=rows,
        **({"left_out": left_out} if left_out else {}),
        # a smoke run trains another model: no trajectory of the published runs' training stands beside it
        **({"trajectories": spread} if ev.scope != "smoke" and spread["claims"] else {}),
        provenance=markdown.provenance(inputs, expected.sha256_of()),
    )
    return doc, results


def run_verify(
    bundles_root: Path | None,
    out: Path,
    tier: str | None = None,
    variants: tuple[str, ...] | None = PUBLISHED,
) -> int:
    """Verify a folder of bundles (None: the author's published bundles), write the report and print the
    verdicts (`judge_bundles`)."""
    outputs.check_out(Path(out))
    root = Path(bundles_root) if bundles_root is not None else fetch.fetch_bundles()

    def said(ev: evidence.Evidence, warnings: list[str]) -> None:
        print(ev.line())
        for w in warnings:
            print(f"warning: {one_line(w)}", file=sys.stderr)

    doc, results = judge_bundles(root, tier, variants, said)
    outputs.write_verified(Path(out), doc, results)
    for line in closing_lines(doc, Path(out)):
        print(line)
    return EXIT_PASS if doc["summary"]["failed"] == 0 else EXIT_FAIL


def closing_lines(doc: Report, out: Path) -> list[str]:
    """What the terminal shows, as pytest does: a line per judged claim, the skipped ones grouped by their
    reason, where the report is, each failure's one-line why, how each kind fared, and the counts last."""
    rows = [r for r in doc["claims"] if r["verdict"] != "SKIP"]
    width = max((len(r["id"]) for r in rows), default=0)
    lines = [
        f"{r['verdict']:4}  {r['id']:<{width}}  measured {r['measured']:<14} expected {r['expected']}" for r in rows
    ]
    lines += [f"SKIP  {headline.skip_sentence(why, ids)}" for why, ids in headline.skip_groups(doc["claims"])]
    lines.append(f"report: {shown(out / 'REPORT.md')}; the page: {shown(out / page.INDEX)}")
    lines += [f"why {cid} fails: {why}" for cid, why in headline.failure_lines(doc["claims"])]
    lines += headline.headline(doc)[1:]
    s, stop = doc["summary"], doc["evidence"]["stopped_after"]
    steps = doc["evidence"].get("steps")
    return [
        *lines,
        f"{s['passed']} passed, {s['failed']} failed"
        + (f", {s['skipped']} skipped" if s["skipped"] else "")
        + ("" if stop is None else f" (stopped after step {stop:,}" + (f" of {steps:,})" if steps else ")")),
    ]
