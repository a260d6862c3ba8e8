"""`verify`'s command: its help, and the bundles, folder, tier and variants it hands `run_verify`."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.commands import assert_own_help, capture, run

from attngeom.base.errors import InputError
from attngeom.commands import verify
from attngeom.jobs import verify as verify_job


def test_help_prints_the_commands_own_description(capsys):
    assert_own_help("verify", verify, capsys)


def test_the_defaults_are_the_authors_bundles_into_report(monkeypatch):
    calls = capture(monkeypatch, verify_job, "run_verify", status=1)
    assert run(["verify"]) == 1  # verify's status is the command's
    assert calls == [(None, Path("report"), None, None)]  # no --variants: each the folder holds (the author's: all)


def test_the_options_reach_run_verify_as_given(monkeypatch, tmp_path):
    calls = capture(monkeypatch, verify_job, "run_verify")
    argv = ["verify", "--bundles", str(tmp_path), "--out", str(tmp_path / "o"), "--tier", "rerun"]
    assert run([*argv, "--variants", "yat_b,softmax,yat_b"]) == 0
    assert calls == [(tmp_path, tmp_path / "o", "rerun", ("yat_b", "softmax"))]


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--variants", "goat"], "unknown variant 'goat'"), (["--tier", "paper"], "invalid choice: 'paper'")],
)
def test_a_bad_option_is_refused_before_any_work(monkeypatch, argv, message):
    calls = capture(monkeypatch, verify_job, "run_verify")
    with pytest.raises(InputError, match=message):
        run(["verify", *argv])
    assert calls == []
