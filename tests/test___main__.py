"""`python -m attngeom`: the command line as a module, a Ctrl-C while it loads included."""

from __future__ import annotations

import runpy
import sys

import pytest

from attngeom import cli


def test_running_the_module_runs_the_entry_point(monkeypatch):
    called = []
    monkeypatch.setattr(cli, "entry", lambda: called.append(True))
    monkeypatch.delitem(sys.modules, "attngeom.__main__", raising=False)
    runpy.run_module("attngeom", run_name="__main__")
    assert called == [True]


def test_a_ctrl_c_while_the_command_line_loads_is_one_line_and_130(monkeypatch, capfd):
    class Loading:  # `from attngeom.cli import entry` is interrupted
        def __getattr__(self, name):
            raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "attngeom.cli", Loading())
    monkeypatch.delitem(sys.modules, "attngeom.__main__", raising=False)
    with pytest.raises(SystemExit) as ended:
        runpy.run_module("attngeom", run_name="__main__")
    assert ended.value.code == 130 and ended.value.__cause__ is None
    assert capfd.readouterr().err == "interrupted\n"
