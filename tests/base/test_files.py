"""Writing files: hashes, atomic writes, outputs that are not regular files, the temporaries of a killed
writer, JSON that is never written with a number that is not finite."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO

from attngeom.base import files
from attngeom.base.errors import InputError


def test_sha256_file_is_hashlib_of_the_bytes(tmp_path: Path):
    path = tmp_path / "f.bin"
    data = os.urandom(3 << 20)  # several read blocks
    path.write_bytes(data)
    assert files.sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_atomic_file_replaces_only_on_success(tmp_path: Path):
    path = tmp_path / "sub" / "out.txt"
    files.write_atomic(path, "old")
    with pytest.raises(RuntimeError), files.atomic_file(path) as f:
        f.write(b"half")
        raise RuntimeError("crash while writing")
    assert path.read_text() == "old"
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.txt"], "no temporary file is left behind"
    files.write_atomic(path, b"new")
    assert path.read_bytes() == b"new"


def test_write_json_atomic_accepts_numpy_scalars_and_keeps_unicode(tmp_path: Path):
    path = tmp_path / "doc.json"
    files.write_json_atomic(path, {"n": np.int64(3), "x": np.float32(0.5), "s": "ε"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"n": 3, "x": 0.5, "s": "ε"}
    assert "ε" in path.read_text(encoding="utf-8")
    with pytest.raises(TypeError):
        files.write_json_atomic(path, {"a": object()})


def _special(tmp_path: Path) -> dict[str, Path]:
    """Paths that are not regular files: a character device (mknod, as root), a FIFO, a socket, a folder."""
    import socket
    import stat

    paths = {"folder": tmp_path / "folder", "FIFO": tmp_path / "fifo", "socket": tmp_path / "sock"}
    paths["folder"].mkdir()
    os.mkfifo(paths["FIFO"])
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(paths["socket"]))
    sock.close()
    if os.geteuid() == 0:
        paths["character device"] = tmp_path / "null"
        os.mknod(paths["character device"], 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    return paths


def test_an_output_that_is_not_a_regular_file_is_refused_and_left_as_it_was(tmp_path: Path):
    for what, path in _special(tmp_path).items():
        kind = os.lstat(path).st_mode
        with pytest.raises(InputError, match=f"is a {what}, not a file to write"):
            files.write_json_atomic(path, {"a": 1})
        assert os.lstat(path).st_mode == kind, what
    with pytest.raises(InputError, match="under /proc, the kernel's"):
        files.write_atomic(Path("/proc/self/comm"), "x")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "fifo")
    files.write_atomic(link, "x")  # a link is replaced, never followed
    assert link.read_text() == "x" and not link.is_symlink() and os.path.exists(tmp_path / "fifo")


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_every_writer_of_a_named_output_refuses_a_device(tmp_path: Path):

    device = _special(tmp_path)["character device"]
    repo = REPO
    ensemble = repo / "expected" / "measured" / "ensemble-step1200.json"
    for cmd in (
        ["bands", str(ensemble), "--write", str(device)],
        ["summary", str(tmp_path / "run"), "--out", str(device)],
        ["summary", str(tmp_path / "run"), "--out", str(tmp_path / "s.json"), "--together", str(device)],
        ["bench", "train", "--quick", "--json", str(device)],
        ["bench", "verify", "--json", str(device)],
        ["fidelity", "--out", str(device)],
        ["--out", str(device)],  # the report's folder
    ):
        done = subprocess.run([str(repo / "reproduce.sh"), *cmd], capture_output=True, text=True, timeout=300)
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert done.returncode == 2 and errors == done.stderr.strip().splitlines()[-1:], (cmd, done.stderr)
        assert errors[0].startswith(f"error: {device}: "), (cmd, errors)  # refused for what it is, before any work
        assert os.path.exists(device) and not os.path.isfile(device)  # still the device


def test_an_output_past_the_file_size_limit_is_2_with_its_path(tmp_path: Path):

    repo = REPO
    out = tmp_path / "rerun.json"
    ensemble = repo / "expected" / "measured" / "ensemble-step1200.json"
    script = f'ulimit -f 1; exec "{repo / "reproduce.sh"}" bands "{ensemble}" --write "{out}"'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ") and "File too large" in done.stderr
    assert not out.exists() and not [p for p in tmp_path.iterdir() if files.is_temporary(p.name)]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), np.float64("nan")])
def test_json_with_a_number_that_is_not_finite_is_never_written(tmp_path: Path, value):
    path = tmp_path / "doc.json"
    path.write_text("{}")
    with pytest.raises(InputError, match="not finite"):
        files.write_json_atomic(path, {"a": [1.0, {"b": value}]})
    assert path.read_text() == "{}"


# In this process (mutmut sees only this process's calls): each helper at its edges, messages in full.


@pytest.mark.parametrize(
    ("name", "temporary"),
    [(".a.x1.tmp", True), (".x.tmp", True), ("..tmp", False), ("a.x.tmp", False), (".a.x.tmpx", False)],
)
def test_a_temporary_name_is_dot_name_dot_tmp(name, temporary):
    assert files.is_temporary(name) is temporary


def test_a_temporary_prefix_keeps_200_bytes_of_the_name():
    assert files.tmp_prefix("out.json") == ".out.json."
    assert files.tmp_prefix("a" * 300) == "." + "a" * 200 + "."
    assert files.tmp_prefix("é" * 150) == "." + "é" * 100 + "."  # 2 bytes each


def test_the_temporaries_a_killed_writer_left_are_removed_and_named(tmp_path: Path):
    for name in (
        ".a.1.tmp",
        "sub/.b.2.tmp",
        ".d.3.tmp/.c.4.tmp",
        "keep.txt",
        "..tmp",
        "sub/keep.tmp",
        "sub/e/.e.6.tmp",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_text("x")
    (tmp_path / ".l.5.tmp").symlink_to(outside, target_is_directory=True)
    shallow = files.remove_temporaries(tmp_path / "sub", recursive=False)
    assert shallow == [".b.2.tmp"] and (tmp_path / "sub" / "e" / ".e.6.tmp").exists()
    (tmp_path / "sub" / ".b.2.tmp").write_text("x")
    assert sorted(files.remove_temporaries(tmp_path)) == [
        ".a.1.tmp",
        ".d.3.tmp",
        ".l.5.tmp",
        "sub/.b.2.tmp",
        "sub/e/.e.6.tmp",
    ]
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert left == [
        "..tmp",
        "keep.txt",
        "outside",
        "outside/kept",
        "sub",
        "sub/e",
        "sub/keep.tmp",
    ]  # the link's folder whole
    assert files.remove_temporaries(tmp_path) == []


def test_the_umask_is_read_and_left_as_it_was():
    mask = os.umask(0o027)
    try:
        assert files._umask() == 0o027 and os.umask(0o027) == 0o027
    finally:
        os.umask(mask)


def test_an_output_that_cannot_be_looked_at_or_is_the_kernels_is_one_message(tmp_path: Path):
    (tmp_path / "file").write_text("x")
    under_a_file = tmp_path / "file" / "out.json"
    with pytest.raises(InputError) as caught:
        files.regular_output(under_a_file)
    assert str(caught.value) == f"{under_a_file}: cannot be written (Not a directory)"
    for path, tree in ((Path("/proc/self/comm"), "/proc"), (Path("/sys/x"), "/sys"), (Path("/dev/shm/x"), "/dev")):
        with pytest.raises(InputError) as caught:
            files.regular_output(path)
        assert str(caught.value) == (
            f"{path}: is a file under {tree}, the kernel's, not a file to write; name a new file or a regular one"
        )
    files.regular_output(tmp_path / "procx" / "out")  # a name beginning as a tree does is not in it
    with pytest.raises(InputError) as caught:
        files.output_file(str(tmp_path))
    assert str(caught.value) == f"{tmp_path}: is a folder, not a file to write; name a new file or a regular one"
    assert files.output_file(str(tmp_path / "new.json")) == tmp_path / "new.json"


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_a_block_device_is_refused_as_one(tmp_path: Path):
    import stat

    device = tmp_path / "loop"
    os.mknod(device, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    with pytest.raises(InputError) as caught:
        files.write_atomic(device, "x")
    assert str(caught.value) == f"{device}: is a block device, not a file to write; name a new file or a regular one"


def test_a_written_file_is_readable_by_all_the_umask_allows(tmp_path: Path):
    mask = os.umask(0o027)
    try:
        files.write_atomic(tmp_path / "a.txt", "é")
    finally:
        os.umask(mask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o7777 == 0o640 and (tmp_path / "a.txt").read_bytes() == b"\xc3\xa9"


@pytest.mark.parametrize(
    ("code", "named", "shown_as"),
    [
        (30, "temporary", "target"),  # EROFS on the temporary name: the reader's name instead
        (30, None, "target"),  # a write names no file
        (30, "elsewhere", "elsewhere"),  # another file's error keeps its name
        (2, "temporary", "temporary"),  # not an unwritable output's error
    ],
)
def test_an_unwritable_output_error_names_the_output(tmp_path: Path, monkeypatch, code, named, shown_as):
    import tempfile

    target = tmp_path / "out.txt"
    names = {"temporary": str(tmp_path / ".out.txt.abc.tmp"), "elsewhere": str(tmp_path / "x" / ".out.txt.abc.tmp")}
    names |= {"target": str(target), None: None}

    def mkstemp(**_):
        raise OSError(code, os.strerror(code), names[named])

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    with pytest.raises(OSError) as caught:
        files.write_atomic(target, "x")
    assert (caught.value.errno, caught.value.filename) == (code, names[shown_as])


def test_a_full_disk_while_writing_names_the_file_and_leaves_nothing(tmp_path: Path, tmpfs):
    import errno

    disk = tmpfs(tmp_path / "disk", size="64k")
    with pytest.raises(OSError) as caught:
        files.write_atomic(disk / "checkpoint.npz", b"\0" * 200_000)
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(disk / "checkpoint.npz"))
    assert list(disk.iterdir()) == []


def test_json_is_written_with_one_space_indents_and_a_final_newline(tmp_path: Path):
    path = tmp_path / "doc.json"
    files.write_json_atomic(path, {"n": np.int64(3), "s": "ε", "l": [np.float32(0.5)]})
    assert path.read_text(encoding="utf-8") == '{\n "n": 3,\n "s": "ε",\n "l": [\n  0.5\n ]\n}\n'
    with pytest.raises(TypeError, match="^not JSON serialisable: object$"):
        files.write_json_atomic(path, {"a": object()})
    with pytest.raises(InputError) as caught:
        files.write_json_atomic(path, {"a": float("nan")})
    assert str(caught.value) == (
        f"{path}: not written: it would hold a number that is not finite (Out of range float values are not JSON compliant: nan)"
    )


def test_a_path_that_is_not_utf8_is_shown_escaped():
    assert files.shown(b"/tmp/a\xffb") == "/tmp/a\\xffb" and files.shown(Path("/tmp/é")) == "/tmp/é"
