"""`fidelity`'s command: its help, and the variants, steps and folder it hands `training.fidelity.run`."""

from __future__ import annotations

import pytest
from helpers.commands import assert_own_help, capture, run

from attngeom.base.errors import InputError
from attngeom.base.variants import PUBLISHED
from attngeom.commands import fidelity
from attngeom.training import fidelity as fidelity_check


def test_help_prints_the_commands_own_description(capsys):
    assert_own_help("fidelity", fidelity, capsys)


def test_the_defaults_and_the_options_reach_the_check(monkeypatch, tmp_path):
    calls = capture(monkeypatch, fidelity_check, "run", status=1)
    assert run(["fidelity"]) == 1
    assert run(["fidelity", "--steps", "4", "--variants", "yat_b", "--out", str(tmp_path)]) == 1
    assert calls == [(PUBLISHED, None, None), (("yat_b",), 4, tmp_path)]


def test_steps_that_are_not_a_number_are_refused(monkeypatch):
    calls = capture(monkeypatch, fidelity_check, "run")
    with pytest.raises(InputError, match="--steps"):
        run(["fidelity", "--steps", "three"])
    assert calls == []
