"""`bands`'s command: its help, and the BandsOptions record it builds from the command line."""

from __future__ import annotations

import pytest
from helpers.commands import assert_own_help, capture, run

from attngeom.base.errors import InputError
from attngeom.commands import bands
from attngeom.jobs import bands as bands_job
from attngeom.jobs.bands import BandsOptions


def test_help_prints_the_commands_own_description(capsys):
    assert_own_help("bands", bands, capsys)


def test_the_options_reach_the_bands_as_one_record(monkeypatch, tmp_path):
    calls = capture(monkeypatch, bands_job, "run_bands", status=1)
    ens, one, two = tmp_path / "ens.json", tmp_path / "one.json", tmp_path / "two.json"
    argv = ["bands", str(ens), "--step", "600", "--source", "x.json", "--judge", str(one), "--judge", str(two)]
    assert run([*argv, "--write", str(tmp_path / "rerun.json")]) == 1
    assert run(["bands", "--final", str(one)]) == 1
    assert calls == [
        (BandsOptions(ens, None, 600, "x.json", (one, two), tmp_path / "rerun.json"),),
        (BandsOptions(final=one),),
    ]
    assert calls[1][0].judge == ()  # no --judge: an empty tuple, never None


def test_a_write_target_that_is_a_folder_is_refused_as_the_options_are_read(monkeypatch, tmp_path):
    calls = capture(monkeypatch, bands_job, "run_bands")
    with pytest.raises(InputError, match=str(tmp_path)):
        run(["bands", str(tmp_path / "ens.json"), "--write", str(tmp_path)])
    with pytest.raises(InputError, match="--step"):
        run(["bands", str(tmp_path / "ens.json"), "--step", "x"])
    assert calls == []
