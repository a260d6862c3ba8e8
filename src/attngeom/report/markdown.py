"""The report a reviewer reads: REPORT.md (GitHub), report.json (machine-readable, with
provenance) and results.json (every statistic); index.html is page's, and outputs
writes them all as one set."""

from __future__ import annotations

import datetime as dt
import re
import sys
from collections.abc import Callable
from pathlib import Path

from attngeom.base import environment, fetch
from attngeom.base.files import git_commit, machine, shown, versions, write_atomic, write_json_atomic
from attngeom.base.records import Provenance, Report, Results
from attngeom.judgement.judge import fmt
from attngeom.measures.table import TABLE, checkpoint_labels


def provenance(inputs: dict[Path, str], expected_sha: dict[str, str]) -> Provenance:
    """Where the judgement came from: inputs (path -> sha256, hashed once by the caller) and where each
    came from, expected values, software, machine, date, command."""
    return {
        "inputs": {shown(p): sha for p, sha in inputs.items()},
        "sources": {shown(p): fetch.origin(p) for p in inputs},
        "expected_sha256": expected_sha,
        "versions": (used := versions()),
        "environment": environment.against_lock(used),
        "git_commit": git_commit(),
        "machine": machine(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["reproduce.sh", *map(shown, sys.argv[1:])]),
    }


_BREAKS = "\n\r\t\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # what ends a line (str.splitlines), and tabs
_ONE_LINE = str.maketrans(dict.fromkeys(_BREAKS, " "))
# CommonMark 2.4: a backslash before any ASCII punctuation makes it the literal character. These can
# open inline structure or HTML mid-line (code, emphasis, links, raw HTML, entities, GFM cells,
# strikethrough, GitHub math); block structure starts only a line, and values never do.
_TEXT = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|~&$"} | dict.fromkeys(_BREAKS, " "))


def md_text(value: object) -> str:
    """`value` as literal Markdown text on one line, safe in a paragraph, a list item or a table cell."""
    return str(value).translate(_TEXT)


