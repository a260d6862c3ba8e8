"""The report a reviewer reads: REPORT.md (GitHub), report.json (machine-readable, with
provenance), results.json (every statistic) and index.html, with the figures when they were
drawn from the same bundles. The files are a set, written together and swapped in whole."""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from attngeom import html_report, schema
from attngeom.errors import InputError
from attngeom.files import git_commit, replaced_folder, sha256_file, shown, versions, write_atomic

REPORT_FILES = {"REPORT.md", "report.json", "results.json", html_report.INDEX}

def provenance(inputs: list[Path], expected_sha: dict[str, str]) -> dict:
    """Where the judgement came from: inputs, expected values, software, machine, date, command."""
    return {
        "inputs": {shown(p): sha256_file(p) for p in inputs},
        "expected_sha256": expected_sha,
        "versions": versions(),
        "git_commit": git_commit(),
        "machine": f"{platform.platform()} ({platform.machine()}, {os.cpu_count()} CPUs)",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["reproduce.sh", *map(shown, sys.argv[1:])]),
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


def check_out(out: Path) -> None:
    """Refuse at once, before any work, a report folder that could not be written."""
    try:
        target = Path(os.path.abspath(out))
        if os.path.lexists(target) and not target.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "it exists and is not a folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        for folder in (target.parent, target) if target.is_dir() else (target.parent,):  # read-only, immutable
            tempfile.TemporaryDirectory(prefix=f".{target.name}.", suffix=".tmp", dir=folder).cleanup()
    except OSError as exc:
        raise InputError(f"{shown(out)}: cannot write the report there ({exc.strerror or exc})") from exc


def write_set(out: Path, renewed: set[str], write: Callable[[Path], None]) -> None:
    """Renew the entries `renewed` of the report folder `out` as one set.

    `write(folder)` writes them into a fresh folder beside `out` that holds the rest of `out`
    already; the folder then replaces `out` in one rename, so readers, a kill at any instant and
    a concurrent command see the old set or the new one, never a mix. A folder that cannot be
    written is unusable input.
    """
    try:
        with replaced_folder(out, renewed) as folder:
            write(folder)
    except OSError as exc:
        raise InputError(f"{shown(out)}: cannot write the report there ({exc.strerror or exc})") from exc


def figures_inputs(folder: Path) -> set[str]:
    """sha256 of the bundle files the figures in `folder` were drawn from (empty: none or unreadable)."""
    path = folder / html_report.FIGURES_DIR / html_report.FIGURES_JSON
    try:
        doc = schema.read_json(path, schema.Record({"inputs": schema.Items(schema.Text(64))}, required=("inputs",)))
    except InputError:
        return set()
    return set(doc["inputs"])


def write_verified(out: Path, report: dict, results: dict) -> None:
    """The set of a verification; figures of other bundles are left out of it."""
    drawn = figures_inputs(Path(out))
    stale = {html_report.FIGURES_DIR} if not drawn or not drawn <= set(report["provenance"]["inputs"].values()) else set()

    def write(folder: Path) -> None:
        write_report(folder, report, results)
        html_report.write_html(folder, report, results)

    write_set(out, REPORT_FILES | stale, write)
