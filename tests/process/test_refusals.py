"""The exit contract where the environment is hostile: an interpreter that prints or answers anything, a
dependency that cannot be imported, an unwritable results folder, a bad --python-version, a damaged
measurement file under the docs, a Kaggle build the service could never take: one `error:` line and 2
(or 3 for an internal error), never a traceback, never a half-written output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from helpers.reports import assert_one_error_line, cli, run


def script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def reproduce(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(REPO / "reproduce.sh"), *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_an_interpreter_that_answers_a_version_to_anything_is_refused(tmp_path):
    fake = script(tmp_path / "python3", '#!/bin/sh\necho "3.12"\n')
    proc = reproduce("--help", cwd=tmp_path, ATTNGEOM_VENV=str(tmp_path / "v"), ATTNGEOM_PYTHON=str(fake))
    assert_one_error_line(proc, 2)
    assert "not a Python 3.10 to 3.13 (it reports '3.12')" in proc.stderr and not (tmp_path / "v").exists()


def test_an_interpreter_whose_sitecustomize_prints_is_read_for_its_version(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text('print("hello from sitecustomize")\n')
    wrapped = script(tmp_path / "python3", f'#!/bin/sh\nPYTHONPATH={site}:$PYTHONPATH exec {sys.executable} "$@"\n')
    proc = reproduce("--help", cwd=tmp_path, ATTNGEOM_SYSTEM_PYTHON=str(wrapped))
    assert "not a Python" not in proc.stderr
    assert proc.returncode == 0 and "verify" in proc.stdout, proc.stderr[-2000:]


def test_a_dependency_that_cannot_be_imported_is_one_internal_error_line(tmp_path):
    broken = tmp_path / "broken"
    (broken / "numpy").mkdir(parents=True)
    (broken / "numpy" / "__init__.py").write_text('raise ImportError("this numpy is broken")\n')
    proc = subprocess.run(
        [sys.executable, "-m", "attngeom", "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": f"{REPO / 'src'}:{broken}",
            "ATTNGEOM_CACHE": str(tmp_path / "cache"),
            "TMPDIR": str(tmp_path),  # where the log goes when the cache's folder cannot be named without numpy
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert_one_error_line(proc, 3, "error: internal error: ImportError: this numpy is broken")
    assert not (tmp_path / "out").exists()
    (log,) = tmp_path.glob("attngeom-error-*.log")
    assert "this numpy is broken" in log.read_text()


def test_a_results_folder_the_gpu_check_cannot_write_stops_it_before_any_step(tmp_path):
    proc = subprocess.run(
        ["bash", str(REPO / "bench" / "gpu_check.sh"), "--smoke"],
        cwd=tmp_path,
        env={**os.environ, "OUT": "/proc/self"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert_one_error_line(proc, 2, "error: /proc/self: cannot write the results there")


@pytest.mark.parametrize("version", ["3", "abc", "", "3.9", "3.14"])
def test_a_python_version_the_lock_has_no_wheels_for_is_refused_by_gpu_carry(tmp_path, version):
    proc = run([sys.executable, str(REPO / "bench" / "gpu_carry.py"), "--python-version", version], tmp_path)
    assert_one_error_line(proc, 2)
    assert "is not a Python version from 3.10 to 3.13" in proc.stderr


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A copy of the checkout's pages and measurement files, to be damaged (README.md, docs/, bench/results/)."""
    copy = tmp_path / "checkout"
    copy.mkdir()
    for part in ("README.md", "docs", "bench", "expected", "kaggle", "src", "pyproject.toml", "requirements.lock"):
        source = REPO / part
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, copy / part)
    return copy


def docs(checkout: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attngeom", "docs", *args],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout / "src")},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "field, value, says",
    [
        ("verify_s", float("nan"), "not a finite number"),
        ("verify_s", -1.0, "outside"),
        ("verify_s", 0, "outside"),
        ("verify_s", True, "a boolean where a number is due"),
        ("machine", None, "where a string is due"),
        ("machine", "<b>fast</b>", "does not match"),
    ],
)
def test_a_damaged_measurement_file_is_one_error_line_and_no_page_changes(checkout, field, value, says):
    path = checkout / "bench" / "results" / "verify.json"
    doc = json.loads(path.read_text())
    (doc["measured"] if field == "machine" else doc)[field] = value
    path.write_text(json.dumps(doc))
    pages = {p: p.read_bytes() for p in [checkout / "README.md", *sorted((checkout / "docs").glob("*.md"))]}
    for args in ((), ("--check",)):
        proc = docs(checkout, *args)
        assert_one_error_line(proc, 2)
        assert says in proc.stderr, proc.stderr
    assert {p: p.read_bytes() for p in pages} == pages


@pytest.mark.slow
def test_a_later_page_that_cannot_be_made_leaves_the_earlier_ones_as_they_were(checkout):
    readme = checkout / "README.md"
    readme.write_text(readme.read_text().replace("The verify stage takes", "The verify stage took", 1))
    (checkout / "bench" / "results" / "train-quick.json").write_text("{ damaged")
    pages = [readme, *sorted((checkout / "docs").glob("*.md"))]
    before = {p: p.read_bytes() for p in pages}
    proc = docs(checkout)
    assert_one_error_line(proc, 2)
    assert "train-quick.json" in proc.stderr
    assert {p: p.read_bytes() for p in pages} == before  # README.md, stale, is not rewritten alone


def test_a_run_folder_that_is_not_utf8_is_refused_before_it_is_made(tmp_path):
    proc = cli("rerun", "--preset", "smoke", "--out", b"r\xff", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (2, "error: r\\xff: not UTF-8; name files and folders in UTF-8\n")
    assert list(tmp_path.iterdir()) == []