def md_code(value: object, cell: bool = False) -> str:
    """`value` as a code span on one line (in a table `cell`, with `|` as `\\|`).

    CommonMark 6.1: a span's fence is a backtick run that the content does not hold, so one longer than
    its longest; one space is stripped from each end when both ends are spaces, hence the padding.
    GFM tables split cells on `|` even inside code spans, and unescape `\\|` before the span is parsed.
    """
    text = str(value).translate(_ONE_LINE) or " "
    text = text.replace("|", "\\|") if cell else text
    fence = "`" * (1 + max(map(len, re.findall("`+", text)), default=0))
    pad = " " if text.strip(" ") and (text[0] in "` " or text[-1] in "` ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def statistics_rows(results: Results) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Per-model statistics, quoted or not: the models, then (label, one cell per model) rows.

    Checkpoints are labelled as the claims count them (table.checkpoint_labels: 12,000 for the
    map stored under step11999).
    """
    models = results["models"]
    first = next(iter(models.values()))
    at = ", ".join(f"{s:,}" for s in checkpoint_labels(first["setup"]["checkpoints"], first["setup"]["steps"]))
    rows = [
        (
            "winners moved at t = " + ", ".join(f"{float(t):g}" for t in first["scale_t"]),
            lambda m: ", ".join(f"{v:.1%}" for v in m["scale_changed"].values()),
        ),
        ("mean normalised entropy (final)", lambda m: f"{m['mean_norm_entropy_final']:.4f}"),
        (
            f"mean normalised entropy at steps {at}",
            lambda m: " → ".join(f"{v:.4f}" for v in m.get("mean_norm_entropy_by_step", {}).values()) or "-",
        ),
        (
            f"distinct winners of 128 at steps {at} (mean over heads)",
            lambda m: " → ".join(f"{v * m['setup']['window']:.1f}" for v in m["occupancy_by_step"].values()),
        ),
        (
            "distinct winners, final, min / max over heads",
            lambda m: (
                f"{m['occupancy_final_min'] * m['setup']['window']:.0f} / {m['occupancy_final_max'] * m['setup']['window']:.0f}"
            ),
        ),
        (
            f"census head (layer 4, head 1) distinct owners at steps {at}",
            lambda m: " → ".join(str(v) for v in m["census_head"]["distinct_by_step"].values()),
        ),
        ("keys inside the others' hull", lambda m: f"{m['keys_inside_hull']} of {m['keys_total']:,}"),
        (
            "winner is the nearest key / the best-aligned key",
            lambda m: f"{m['winner_is_nearest']:.1%} / {m['winner_is_aligned']:.1%}",
        ),
        ("largest change in the 41-scale sweep (layer 1, head 1)", lambda m: f"{max(m['scale_sweep']['changed']):.1%}"),
        (
            "best validation loss, nats (bits per character)",
            lambda m: "no evaluation yet" if m["best_val"] is None else f"{m['best_val']:.4f} ({m['bpc']:.3f})",
        ),
        *(  # the table's statistics results.json holds under their own names
            (s.label, lambda m, key=key, s=s: f"{m[key]:{s.fmt}}" if key in m else "-")
            for key, s in TABLE.items()
            if s.read is None
        ),
    ]
    return list(models), [(label, [get(m) for m in models.values()]) for label, get in rows]


def statistics_table(results: Results) -> list[str]:
    """Per-model statistics, quoted or not, as Markdown lines."""
    models, rows = statistics_rows(results)
    lines = ["| statistic | " + " | ".join(models) + " |", "| --- |" + " --- |" * len(models)]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    return lines


def failing_lines(claims: list[dict]) -> list[str]:
    """The failing claims, one line each with what was measured against what was expected."""
    failing = [c for c in claims if c["verdict"] == "FAIL"]
    if not failing:
        return []
    lines = [f"Failing claims ({len(failing)}):", ""]
    lines += [
        f"- {md_code(c['id'])}: {md_text(c['claim'])}: measured {md_text(c['measured'])}, expected {md_text(c['expected'])}"
        for c in failing
    ]
    return [*lines, ""]


def preflight_line(preflight: dict) -> str:
    """The run's fidelity preflight (recorded in its manifest) in one line."""
    verdict = preflight.get("verdict", "ERROR")
    mark = "PASS" if verdict == "PASS" else f"**{md_text(verdict)}**"
    return (
        f"Fidelity preflight: {mark} ({md_text(preflight.get('steps', '?'))} steps on {md_text(preflight.get('device', '?'))}, "
        f"against the author's training script; {md_code(preflight.get('file', 'fidelity.json'))})."
    )


def quality_lines(quality: dict) -> list[str]:
    """The quoted quality gap's source, and the bundles' own seed-0 gap on its own line."""
    lines = []
    runs = quality.get("companion")
    if runs:
        per = "; ".join(
            f"{md_text(name)} {m['mean']:.4f} ± {m['std']:.4f} over seeds {', '.join(map(str, m['seeds']))} "
            f"({', '.join(f'{v:.4f}' for v in m['best_val'])})"
            for name, m in runs["mechanisms"].items()
        )
        lines.append(
            f"- judged on the companion's runs {md_code(runs['file'])}: mean best validation loss (± population "
            f"standard deviation, recomputed from each seed): {per}"
        )
    gaps = quality.get("bundle_gap_to_softmax") or {}
    if gaps:
        lines.append(
            "- seed-0 bundle gap (these bundles' best validation loss, one seed each; a statistic, not the "
            "quoted one): " + ", ".join(f"{md_text(name)} {gap:.2%} from softmax" for name, gap in gaps.items())
        )
    return lines


def _spread(summary: dict, fmt: str) -> str:
    return f"{summary['mean']:{fmt}} ± {summary['std']:{fmt}} ({summary['min']:{fmt}} to {summary['max']:{fmt}}, n = {summary['n']})"


def _number(value, fmt: str) -> str:
    return "-" if value is None else f"{value:{fmt}}"


def robustness_lines(robust: dict) -> list[str]:
    """The robustness section: theorem counts over every window and seed, then each measured
    statistic's distribution over windows and over seeds beside the published value."""
    if not robust:
        return [
            (
                "These bundles hold one window of one seed (no `windows_*.npz` file, no other seed): the judged "
                "values above are all there is. A rerun with extra windows or seeds adds their distributions here."
            )
        ]
    first = next(iter(robust.values()))
    lines = [
        "Seed 0's fixed window is the value judged above; here every statistic on every window of every seed found "
        f"(seeds {', '.join(map(str, first['seeds']))}; windows per seed: "
        + "; ".join(f"{v} {', '.join(f's{s}: {w}' for s, w in m['windows'].items())}" for v, m in robust.items())
        + "). Theorem counts are summed over all windows; a theorem must hold on every one. Spreads are mean ± "
        "population standard deviation (min to max).",
        "",
        "| model | winners moved under query scaling | keys inside the others' hull |",
        "| --- | --- | --- |",
    ]
    for v, m in robust.items():
        counts = (m["counts"][c] for c in ("scale_moved_rows", "keys_inside_hull"))
        cells = (
            f"**{c['count']:,} of {c['out_of']:,}** (the published value is {c['published']})"
            if c["published"] is not None and c["count"] != c["published"]
            else f"{c['count']:,} of {c['out_of']:,}"
            for c in counts
        )
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| model | statistic | published | seed 0, fixed window | over all windows | over seeds (fixed window) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for v, m in robust.items():
        for stat in m["statistics"].values():
            fmt = ".3g" if abs(stat["all_windows"]["max"]) < 1 else ".1f"
            lines.append(
                f"| {v} | {md_text(stat['label'])} | {_number(stat['published'], fmt)} | {stat['fixed_window_seed0']:{fmt}} "
                f"| {_spread(stat['all_windows'], fmt)} | {_spread(stat['over_seeds'], fmt)} |"
            )
    return lines


def ensemble_lines(claims: list[dict]) -> list[str]:
    """The statistics of a stopped run that have a measured ensemble: the run's value beside the published
    one and the ensemble's range (the band derives from it, see `bands`)."""
    rows = [c for c in claims if "ensemble" in c]
    if not rows:
        return []
    lines = [
        "| statistic | this run | published | ensemble: members, range (mean ± std) | run in range | source |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in rows:
        e, run = c["ensemble"], c["measured_value"]
        inside = "-" if run is None else ("yes" if e["min"] <= run <= e["max"] else "**no**")
        lines.append(
            f"| {md_text(c['claim'])} ({md_code(c['id'], cell=True)}) | {md_text(c['measured'])} | {e['published']:.6g} "
            f"| {len(e['members'])}: {e['min']:.4g} to {e['max']:.4g} ({e['mean']:.4g} ± {e['std']:.2g}) | {inside} "
            f"| {md_code(e['source'], cell=True)} |"
        )
    return lines


def _stands(s: dict) -> str:
    """Where a quoted value stands among the trajectories' values (`robustness.spread`)."""
    if s["published_inside"]:
        z = s["published_in_std"]
        return "inside their range" + ("" if z is None else f" ({z:+.1f} sd from their mean)")
    return "above every one" if s["published"] > s["max"] else "below every one"


TRAJECTORY_COLUMNS = (
    "claim",
    "step",
    "quoted",
    "these bundles",
    "trajectories: number, values",
    "the quote stands",
    "within the quote's tolerance",
    "within the rerun band",
)
"""The columns of the table of statistics beside the measured trajectories: the claim, then `trajectory_cells`."""


def trajectory_cells(one: dict) -> list[str]:
    """A statistic claim beside the measured trajectories (trajectories.statistic_spread), as the cells the
    report shows: step, quoted, these bundles, the trajectories, where the quote stands, within the quote, and
    within the rerun band (the judged bundles' value first: "inside" or "outside", then the trajectories')."""
    step = "-" if one["step"] is None else f"{one['step']:,}"
    head = [step, fmt(one["quoted"]), "-" if one["judged"] is None else fmt(one["judged"])]
    if "spread" not in one:
        return [*head, f"none: {one['none']}", "-", "-", "-"]
    s, n = one["spread"], len(one["values"])
    values = fmt(s["min"]) if s["min"] == s["max"] else f"{fmt(s['min'])} to {fmt(s['max'])}"
    band = one.get("rerun_band")
    in_band = "-" if band is None else f"{band['covers']} of {n}"
    if band is not None and one["judged"] is not None:
        in_band = f"these bundles {'inside' if band['judged_inside'] else 'outside'}; {in_band}"
    return [*head, f"{n}: {values}", _stands(s), f"{one['within_quote']} of {n}", in_band]


def comparison_text(one: dict) -> str:
    """A comparison beside the measured trajectories (trajectories.comparison_spread), in one sentence per step."""
    parts = []
    for row in one["steps"]:
        at = f"at step {row['step']:,}" + (" (quoted)" if row["step"] == one["step"] else "")
        if not row["pairings"]:
            counts = ", ".join(f"{m} {n}" for m, n in row["measured"].items())
            parts.append(f"{at}: no pairing of trajectories measured (trajectories there: {counts})")
            continue
        ranges = "; ".join(
            f"{m} ({max(r['n'] for r in by_key.values())}): "  # the trajectories its pairings used
            + ", ".join(
                f"{(TABLE[k].per_step or k).replace('_', ' ')} {fmt(r['min'])}"
                + ("" if r["min"] == r["max"] else f" to {fmt(r['max'])}")
                for k, r in by_key.items()
            )
            for m, by_key in row["ranges"].items()
        )
        verdict = (
            "holds on every one" if row["held"] == row["pairings"] else f"fails on {row['pairings'] - row['held']}"
        )
        parts.append(f"{at}: {verdict} of {row['pairings']} pairings ({ranges})")
    return ". ".join(parts[:1] + [p[0].upper() + p[1:] for p in parts[1:]]) + "."


def trajectory_lines(report: Report) -> list[str]:
    """The section beside every measured trajectory: each trajectory statistic's spread at its step, and
    whether each comparison holds on every pairing of trajectories."""
    section = report.get("trajectories")
    if not section:
        return []
    claims = {c["id"]: c for c in report["claims"]}
    lines = [
        "Each quoted statistic of one trajectory, on every trajectory of the same training measured at its step, "
        f"and each comparison on every pairing of them ({len(section['trajectories'])} trajectories from "
        + ", ".join(map(md_text, section["sources"]))
        + "). The verdicts above judge the author's numbers; this shows how far they move from one trajectory "
        "to another.",
        "",
        "| " + " | ".join(TRAJECTORY_COLUMNS) + " |",
        "|" + " --- |" * len(TRAJECTORY_COLUMNS),
    ]
    for cid, one in section["claims"].items():
        if one["kind"] == "statistic":
            cells = " | ".join(map(md_text, trajectory_cells(one)))
            lines.append(f"| {md_text(claims[cid]['claim'])} ({md_code(cid, cell=True)}) | {cells} |")
    lines.append("")
    lines += [
        f"- {md_code(cid)}: {md_text(comparison_text(one))}"
        for cid, one in section["claims"].items()
        if one["kind"] == "comparison"
    ]
    return lines


def markdown(report: Report, results: Results) -> str:
    """REPORT.md: the verdict, one table row per claim, then every model's statistics."""
    s = report["summary"]
    lines = [
        "# attngeom: verification report",
        "",
        f"**{s['verdict']}**: {s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped "
        f"(tier: {md_text(report['tier'])}; {md_text(report['provenance']['date'])}).",
        "",
        *failing_lines(report["claims"]),
        *[f"Warning: {md_text(w)}" + "\n" for w in report.get("warnings", [])],
    ]
    if "evidence" in report:
        lines += [f"Evidence: {md_text(report['evidence']['line'].removeprefix('evidence: '))}.", ""]
    if report.get("preflight"):
        lines += [preflight_line(report["preflight"]), ""]
    lines += [
        "| verdict | claim | kind | quote (place in the post) | expected | measured | tolerance reason |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    stale = [path for path, o in report["provenance"].get("sources", {}).items() if o.get("stale")]
    if stale:
        lines[4:4] = [f"Note: {len(stale)} input(s) came from a stale download cache (see Provenance).", ""]
    for c in report["claims"]:
        mark = {"PASS": "PASS", "FAIL": "**FAIL**", "SKIP": "SKIP"}[c["verdict"]]
        lines.append(
            f"| {mark} | {md_text(c['claim'])} ({md_code(c['id'], cell=True)}) | {md_text(c.get('kind', '-'))} "
            f'| "{md_text(c["quote"])}" ({md_text(c["source"])}) '
            f"| {md_text(c['expected'])} | {md_text(c['measured'])} | {md_text(c['tolerance_reason'])} |"
        )
    if spread := ensemble_lines(report["claims"]):
        lines += ["", "## Beside the ensemble of trajectories", "", *spread]
    if spread := trajectory_lines(report):
        lines += ["", "## Beside every measured trajectory", "", *spread]
    if results["models"]:
        lines += ["", "## Statistics per model", "", *statistics_table(results)]
    if quality := quality_lines(results.get("quality", {})):
        lines += ["", "## Quality", "", *quality]
    if "robustness" in results:
        lines += ["", "## Robustness: every window and seed", "", *robustness_lines(results["robustness"])]
    p = report["provenance"]
    lines += [
        "",
        "## Provenance",
        "",
        f"- command: {md_code(p['command'])}",
        f"- machine: {md_text(p['machine'])}",
        f"- package: attngeom {md_text(p['versions'].get('attngeom', '?'))}, git commit {md_text(p['git_commit'])}",
        "- versions: " + ", ".join(f"{md_text(k)} {md_text(v)}" for k, v in p["versions"].items()),
        f"- environment: {md_text(environment.describe(p.get('environment')))}",
        "- expected values: " + ", ".join(f"{md_text(k)} {md_code(v)}" for k, v in p["expected_sha256"].items()),
        "- inputs:",
    ]
    sources = p.get("sources", {})
    lines += [
        f"  - {md_code(path)}: {md_code(sha)}{source_note(sources.get(path), md_text, md_code)}"
        for path, sha in p["inputs"].items()
    ]
    return "\n".join(lines) + "\n"


def source_note(origin: dict | None, text: Callable[[object], str] = str, code: Callable[[object], str] = str) -> str:
    """Where an input came from, as a reviewer reads it (a stale cache entry says so); its values quoted
    by `text` and its paths by `code`: plain by default (index.html escapes the note itself), REPORT.md
    passes md_text and md_code."""
    if not origin:
        return ""
    if origin["source"] == "network":
        return f", from the network ({text(origin['url'])})"
    if origin["source"] == "mirror":
        return f", from the mirror {code(origin['mirror'])} ({text(origin['url'])})"
    if origin["source"] == "local":
        return ", a local file"
    where = f"the mirror {code(origin['mirror'])}" if origin.get("fetched_from") == "mirror" else "the network"
    note = (
        f", from the cache (fetched from {where}, {text(origin['url'])}, on {text(origin['fetched'])})"
        if origin.get("fetched")
        else ""
    )
    return note + (f"; **stale cache**: {text(origin['stale'])}" if origin.get("stale") else "")


def write_report(out: Path, report: Report, results: Results) -> None:
    """Write REPORT.md, report.json and results.json into `out`."""
    write_json_atomic(out / "results.json", results)  # NaN refused, as in every JSON the package writes
    write_json_atomic(out / "report.json", report)
    write_atomic(out / "REPORT.md", markdown(report, results))
