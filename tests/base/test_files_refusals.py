"""Outputs that never write over their inputs, writers that take turns, pages replaced all together."""

from __future__ import annotations

import threading
import time

import pytest

from attngeom.base import files
from attngeom.base.errors import InputError


def test_an_output_equal_to_inside_or_above_an_input_is_refused(tmp_path):
    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)
    for out, says in ((run, "is"), (run / "kept", "lies inside"), (tmp_path / "runs", "holds")):
        with pytest.raises(InputError) as info:
            files.apart(out, [run], "the output")
        assert str(info.value) == f"{out} {says} {run}, which it reads; write the output elsewhere"
    files.apart(tmp_path / "beside", [run], "the output")  # apart: no error
    (tmp_path / "link").symlink_to(run)
    with pytest.raises(InputError, match="lies inside"):
        files.apart(tmp_path / "link" / "kept", [run], "the output")  # through a link too


def test_a_root_is_never_an_output_folder():
    with pytest.raises(InputError, match="/: a file-system root or mount point; the output needs a folder"):
        files.apart("/", [], "the output")


def test_writers_of_one_output_take_turns(tmp_path):
    out, inside, most = tmp_path / "s.json", [0], [0]

    def write() -> None:
        with files.exclusive(out):
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            inside[0] -= 1

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == [1]


def test_pages_are_replaced_all_together_or_none(tmp_path, monkeypatch):
    pages = [tmp_path / name for name in ("a.md", "b.md", "c.md")]
    for p in pages:
        p.write_text(f"old {p.name}")
    exchange, calls = files._exchange, []

    def failing_third(a, b):
        calls.append(b)
        if len(calls) == 3:
            raise PermissionError(1, "Operation not permitted", str(b))
        exchange(a, b)

    monkeypatch.setattr(files, "_exchange", failing_third)
    with pytest.raises(PermissionError):
        files.replace_together({p: f"new {p.name}" for p in pages})
    assert [p.read_text() for p in pages] == ["old a.md", "old b.md", "old c.md"]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.md", "b.md", "c.md"]  # no temporary left
    monkeypatch.setattr(files, "_exchange", exchange)
    files.replace_together({p: f"new {p.name}" for p in pages})
    assert [p.read_text() for p in pages] == ["new a.md", "new b.md", "new c.md"]


def test_only_a_named_entrys_temporaries_are_removed(tmp_path):
    for name in (".kept.abc.tmp", ".other.abc.tmp", "kept"):
        (tmp_path / name).mkdir()
    assert files.remove_temporaries(tmp_path, recursive=False, of="kept") == [".kept.abc.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.abc.tmp", "kept"]
