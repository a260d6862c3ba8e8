"""A folder replaced whole (`files.replaced_folder`): the atomic exchange, its fallbacks, and the mount points it refuses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attngeom.base import files


def _tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_replaced_whole_keeps_what_is_not_renewed_and_its_mode(tmp_path: Path):
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    for name, text in (("keep.txt", "k"), ("sub/inner.txt", "i"), ("report.md", "old"), ("gone.png", "g")):
        (out / name).write_text(text)
    (out / "link").symlink_to("keep.txt")
    (out / "sub" / "link").symlink_to("inner.txt")
    out.chmod(0o750)
    inode, inner = (out / "keep.txt").stat().st_ino, (out / "sub" / "inner.txt").stat().st_ino
    with files.replaced_folder(out, {"report.md", "gone.png"}) as new:
        assert new.parent == tmp_path and files.is_temporary(new.name) and new.name.startswith(".out.")
        assert sorted(p.name for p in new.iterdir()) == ["keep.txt", "link", "sub"]
        (new / "report.md").write_text("new")
    assert _tree(out) == {"keep.txt": "k", "link": "k", "report.md": "new", "sub/inner.txt": "i", "sub/link": "i"}
    assert os.readlink(out / "link") == "keep.txt" and os.readlink(out / "sub" / "link") == "inner.txt"
    assert (out / "keep.txt").stat().st_ino == inode and (out / "sub" / "inner.txt").stat().st_ino == inner  # linked
    assert out.stat().st_mode & 0o7777 == 0o750 and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_new_folder_takes_the_umasks_mode_and_a_failed_block_leaves_the_old(tmp_path: Path):
    out = tmp_path / "deeper" / "out"
    mask = os.umask(0o027)
    try:
        with files.replaced_folder(out, {"a"}) as new:
            (new / "a").write_text("1")
    finally:
        os.umask(mask)
    assert _tree(out) == {"a": "1"} and out.stat().st_mode & 0o7777 == 0o750
    with pytest.raises(RuntimeError), files.replaced_folder(out, {"a"}) as new:
        (new / "a").write_text("2")
        raise RuntimeError("crash")
    assert _tree(out) == {"a": "1"} and sorted(p.name for p in out.parent.iterdir()) == ["out"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError) as caught, files.replaced_folder(tmp_path / "file", set()):
        pass
    assert (caught.value.errno, caught.value.strerror, caught.value.filename) == (
        20,
        "exists and is not a folder",
        str(tmp_path / "file"),
    )


def test_the_working_folder_is_renewed_in_place_entry_by_entry(tmp_path: Path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    for name, text in (("keep.txt", "k"), ("report.md", "old"), ("gone.png", "g")):
        (out / name).write_text(text)
    (out / "figs").mkdir()
    (out / "figs" / "old.png").write_text("o")
    monkeypatch.chdir(out)
    inode = out.stat().st_ino
    with files.replaced_folder(out, {"report.md", "gone.png", "figs", "absent"}) as new:
        assert (new / "keep.txt").is_symlink()  # read through a link, never copied
        (new / "report.md").write_text("new")
        (new / "figs").mkdir()
        (new / "figs" / "new.png").write_text("n")
    assert out.stat().st_ino == inode and Path.cwd() == out
    assert _tree(out) == {"figs/new.png": "n", "keep.txt": "k", "report.md": "new"}
    assert not (out / "keep.txt").is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert files._holds_working_folder(out) and files._holds_working_folder(tmp_path)
    assert not files._holds_working_folder(out / "figs")


def test_without_an_atomic_exchange_the_old_folder_is_moved_aside_then_removed(tmp_path: Path, monkeypatch):
    import errno

    out = tmp_path / "out"
    out.mkdir()
    (out / "a").write_text("old")
    tried = []

    def no_exchange(a, b):
        tried.append((a, b))
        raise OSError(errno.ENOSYS, "no atomic exchange on this system")

    monkeypatch.setattr(files, "_exchange", no_exchange)
    with files.replaced_folder(out, {"a"}) as new:
        (new / "a").write_text("new")
    assert tried == [(new, out)] and _tree(out) == {"a": "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # the old folder (NAME.old) removed too
    aside = tmp_path / "new"
    aside.mkdir()
    assert files._swap_in(aside, out) == tmp_path / "new.old" and (tmp_path / "new.old" / "a").read_text() == "new"
    monkeypatch.setattr(files, "_exchange", lambda a, b: (_ for _ in ()).throw(OSError(errno.EXDEV, "other")))
    aside.mkdir()
    with pytest.raises(OSError) as caught:
        files._swap_in(aside, out)
    assert caught.value.errno == errno.EXDEV


def test_the_atomic_exchange_swaps_two_paths_or_names_the_missing_one(tmp_path: Path, monkeypatch):
    import errno

    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("A")
    b.mkdir()
    files._exchange(a, b)
    assert a.is_dir() and b.read_text() == "A"
    with pytest.raises(OSError) as caught:
        files._exchange(a, tmp_path / "none")
    assert (caught.value.errno, caught.value.strerror, caught.value.filename) == (
        errno.ENOENT,
        "No such file or directory",
        str(tmp_path / "none"),
    )
    (a / "sub").mkdir()
    with pytest.raises(OSError) as caught:
        files._exchange(a, a / "sub")  # a folder into itself: this call's own errno, not the last one's
    assert (caught.value.errno, caught.value.strerror) == (errno.EINVAL, "Invalid argument")
    monkeypatch.chdir(tmp_path)
    files._exchange(Path("a"), Path("b"))  # names relative to the working folder
    assert a.read_text() == "A" and b.is_dir()
    monkeypatch.setattr(files.sys, "platform", "darwin")
    with pytest.raises(OSError) as caught:
        files._exchange(a, b)
    assert (caught.value.errno, caught.value.strerror) == (errno.ENOSYS, "no atomic exchange on this system")


def test_a_target_that_appears_or_vanishes_meanwhile_is_tried_again(tmp_path: Path, monkeypatch):
    import errno

    out, new = tmp_path / "out", tmp_path / "new"
    new.mkdir()
    real_rename, calls = os.rename, []

    def rename(a, b):
        calls.append("rename")
        if len(calls) == 1:  # another process made `out` first
            raise OSError(errno.ENOTEMPTY, "Directory not empty")
        real_rename(a, b)

    monkeypatch.setattr(files.os, "rename", rename)
    assert files._swap_in(new, out) is None and out.is_dir() and calls == ["rename", "rename"]
    gone = iter([OSError(errno.ENOENT, "gone")])
    new.mkdir()
    monkeypatch.setattr(files, "_exchange", lambda a, b: (_ for _ in ()).throw(next(gone, OSError(errno.EBUSY, "x"))))
    with pytest.raises(OSError) as caught:
        files._swap_in(new, out)
    assert caught.value.errno == errno.EBUSY  # tried again after ENOENT, then the second answer raised
    tries = []
    monkeypatch.setattr(files, "_exchange", lambda a, b: tries.append(b) or (_ for _ in ()).throw(OSError(2, "gone")))
    with pytest.raises(OSError) as caught:
        files._swap_in(new, out)
    assert tries == [out] * 100
    assert (caught.value.errno, caught.value.strerror, caught.value.filename) == (
        errno.EBUSY,
        "kept changing while being replaced",
        str(out),
    )
    monkeypatch.setattr(files.os, "rename", lambda a, b: (_ for _ in ()).throw(OSError(errno.EACCES, "no")))
    with pytest.raises(OSError) as caught:
        files._swap_in(new, tmp_path / "absent")
    assert caught.value.errno == errno.EACCES


def test_a_file_that_cannot_be_hard_linked_is_copied(tmp_path: Path, monkeypatch):
    (tmp_path / "a").write_text("x")
    monkeypatch.setattr(files.os, "link", lambda a, b: (_ for _ in ()).throw(OSError(18, "Invalid cross-device link")))
    files._link_or_copy(str(tmp_path / "a"), str(tmp_path / "b"))
    assert (tmp_path / "b").read_text() == "x" and (tmp_path / "b").stat().st_ino != (tmp_path / "a").stat().st_ino


def test_a_mount_point_at_or_inside_the_target_is_refused_before_anything_is_written(
    tmp_path: Path, tmpfs, monkeypatch
):
    import errno

    disk = tmpfs(tmp_path / "disk")
    with pytest.raises(OSError) as caught:
        files.replaceable(disk)
    assert (caught.value.errno, caught.value.strerror) == (
        errno.EBUSY,
        "it is a mount point, which the swap cannot replace; name a folder inside it",
    )
    out = tmp_path / "out"
    (out / "a" / "b").mkdir(parents=True)
    (out / "link").symlink_to(tmp_path / "disk", target_is_directory=True)  # a link to a mount is no mount inside
    assert files.replaceable(out) == out
    tmpfs(out / "a" / "b")
    with pytest.raises(OSError) as caught:
        files.replaceable(out)
    assert (caught.value.errno, caught.value.strerror) == (
        errno.EBUSY,
        f"{out / 'a' / 'b'} inside it is a mount point, whose files the swap would remove",
    )
    (tmp_path / "to-out").symlink_to(out / "a", target_is_directory=True)
    with pytest.raises(OSError, match="inside it is a mount point"):
        files.replaceable(tmp_path / "to-out")  # a link is followed: where it points is checked
    assert files.replaceable(tmp_path / "absent") == tmp_path / "absent"
    monkeypatch.chdir(disk)
    assert files.replaceable(disk) == disk  # the working folder is written in place, mount point or not


def test_a_mount_of_the_same_device_inside_the_target_is_refused(tmp_path: Path, monkeypatch):
    out = tmp_path / "out"
    (out / "a" / "b").mkdir(parents=True)
    monkeypatch.setattr(files.os.path, "ismount", lambda p: Path(p) == out / "a" / "b")  # a bind mount
    with pytest.raises(OSError, match="a/b inside it is a mount point, whose files the swap would remove$"):
        files.replaceable(out)
