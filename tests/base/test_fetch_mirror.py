"""A relative ATTNGEOM_MIRROR is read against the folder the command started in, and named in full."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attngeom.base.errors import InputError
from attngeom.base.fetch import fetch_corpus, mirror_dir


def test_a_relative_mirror_is_read_as_an_absolute_path(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTNGEOM_MIRROR", "mirror")
    assert mirror_dir() == tmp_path / "mirror" and mirror_dir().is_absolute()


def test_a_file_missing_from_a_relative_mirror_is_named_with_its_full_path(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTNGEOM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ATTNGEOM_MIRROR", os.path.join("..", tmp_path.name, "empty-mirror"))
    with pytest.raises(InputError, match="not in the mirror") as info:
        fetch_corpus()
    named = Path(str(info.value).split(": not in the mirror")[0])
    assert named.is_absolute() and named.is_relative_to(tmp_path / "empty-mirror") and named.name == "input.txt"
