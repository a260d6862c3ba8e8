import hashlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from attngeom import files
from attngeom.errors import InputError


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
