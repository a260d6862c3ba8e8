"""`figures`'s command: its help, and the bundles and folder it hands `run_figures`."""

from __future__ import annotations

from pathlib import Path

from helpers.commands import assert_own_help, capture, run

from attngeom.commands import figures
from attngeom.report import figures as figures_job


def test_help_prints_the_commands_own_description(capsys):
    assert_own_help("figures", figures, capsys)


def test_the_defaults_and_the_options_reach_run_figures(monkeypatch, tmp_path):
    calls = capture(monkeypatch, figures_job, "run_figures", status=2)
    assert run(["figures"]) == 2
    assert run(["figures", "--bundles", str(tmp_path / "b"), "--out", str(tmp_path / "o")]) == 2
    assert calls == [(None, Path("report")), (tmp_path / "b", tmp_path / "o")]
