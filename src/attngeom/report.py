"""The report a reviewer reads: REPORT.md (GitHub), report.json (machine-readable, with
provenance) and results.json (every statistic). Files are written atomically."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path

from attngeom.claims import checkpoint_labels
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


def statistics_rows(results: dict) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Per-model statistics, quoted or not: the models, then (label, one cell per model) rows.

    Checkpoints are labelled as the claims count them (claims.checkpoint_labels: 12,000 for the
    map stored under step11999).
    """
    models = results["models"]
    first = next(iter(models.values()))
    at = ", ".join(f"{s:,}" for s in checkpoint_labels(first["setup"]["checkpoints"], first["setup"]["steps"]))
    rows = [
        ("winners moved at t = " + ", ".join(f"{float(t):g}" for t in first["scale_t"]),
         lambda m: ", ".join(f"{v:.1%}" for v in m["scale_changed"].values())),
        ("mean normalised entropy (final)", lambda m: f"{m['mean_norm_entropy_final']:.4f}"),
        (f"mean normalised entropy at steps {at}",
         lambda m: " → ".join(f"{v:.4f}" for v in m.get("mean_norm_entropy_by_step", {}).values()) or "-"),
        (f"distinct winners of 128 at steps {at} (mean over heads)",
         lambda m: " → ".join(f"{v * m['setup']['window']:.1f}" for v in m["occupancy_by_step"].values())),
        ("distinct winners, final, min / max over heads",
         lambda m: f"{m['occupancy_final_min'] * m['setup']['window']:.0f} / {m['occupancy_final_max'] * m['setup']['window']:.0f}"),
        (f"census head (layer 4, head 1) distinct owners at steps {at}",
         lambda m: " → ".join(str(v) for v in m["census_head"]["distinct_by_step"].values())),
        ("keys inside the others' hull", lambda m: f"{m['keys_inside_hull']} of {m['keys_total']:,}"),
        ("winner is the nearest key / the best-aligned key", lambda m: f"{m['winner_is_nearest']:.1%} / {m['winner_is_aligned']:.1%}"),
        ("largest change in the 41-scale sweep (layer 1, head 1)", lambda m: f"{max(m['scale_sweep']['changed']):.1%}"),
        ("best validation loss, nats (bits per character)", lambda m: f"{m['best_val']:.4f} ({m['bpc']:.3f})"),
    ]  # fmt: skip
    return list(models), [(label, [get(m) for m in models.values()]) for label, get in rows]


def statistics_table(results: dict) -> list[str]:
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
        f"- `{c['id']}`: {_cell(c['claim'])}: measured {_cell(c['measured'])}, expected {_cell(c['expected'])}"
        for c in failing
    ]
    return [*lines, ""]


def preflight_line(preflight: dict) -> str:
    """The run's fidelity preflight (recorded in its manifest) in one line."""
    verdict = preflight.get("verdict", "ERROR")
    mark = verdict if verdict == "PASS" else f"**{verdict}**"
    return (f"Fidelity preflight: {mark} ({preflight.get('steps', '?')} steps on {_cell(preflight.get('device', '?'))}, "
            f"against the author's training script; {_cell(preflight.get('file', 'fidelity.json'))}).")  # fmt: skip


def markdown(report: dict, results: dict) -> str:
    """REPORT.md: the verdict, one table row per claim, then every model's statistics."""
    s = report["summary"]
    lines = [
        "# attngeom: verification report",
        "",
        f"**{s['verdict']}**: {s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped "
        f"(tier: {report['tier']}; {report['provenance']['date']}).",
        "",
        *failing_lines(report["claims"]),
        *[f"Warning: {_cell(w)}" + "\n" for w in report.get("warnings", [])],
    ]
    if "evidence" in report:
        lines += [f"Evidence: {_cell(report['evidence']['line'].removeprefix('evidence: '))}.", ""]
    if report.get("preflight"):
        lines += [preflight_line(report["preflight"]), ""]
    lines += [
        "| verdict | claim | quote (place in the post) | expected | measured | tolerance reason |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in report["claims"]:
        mark = {"PASS": "PASS", "FAIL": "**FAIL**", "SKIP": "SKIP"}[c["verdict"]]
        lines.append(
            f"| {mark} | {_cell(c['claim'])} (`{c['id']}`) | \"{_cell(c['quote'])}\" ({_cell(c['source'])}) "
            f"| {_cell(c['expected'])} | {_cell(c['measured'])} | {_cell(c['tolerance_reason'])} |"
        )
    if results["models"]:
        lines += ["", "## Statistics per model", "", *statistics_table(results)]
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
