"""`kaggle`'s command: its help, the KaggleOptions record it builds (the earlier spellings of its options
included), and the user names it accepts."""

from __future__ import annotations

import argparse

import pytest
from helpers.commands import assert_own_help, capture, help_of, run

from attngeom.backends import kaggle as kaggle_backend
from attngeom.backends.kaggle import KaggleOptions
from attngeom.base.errors import InputError
from attngeom.commands import kaggle


def test_help_prints_the_commands_own_description_and_hides_the_old_spellings(capsys):
    assert_own_help("kaggle", kaggle, capsys)
    listed = help_of(["kaggle"], capsys)
    assert all(text.split(" (")[0] in " ".join(listed.split()) for text in kaggle.ACTIONS.values())
    for action, text in kaggle.ACTIONS.items():  # each action's --help: its own usage, description and options
        shown = help_of(["kaggle", action], capsys)
        assert shown.startswith(f"usage: reproduce.sh kaggle {action} [-h] [--out OUT]"), shown[:200]
        assert f"`reproduce.sh kaggle {action}`: {text}." == " ".join(shown.split("\n\n")[1].split())
        assert kaggle.__doc__.strip().splitlines()[0] not in shown
        assert "--out" in shown and "--time-limit" in shown
        assert not {"--run", "--bundles", "--timeout"} & set(shown.replace(",", " ").split())


def test_the_options_reach_the_backend_as_one_record(monkeypatch, tmp_path):
    calls = capture(monkeypatch, kaggle_backend, "main", status=1)
    argv = ["kaggle", "run", "--out", str(tmp_path), "--seeds", "0,2", "--kernels", "attngeom-goat"]
    argv += ["--preset", "smoke", "--members", "4", "--accelerator", "NvidiaL4", "--time-limit", "3600"]
    assert run([*argv, "--concurrency", "3", "--poll", "2.5", "--username", "a.b-c_d"]) == 1
    assert run(["kaggle", "status"]) == 1
    assert calls == [
        (KaggleOptions("run", tmp_path, (0, 2), ("attngeom-goat",), "smoke", 4, "NvidiaL4", 3600, 3, 2.5, "a.b-c_d"),),
        (KaggleOptions("status"),),
    ]


def test_the_earlier_spellings_set_the_same_fields(monkeypatch, tmp_path):
    calls = capture(monkeypatch, kaggle_backend, "main")
    run(["kaggle", "pull", "--run", str(tmp_path), "--bundles", "attngeom-qk", "--timeout", "60"])
    run(["kaggle", "pull", "--out", str(tmp_path), "--kernels", "attngeom-qk", "--time-limit", "60"])
    assert calls[0] == calls[1] and calls[0][0].out == tmp_path and calls[0][0].time_limit == 60


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "x" * 64])
def test_a_kaggle_user_name_is_accepted(name):
    assert kaggle.kaggle_user(name) == name


@pytest.mark.parametrize("name", ["", "a/b", "a b", "x" * 65, "é"])
def test_anything_else_is_not_a_user_name(name):
    with pytest.raises(argparse.ArgumentTypeError, match="not a Kaggle user name"):
        kaggle.kaggle_user(name)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fetch"], "invalid choice: 'fetch'"),
        (["run", "--members", "65"], "--members"),
        (["run", "--time-limit", "43201"], "--time-limit"),
        (["run", "--concurrency", "0"], "--concurrency"),
        (["run", "--username", "a/b"], "--username"),
    ],
)
def test_a_bad_option_is_refused_before_any_call(monkeypatch, argv, message):
    calls = capture(monkeypatch, kaggle_backend, "main")
    with pytest.raises(InputError, match=message):
        run(["kaggle", *argv])
    assert calls == []
