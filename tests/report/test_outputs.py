"""The report folder as one set: figures of the judged bundles stay, others go; figures.json is read once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attngeom.base import json_rules
from attngeom.report import outputs, page

DRAWN = "ab" * 32  # the sha256 of the bundle file the figures were drawn from
ENTRY = {"file": "a.gif", "title": "Hull crossing", "caption": "the orange body"}


@pytest.fixture
def written(tmp_path, monkeypatch):
    """A report folder with a figure of DRAWN's bundles; `write(inputs)` verifies bundles of those sha256
    into it and says which files were parsed and which figure entries the page was given."""
    out = tmp_path / "report"
    (out / page.FIGURES_DIR).mkdir(parents=True)
    (out / page.FIGURES_DIR / "a.gif").write_bytes(b"GIF89a")
    meta = {"figures": [ENTRY], "inputs": [DRAWN]}
    (out / page.FIGURES_DIR / page.FIGURES_JSON).write_text(json.dumps(meta), encoding="utf-8")
    parsed, pages = [], []
    read_json = json_rules.read_json
    monkeypatch.setattr(
        json_rules, "read_json", lambda path, *a, **k: parsed.append(Path(path).name) or read_json(path, *a, **k)
    )
    monkeypatch.setattr(outputs, "write_report", lambda folder, report, results: (folder / "REPORT.md").touch())
    monkeypatch.setattr(page, "write_html", lambda folder, report, results, figures: pages.append(figures))

    def write(inputs: list[str]) -> tuple[list[str], list]:
        outputs.write_verified(out, {"provenance": {"inputs": {f"f{i}.npz": h for i, h in enumerate(inputs)}}}, {})
        return parsed, pages

    return out, write


def test_figures_of_the_judged_bundles_stay_and_their_json_is_read_once(written):
    out, write = written
    parsed, pages = write([DRAWN, "cd" * 32])
    assert parsed == [page.FIGURES_JSON] and pages == [[ENTRY]]
    assert (out / page.FIGURES_DIR / "a.gif").is_file() and (out / "REPORT.md").is_file()


def test_figures_of_other_bundles_are_left_out(written):
    out, write = written
    parsed, pages = write(["cd" * 32])
    assert parsed == [page.FIGURES_JSON] and pages == [[]]
    assert not (out / page.FIGURES_DIR).exists() and (out / "REPORT.md").is_file()
