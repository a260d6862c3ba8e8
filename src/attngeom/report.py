"""The report a reviewer reads: REPORT.md (GitHub), report.json (machine-readable, with
provenance) and results.json (every statistic). Files are written atomically."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path

from attngeom.files import git_commit, sha256_file, versions, write_atomic

def provenance(inputs: list[Path], expected_sha: dict[str, str]) -> dict:
    """Where the judgement came from: inputs, expected values, software, machine, date, command."""
    return {
        "inputs": {str(p): sha256_file(p) for p in inputs},
        "expected_sha256": expected_sha,
        "versions": versions(),
        "git_commit": git_commit(),
        "machine": f"{platform.platform()} ({platform.machine()}, {os.cpu_count()} CPUs)",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["reproduce.sh", *sys.argv[1:]]),
    }


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").replace("\t", " ")


def statistics_table(results: dict) -> list[str]:
    """Per-model statistics, quoted or not, as Markdown lines."""
    models = results["models"]
    rows = [
        ("winners moved at t = " + ", ".join(f"{float(t):g}" for t in next(iter(models.values()))["scale_t"]),
         lambda m: ", ".join(f"{v:.1%}" for v in m["scale_changed"].values())),
        ("mean normalised entropy (final)", lambda m: f"{m['mean_norm_entropy_final']:.4f}"),
        ("distinct winners of 128 by checkpoint (mean over heads)",
         lambda m: " → ".join(f"{v * m['setup']['window']:.1f}" for v in m["occupancy_by_step"].values())),
        ("distinct winners, final, min / max over heads",
         lambda m: f"{m['occupancy_final_min'] * m['setup']['window']:.0f} / {m['occupancy_final_max'] * m['setup']['window']:.0f}"),
        ("census head (layer 4, head 1) distinct owners by checkpoint",
         lambda m: " → ".join(str(v) for v in m["census_head"]["distinct_by_step"].values())),
        ("keys inside the others' hull", lambda m: f"{m['keys_inside_hull']} of {m['keys_total']:,}"),
        ("winner is the nearest key / the best-aligned key", lambda m: f"{m['winner_is_nearest']:.1%} / {m['winner_is_aligned']:.1%}"),
        ("largest change in the 41-scale sweep (layer 1, head 1)", lambda m: f"{max(m['scale_sweep']['changed']):.1%}"),
        ("best validation loss (bits per character)", lambda m: f"{m['best_val']:.4f} ({m['bpc']:.3f})"),
    ]
    lines = ["| statistic | " + " | ".join(models) + " |", "| --- |" + " --- |" * len(models)]
    lines += [f"| {label} | " + " | ".join(get(m) for m in models.values()) + " |" for label, get in rows]
    return lines


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
        lines.append(f"- judged on the companion's runs `{runs['file']}`: mean best validation loss (± population "
                     f"standard deviation, recomputed from each seed): {per}")
    gaps = quality.get("bundle_gap_to_softmax") or {}
    if gaps:
        lines.append("- seed-0 bundle gap (these bundles' best validation loss, one seed each; a statistic, not the "
                     "quoted one): " + ", ".join(f"{name} {gap:.2%} from softmax" for name, gap in gaps.items()))
    return lines


def markdown(report: dict, results: dict) -> str:
    """REPORT.md: the verdict, one table row per claim, then every model's statistics."""
    s = report["summary"]
    lines = [
        "# attngeom: verification report",
        "",
        f"**{s['verdict']}**: {s['passed']} passed, {s['failed']} failed, {s['skipped']} not judged "
        f"(tier: {report['tier']}; {report['provenance']['date']}).",
        "",
        "| verdict | claim | quote (place in the post) | expected | measured | tolerance reason |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in report["claims"]:
        mark = {"PASS": "PASS", "FAIL": "**FAIL**", "SKIP": "skip"}[c["verdict"]]
        lines.append(
            f"| {mark} | {_cell(c['claim'])} (`{c['id']}`) | \"{_cell(c['quote'])}\" ({_cell(c['source'])}) "
            f"| {_cell(c['expected'])} | {_cell(c['measured'])} | {_cell(c['tolerance_reason'])} |"
        )
    if results["models"]:
        lines += ["", "## Statistics per model", "", *statistics_table(results)]
    if quality := quality_lines(results.get("quality", {})):
        lines += ["", "## Quality", "", *quality]
    p = report["provenance"]
    lines += ["", "## Provenance", "", f"- command: `{p['command']}`", f"- machine: {p['machine']}",
              f"- git commit: {p['git_commit']}", "- versions: " + ", ".join(f"{k} {v}" for k, v in p["versions"].items()),
              "- expected values: " + ", ".join(f"{k} `{v}`" for k, v in p["expected_sha256"].items()), "- inputs:"]
    lines += [f"  - `{path}`: `{sha}`" for path, sha in p["inputs"].items()]
    return "\n".join(lines) + "\n"


def write_report(out: Path, report: dict, results: dict) -> None:
    """Write REPORT.md, report.json and results.json into `out`."""
    write_atomic(out / "results.json", json.dumps(results, indent=1) + "\n")
    write_atomic(out / "report.json", json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    write_atomic(out / "REPORT.md", markdown(report, results))
