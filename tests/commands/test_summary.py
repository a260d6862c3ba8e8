"""`summary`'s command: its help, and the SummaryOptions record it builds from the command line."""

from __future__ import annotations

import pytest
from helpers.commands import assert_own_help, capture, run

from attngeom.base.errors import InputError
from attngeom.commands import summary
from attngeom.jobs import summary as summary_job
from attngeom.jobs.summary import SummaryOptions


def test_help_prints_the_commands_own_description(capsys):
    assert_own_help("summary", summary, capsys)


def test_the_runs_and_options_reach_the_summary_as_one_record(monkeypatch, tmp_path):
    calls = capture(monkeypatch, summary_job, "run_summary", status=1)
    argv = ["summary", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "s.json")]
    assert run([*argv, "--what", "two runs", "--note", "idle", "--together", str(tmp_path / "k")]) == 1
    assert run(["summary", str(tmp_path / "a"), "--out", str(tmp_path / "s.json")]) == 1
    assert calls == [
        (SummaryOptions((tmp_path / "a", tmp_path / "b"), tmp_path / "s.json", "two runs", "idle", tmp_path / "k"),),
        (SummaryOptions((tmp_path / "a",), tmp_path / "s.json"),),
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["RUN"], "--out"), (["--out", "s.json"], "RUN"), (["RUN", "--out", "FOLDER"], "FOLDER")],
)
def test_a_missing_run_or_out_or_an_out_that_is_a_folder_is_refused(monkeypatch, tmp_path, argv, message):
    (tmp_path / "FOLDER").mkdir()
    calls = capture(monkeypatch, summary_job, "run_summary")
    with pytest.raises(InputError, match=message):
        run(["summary", *[str(tmp_path / a) if a == "FOLDER" else a for a in argv]])
    assert calls == []
