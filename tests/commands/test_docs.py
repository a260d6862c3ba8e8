"""`docs`'s command: its help, and whether it checks or writes."""

from __future__ import annotations

import pytest
from helpers.commands import assert_own_help, capture, run

from attngeom.base.errors import InputError
from attngeom.commands import docs
from attngeom.docs import pages


def test_help_prints_the_commands_own_description(capsys):
    assert_own_help("docs", docs, capsys)


def test_docs_writes_and_docs_check_only_checks(monkeypatch):
    calls = capture(monkeypatch, pages, "run_docs", status=1)
    assert run(["docs"]) == 1 and run(["docs", "--check"]) == 1
    assert calls == [(False,), (True,)]


def test_an_unknown_option_is_refused(monkeypatch):
    calls = capture(monkeypatch, pages, "run_docs")
    with pytest.raises(InputError, match="unrecognized arguments: --fix"):
        run(["docs", "--fix"])
    assert calls == []
