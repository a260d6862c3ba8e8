"""The provenance a run records: the installed versions, the checkout's commit, the CPU's model and identity."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from attngeom.base import files


def test_repo_and_versions(tmp_path: Path, monkeypatch):
    """The installed versions as Python and numpy report them; the checkout's HEAD commit, none without a checkout."""
    import platform

    import attngeom

    assert (files.REPO / "src" / "attngeom" / "base" / "files.py").is_file()
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
