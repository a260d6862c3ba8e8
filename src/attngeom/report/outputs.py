"""The report folder as one set: REPORT.md, report.json, results.json, index.html and the figures
always describe the same run. They are written into a fresh folder beside the target and swapped
in whole, so a kill at any instant leaves the old set or the new one."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from attngeom.base import json_rules, schema_results
from attngeom.base.errors import InputError
from attngeom.base.files import replaceable, replaced_folder, shown, tmp_prefix
from attngeom.base.records import Report, Results
from attngeom.report import page
from attngeom.report.markdown import write_report

REPORT_FILES = {"REPORT.md", "report.json", "results.json", page.INDEX}


def check_out(out: Path, what: str = "the report") -> None:
    """Refuse at once, before any work, a folder that could not be written as one set (`what` it is to hold)."""
    try:
        target = replaceable(out)
        if os.path.lexists(target) and not target.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "it exists and is not a folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        for folder in (target.parent, target) if target.is_dir() else (target.parent,):  # read-only, immutable
            tempfile.TemporaryDirectory(prefix=tmp_prefix(target.name), suffix=".tmp", dir=folder).cleanup()
    except OSError as exc:
        raise InputError(f"{shown(out)}: cannot write {what} there ({exc.strerror or exc})") from exc


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


def drawn_figures(folder: Path) -> dict:
    """The figures.json of the figures in `folder`: their entries and the sha256 of the bundle files
    they were drawn from (empty: none, or unreadable)."""
    try:
        return json_rules.read_json(folder / page.FIGURES_DIR / page.FIGURES_JSON, schema_results.FIGURES_JSON)
    except InputError:
        return {}


def write_verified(out: Path, report: Report, results: Results) -> None:
    """The set of a verification; figures of other bundles are left out of it. The old figures.json is
    read once: whether its figures stay, and their titles on the page."""
    drawn = drawn_figures(Path(out))
    inputs = set(drawn.get("inputs", []))
    kept = bool(inputs) and inputs <= set(report["provenance"]["inputs"].values())

    def write(folder: Path) -> None:
        write_report(folder, report, results)
        page.write_html(folder, report, results, drawn["figures"] if kept else [])

    write_set(out, REPORT_FILES | (set() if kept else {page.FIGURES_DIR}), write)
