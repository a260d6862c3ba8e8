import hashlib
import json
import os
import subprocess
from pathlib import Path

import mounts
import numpy as np
import pytest

from attngeom import files
from attngeom.errors import InputError

tmpfs = mounts.tmpfs  # the fixture


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


def test_repo_and_versions(tmp_path: Path, monkeypatch):
    """The installed versions as Python and numpy report them; the checkout's HEAD commit, none without a checkout."""
    import platform

    import attngeom

    assert (files.REPO / "src" / "attngeom" / "files.py").is_file()
    found = files.versions()
    assert found["attngeom"] == attngeom.__version__ and found["python"] == platform.python_version()
    assert found["numpy"] == np.__version__
    checkout = tmp_path / "checkout"
    monkeypatch.setattr(files, "REPO", checkout)
    checkout.mkdir()
    assert files.git_commit() is None  # not a checkout
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    assert files.git_commit() is None  # a checkout without a commit
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert len(head) == 40 and files.git_commit() == head


def test_the_commit_is_asked_of_git_with_a_time_limit(monkeypatch, tmp_path: Path):
    from types import SimpleNamespace

    (tmp_path / ".git").mkdir()
    monkeypatch.setattr(files, "REPO", tmp_path)
    asked = []

    def run(argv, **kwargs):
        asked.append((argv, kwargs))
        return SimpleNamespace(returncode=0, stdout="abc\n")

    monkeypatch.setattr(files.subprocess, "run", run)
    assert files.git_commit() == "abc"
    assert asked == [
        (["git", "-C", str(tmp_path), "rev-parse", "HEAD"], {"capture_output": True, "text": True, "timeout": 10})
    ]

    def hangs(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"])

    monkeypatch.setattr(files.subprocess, "run", hangs)
    assert files.git_commit() is None


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
    import subprocess

    device = _special(tmp_path)["character device"]
    repo = Path(__file__).resolve().parents[1]
    ensemble = repo / "expected" / "measured" / "ensemble-step1200.json"
    for cmd in (
        ["bands", str(ensemble), "--write", str(device)],
        ["summary", str(tmp_path), "--out", str(device)],
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
    import subprocess

    repo = Path(__file__).resolve().parents[1]
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


def test_a_library_that_is_not_installed_is_left_out_of_the_versions(monkeypatch):
    monkeypatch.setattr(files, "LIBRARIES", ("numpy", "no-such-library", "pytest"))
    found = files.versions()
    assert sorted(found) == ["attngeom", "numpy", "pytest", "python"] and found["pytest"] == pytest.__version__


CPUINFO = "processor\t: 0\nHardware\t:\nmodel name\t: Fancy: CPU 3000\nflags\t\t: sse2 fpu avx\nmodel name\t: Other\n"


def _cpuinfo_reads(monkeypatch, text: str | None) -> None:
    """/proc/cpuinfo holding `text` (None: none), read as UTF-8 that replaces what is not (whatever it holds)."""
    import codecs

    real = Path.read_text

    def read_text(self, *args, **kwargs):
        if self == Path("/proc/cpuinfo"):
            assert not args and (codecs.lookup(kwargs["encoding"]).name, kwargs["errors"]) == ("utf-8", "replace")
            if text is None:
                raise FileNotFoundError(2, "No such file or directory", str(self))
            return text
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)


def test_the_cpu_is_read_from_the_first_key_with_a_value(monkeypatch):
    import hashlib as h
    import platform

    _cpuinfo_reads(monkeypatch, CPUINFO)
    assert files._cpuinfo(("Hardware", "model name")) == "Fancy: CPU 3000"
    assert files._cpuinfo(("nothing",)) is None
    assert files.cpu_model() == "Fancy: CPU 3000"
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    assert files.cpu_identity() == h.sha256(b"x86_64|Fancy: CPU 3000|avx fpu sse2").hexdigest()[:16]
    _cpuinfo_reads(monkeypatch, "Hardware\t: Board 1\nFeatures\t: neon fp\n")  # ARM's words
    assert files.cpu_model() == "Board 1"
    assert files.cpu_identity() == h.sha256(b"x86_64|Board 1|fp neon").hexdigest()[:16]
    _cpuinfo_reads(monkeypatch, "cpu model\t: MIPS 24Kc\n")
    assert files.cpu_model() == "MIPS 24Kc"
    _cpuinfo_reads(monkeypatch, None)
    assert files._cpuinfo(("model name",)) is None
    assert files.cpu_identity() == h.sha256(f"x86_64|{files.cpu_model()}|".encode()).hexdigest()[:16]


def test_without_cpuinfo_the_model_is_the_systems_word(monkeypatch):
    import platform
    import subprocess as sp
    from types import SimpleNamespace

    _cpuinfo_reads(monkeypatch, None)
    monkeypatch.setattr(files.sys, "platform", "darwin")
    answers = iter([SimpleNamespace(returncode=0, stdout="Apple M9\n"), SimpleNamespace(returncode=1, stdout="x")])
    asked = []
    monkeypatch.setattr(sp, "run", lambda argv, **kw: asked.append((argv, kw)) or next(answers))
    assert files.cpu_model() == "Apple M9"
    assert asked[0] == (
        ["sysctl", "-n", "machdep.cpu.brand_string"],
        {"capture_output": True, "text": True, "check": False},
    )
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    assert files.cpu_model() == "arm"  # sysctl failed
    monkeypatch.setattr(files.sys, "platform", "linux")
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert files.cpu_model() == "unknown CPU model" and len(asked) == 2


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
