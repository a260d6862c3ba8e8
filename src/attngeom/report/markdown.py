"""The report a reviewer reads: REPORT.md (GitHub), report.json (machine-readable, with
provenance) and results.json (every statistic); index.html is page's, and outputs
writes them all as one set."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from pathlib import Path

from attngeom.base import environment, fetch
from attngeom.base.files import git_commit, machine, shown, versions, write_atomic, write_json_atomic
from attngeom.base.records import Provenance, Report, Results
from attngeom.measures.stats import SWEEP_HEAD
from attngeom.measures.table import TABLE, checkpoint_labels
from attngeom.report import headline
from attngeom.report import trajectory_words as words
from attngeom.report.markdown_text import Code, md_code, md_text, md_wrap


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


def statistics_rows(results: Results) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Per-model statistics, quoted or not: the models, then (label, one cell per model) rows.

    Checkpoints are labelled as the claims count them (table.checkpoint_labels: 12,000 for the
    map stored under step11999).
    """
    models = results["models"]
    first = next(iter(models.values()))
    labels = checkpoint_labels(first["setup"]["checkpoints"], first["setup"]["steps"])
    window = first["setup"]["window"]

    def by_step(label: str, values: Callable[[dict], list], fmt: str) -> list[tuple[str, Callable[[dict], str]]]:
        """One row per checkpoint: a statistic's value at each step, as the claims count the steps."""
        return [
            (f"{label} at step {step:,}", lambda m, i=i: f"{values(m)[i]:{fmt}}" if i < len(values(m)) else "-")
            for i, step in enumerate(labels)
        ]

    rows = [
        (
            "winners moved at t = " + ", ".join(f"{float(t):g}" for t in first["scale_t"]),
            lambda m: ", ".join(f"{v:.1%}" for v in m["scale_changed"].values()),
        ),
        ("mean normalised entropy (final)", lambda m: f"{m['mean_norm_entropy_final']:.4f}"),
        *by_step("mean normalised entropy", lambda m: list(m.get("mean_norm_entropy_by_step", {}).values()), ".4f"),
        *by_step(
            f"distinct winners of {window} (mean over heads)",
            lambda m: [v * m["setup"]["window"] for v in m["occupancy_by_step"].values()],
            ".1f",
        ),
        (
            "distinct winners, final, min / max over heads",
            lambda m: (
                f"{m['occupancy_final_min'] * m['setup']['window']:.0f} / {m['occupancy_final_max'] * m['setup']['window']:.0f}"
            ),
        ),
        *by_step(
            "census head (layer 4, head 1) distinct owners",
            lambda m: list(m["census_head"]["distinct_by_step"].values()),
            "",
        ),
        ("keys inside the others' hull", lambda m: f"{m['keys_inside_hull']} of {m['keys_total']:,}"),
        (
            "winner is the nearest key / the best-aligned key",
            lambda m: f"{m['winner_is_nearest']:.1%} / {m['winner_is_aligned']:.1%}",
        ),
        (
            f"largest change in the 41-scale sweep, the judged head (layer {SWEEP_HEAD[0] + 1}, head {SWEEP_HEAD[1] + 1})",
            _sweep_by_position,
        ),
        ("largest change in the 41-scale sweep, the sharpest head (the author's rule)", _sweep_by_rule),
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


def _sweep_by_position(m: dict) -> str:
    return f"{max(m['scale_sweep']['changed']):.1%}"


def _sweep_by_rule(m: dict) -> str:
    """The sweep on the head the author's export animates: its lowest-entropy head (older results lack it)."""
    sweep = m["scale_sweep"]
    if "sharpest_head" not in sweep:
        return "-"
    layer, head = sweep["sharpest_head"]
    return f"{sweep['sharpest_max_changed']:.1%} (layer {layer + 1}, head {head + 1})"


def statistics_table(results: Results) -> list[str]:
    """Per-model statistics, quoted or not, as Markdown lines."""
    models, rows = statistics_rows(results)
    lines = ["| statistic | " + " | ".join(models) + " |", "| --- |" + " --- |" * len(models)]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    return lines


def preflight_lines(preflight: dict) -> list[str]:
    """The run's fidelity preflight (recorded in its manifest), wrapped; anything but PASS in bold."""
    verdict = str(preflight.get("verdict", "ERROR"))
    mark = "PASS" if verdict == "PASS" else f"**{md_text(verdict)}**"
    return md_wrap(
        [
            f"({preflight.get('steps', '?')} steps on {preflight.get('device', '?')}, against the author's training script; ",
            Code(preflight.get("file", "fidelity.json")),
            ").",
        ],
        lead=f"Fidelity preflight: {mark} ",
    )


def quality_lines(quality: dict) -> list[str]:
    """The quoted quality gap's source, and the bundles' own seed-0 gap on its own line."""
    lines = []
    runs = quality.get("companion")
    if runs:
        per = "; ".join(
            f"{name} {m['mean']:.4f} ± {m['std']:.4f} over seeds {', '.join(map(str, m['seeds']))} "
            f"({', '.join(f'{v:.4f}' for v in m['best_val'])})"
            for name, m in runs["mechanisms"].items()
        )
        lines += md_wrap(
            [
                "judged on the companion's runs ",
                Code(runs["file"]),
                f": mean best validation loss (± population standard deviation, recomputed from each seed): {per}",
            ],
            "- ",
            "  ",
        )
    gaps = quality.get("bundle_gap_to_softmax") or {}
    if gaps:
        lines += md_wrap(
            [
                "seed-0 bundle gap (these bundles' best validation loss, one seed each; a statistic, not the quoted "
                "one): " + ", ".join(f"{name} {gap:.2%} from softmax" for name, gap in gaps.items())
            ],
            "- ",
            "  ",
        )
    return lines


def _spread(summary: dict, fmt: str) -> str:
    """Mean ± standard deviation (min to max, n); one value is only itself."""
    if summary["n"] == 1:
        return f"{summary['mean']:{fmt}} (one value)"
    return f"{summary['mean']:{fmt}} ± {summary['std']:{fmt}} ({summary['min']:{fmt}} to {summary['max']:{fmt}}, n = {summary['n']})"


def _number(value, fmt: str) -> str:
    return "-" if value is None else f"{value:{fmt}}"


def robustness_lines(robust: dict) -> list[str]:
    """The robustness section: theorem counts over every window and seed, then each measured
    statistic's distribution over windows and over seeds beside the published value."""
    if not robust:
        return md_wrap(
            [
                "These bundles hold one window of one seed (no ",
                Code("windows_*.npz"),
                " file, no other seed): the judged values above are all there is. A rerun with extra windows or seeds "
                "adds their distributions here.",
            ]
        )
    first = next(iter(robust.values()))
    lines = [
        *md_wrap(
            [
                "Seed 0's fixed window is the value judged above; here every statistic on every window of every seed "
                f"found (seeds {', '.join(map(str, first['seeds']))}; windows per seed: "
                + "; ".join(
                    f"{v} {', '.join(f's{s}: {w}' for s, w in m['windows'].items())}" for v, m in robust.items()
                )
                + "). Theorem counts are summed over all windows; a theorem must hold on every one. Spreads are mean ± "
                "population standard deviation (min to max)."
            ]
        ),
        "",
        "| model | winners moved under query scaling | keys inside the others' hull |",
        "| --- | --- | --- |",
    ]
    for v, m in robust.items():
        counts = (m["counts"][c] for c in ("scale_moved_rows", "keys_inside_hull"))
        cells = (  # bold only where the posts quote a value for this model (the paper's models) and it differs
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
    one and the ensemble's range (the band derives from it, see `bands`), one item each."""
    lines = []
    for c in claims:
        if "ensemble" not in c:
            continue
        e, run = c["ensemble"], c["measured_value"]
        inside = (
            ""
            if run is None
            else ("; this run inside it" if e["min"] <= run <= e["max"] else "; this run **outside** it")
        )
        lines += md_wrap(
            [
                Code(c["id"]),
                f" ({c['claim']}): this run {c['measured']}, published {e['published']:.6g}; the ensemble of "
                f"{len(e['members'])} members {e['min']:.4g} to {e['max']:.4g} ({e['mean']:.4g} ± {e['std']:.2g}), from ",
                Code(e["source"]),
            ],
            "- ",
            "  ",
        )
        lines[-1] += inside
    return lines


def trajectory_lines(report: Report) -> list[str]:
    """The section beside every measured trajectory, in plain words: what a trajectory and a band are, each
    trajectory statistic against the trajectories at its step, and each comparison on every pairing."""
    section = report.get("trajectories")
    if not section:
        return []
    claims = {c["id"]: c for c in report["claims"]}
    lines = [*md_wrap([words.MEANING]), "", *md_wrap([words.intro(section)]), ""]
    for cid, one in section["claims"].items():
        said = words.statistic_sentence(one) if one["kind"] == "statistic" else words.comparison_text(one)
        lines += md_wrap([Code(cid), f" ({claims[cid]['claim']}): {said}"], "- ", "  ")
    return lines


def claims_table(claims: list[dict]) -> list[str]:
    """One row per claim, short: id, kind, quoted, measured, tolerance, verdict (the details follow it)."""
    lines = ["| claim | kind | quoted | measured | tolerance | verdict |", "| --- | --- | --- | --- | --- | --- |"]
    mark = {"PASS": "PASS", "FAIL": "**FAIL**", "SKIP": "SKIP"}
    for c in claims:
        cells = (_short(c.get(k, "-")) for k in ("kind", "quoted", "measured", "tolerance"))
        lines.append(f"| {md_code(c['id'], cell=True)} | " + " | ".join(cells) + f" | {mark[c['verdict']]} |")
    return lines


def _short(value: object, most: int = 24) -> str:
    """A table cell's text, cut to `most` characters (the details below the table give it whole)."""
    text = str(value)
    return md_text(text if len(text) <= most else text[: most - 1] + "…")


def claim_details(c: dict) -> list[str]:
    """A claim's quote, its place in the post, how it is judged and why, as text below the table."""
    judged = (
        f"Judged: {c['expected']} ({c['tolerance_reason']}); measured {c['measured']}."
        if c["verdict"] != "SKIP"
        else f"Skipped: {c['tolerance_reason']}" + ("" if c["measured"] == "-" else f"; measured {c['measured']}") + "."
    )
    lines = [f"### {md_code(c['id'])}: {c['verdict']}", "", *md_wrap([c["claim"].rstrip(".") + "."]), ""]
    lines += [*md_wrap([f"\u201c{c['quote']}\u201d ({c['source']})"], "> ", "> "), ""]
    lines += md_wrap([judged + " Computed by ", Code(c.get("function", "-")), "."])
    if c.get("cause"):
        lines += ["", *md_wrap([f"Why it fails: {c['cause']}."])]
    return [*lines, ""]


def opening(report: Report) -> list[str]:
    """The first screen: the verdict and how each kind fared, why each failure fails, what was skipped
    and why, then what the evidence is (headline's sentences)."""
    said, verdict = headline.headline(report), report["summary"]["verdict"]
    rest = said[0].removeprefix(verdict)
    lines = [*md_wrap([rest], lead=f"**{md_text(verdict)}**" + " " * rest.startswith(" ")), ""]
    for sentence in said[1:]:
        lines += [*md_wrap([sentence]), ""]
    failures = headline.failure_lines(report["claims"])
    if failures:
        lines += [f"Why {'each' if len(failures) > 1 else 'it'} fails:", ""]
        for cid, why in failures:
            lines += md_wrap([Code(cid), f": {why}"], "- ", "  ")
        lines.append("")
    skipped = headline.skip_groups(report["claims"])
    if skipped:
        for why, ids in skipped:
            lines += md_wrap([headline.skip_sentence(why, ids) + "."], "- ", "  ")
        lines.append("")
    for w in report.get("warnings", []):
        lines += [*md_wrap([f"Warning: {w}"]), ""]
    if "evidence" in report:
        lines += [*md_wrap([f"Evidence: {report['evidence']['line'].removeprefix('evidence: ')}."]), ""]
    if report.get("preflight"):
        lines += [*preflight_lines(report["preflight"]), ""]
    return lines


def markdown(report: Report, results: Results) -> str:
    """REPORT.md: the first screen (`opening`), one short row per claim, each claim's details, then every
    model's statistics and where everything came from."""
    lines = ["# attngeom: verification report", "", *opening(report), "## Claims", "", *claims_table(report["claims"])]
    lines += ["", "## What each claim says, and how it is judged", ""]
    for c in report["claims"]:
        lines += claim_details(c)
    if spread := ensemble_lines(report["claims"]):
        lines += ["## Beside the ensemble of trajectories", "", *spread, ""]
    if spread := trajectory_lines(report):
        lines += ["## Beside other trajectories of the same training", "", *spread, ""]
    if results["models"]:
        lines += ["## Statistics per model", "", *statistics_table(results), ""]
    if quality := quality_lines(results.get("quality", {})):
        lines += ["## Quality", "", *quality, ""]
    if "robustness" in results:
        lines += ["## Robustness: every window and seed", "", *robustness_lines(results["robustness"]), ""]
    p = report["provenance"]
    lines += [
        "## Provenance",
        "",
        *md_wrap(["command: ", Code(p["command"])], "- ", "  "),
        *md_wrap([f"date: {p['date']}"], "- ", "  "),
        *md_wrap([f"machine: {p['machine']}"], "- ", "  "),
        *md_wrap([f"package: attngeom {p['versions'].get('attngeom', '?')}, git commit {p['git_commit']}"], "- ", "  "),
        *md_wrap(["versions: " + ", ".join(f"{k} {v}" for k, v in p["versions"].items())], "- ", "  "),
        *md_wrap([f"environment: {environment.describe(p.get('environment'))}"], "- ", "  "),
        *md_wrap(
            ["expected values: "] + [x for k, v in p["expected_sha256"].items() for x in (f"{k} ", Code(v), "; ")][:-1],
            "- ",
            "  ",
        ),
        "- inputs:",
    ]
    sources = p.get("sources", {})
    for path, sha in p["inputs"].items():
        lines += md_wrap([Code(path)], "  - ", "    ")
        lines += md_wrap(["sha256 ", Code(sha), source_note(sources.get(path))], "    ", "    ")
    return "\n".join(lines) + "\n"


def source_note(origin: dict | None) -> str:
    """Where an input came from, as a reviewer reads it (plain text: each report quotes it its own way).
    Every input matched its pinned sha256, wherever it came from."""
    if not origin:
        return ""
    if origin["source"] == "network":
        return f", from the network ({origin['url']})"
    if origin["source"] == "mirror":
        return f", from the mirror {origin['mirror']} ({origin['url']})"
    if origin["source"] == "local":
        return ", a local file"
    if not origin.get("fetched"):
        return f", from the download cache ({origin['url']}; where it was fetched from was not recorded)"
    where = f"the mirror {origin['mirror']}" if origin.get("fetched_from") == "mirror" else "the network"
    return f", from the download cache: fetched from {where} on {origin['fetched']} ({origin['url']})"


def write_report(out: Path, report: Report, results: Results) -> None:
    """Write REPORT.md, report.json and results.json into `out`."""
    write_json_atomic(out / "results.json", results)  # NaN refused, as in every JSON the package writes
    write_json_atomic(out / "report.json", report)
    write_atomic(out / "REPORT.md", markdown(report, results))
