"""reproduce.sh's own endings: its failures are one `error:` line and 2, an interrupted first
install is built again, and Python never runs code from the caller's working folder.

Every case names its environment folder (ATTNGEOM_VENV), so none touches the checkout's `.venv`."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from helpers import REPO
from helpers.reports import assert_one_error_line
from helpers.signals import held, in_a_terminal

SCRIPT = REPO / "reproduce.sh"


def run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SCRIPT), *args], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def ready_venv() -> str:
    """The environment these tests run in, when reproduce.sh built it from this lock (as in CI)."""
    lock = hashlib.sha256((REPO / "requirements.lock").read_bytes()).hexdigest()
    marker = Path(sys.prefix) / ".lock-sha256"
    if not marker.is_file() or marker.read_text().strip() != lock:
        pytest.skip("the tests do not run in an environment reproduce.sh built from requirements.lock")
    return sys.prefix


def test_python_never_imports_from_the_working_folder(ready_venv, tmp_path):
    (tmp_path / "random.py").write_text('print("my dice script")\n')
    (tmp_path / "runpy.py").write_text('print("my dice script")\n')
    proc = run("--help", cwd=tmp_path, ATTNGEOM_VENV=ready_venv)
    assert proc.returncode == 0 and "dice" not in proc.stdout + proc.stderr, proc.stderr[-2000:]


def test_a_bad_bench_option_is_one_error_line(ready_venv, tmp_path):
    assert_one_error_line(run("bench", "verify", "--no-such-option", cwd=tmp_path, ATTNGEOM_VENV=ready_venv), 2)


def test_no_test_selected_is_unusable_input(ready_venv, tmp_path):
    proc = run(
        "test", "tests/geometry/test_laws.py", "-k", "no_test_has_this_name", cwd=tmp_path, ATTNGEOM_VENV=ready_venv
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("error: test:"), proc.stderr


def test_a_missing_lock_is_one_error_line(tmp_path):
    proc = run("--help", cwd=tmp_path, ATTNGEOM_VENV=str(tmp_path / "v"), ATTNGEOM_LOCK=str(tmp_path / "none.lock"))
    assert_one_error_line(proc, 2)
    assert "none.lock" in proc.stderr and not (tmp_path / "v").exists()


def test_an_environment_folder_that_is_a_file_is_one_error_line(tmp_path):
    (tmp_path / "v").write_text("a file")
    assert_one_error_line(run("--help", cwd=tmp_path, ATTNGEOM_VENV=str(tmp_path / "v")), 2)


def test_a_missing_interpreter_is_one_error_line(tmp_path):
    proc = run("--help", cwd=tmp_path, ATTNGEOM_VENV=str(tmp_path / "v"), ATTNGEOM_PYTHON=str(tmp_path / "python9"))
    assert_one_error_line(proc, 2)


def test_an_interpreter_that_is_not_310_to_313_is_refused_whatever_its_status(tmp_path):
    fake = tmp_path / "python3.9"
    fake.write_text('#!/bin/sh\necho "Python 3.9.18"\nexit 0\n')
    fake.chmod(0o755)
    proc = run("--help", cwd=tmp_path, ATTNGEOM_VENV=str(tmp_path / "v"), ATTNGEOM_PYTHON=str(fake))
    assert_one_error_line(proc, 2)
    assert "3.9" in proc.stderr and not (tmp_path / "v").exists()


def test_an_environment_folder_that_cannot_be_written_is_one_error_line(tmp_path, tmpfs):
    checkout = tmpfs(tmp_path / "checkout", read_only=True)
    proc = run("--help", cwd=tmp_path, ATTNGEOM_VENV=str(checkout / ".venv"))
    assert_one_error_line(proc, 2)
    assert str(checkout / ".venv") in proc.stderr


def test_a_folder_reproduce_sh_did_not_build_is_left_alone(tmp_path):
    mine = tmp_path / "v"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    assert_one_error_line(run("--help", cwd=tmp_path, ATTNGEOM_VENV=str(mine)), 2)
    assert (mine / "notes.txt").read_text() == "mine"


def _tiny_wheel(folder: Path) -> Path:
    """A one-module wheel, so that an environment builds offline in seconds."""
    files = {
        "tinypkg/__init__.py": b"VALUE = 1\n",
        "tinypkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
        "tinypkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for name, data in files.items()
    ]
    files["tinypkg-0.1.dist-info/RECORD"] = ("\n".join([*record, "tinypkg-0.1.dist-info/RECORD,,"]) + "\n").encode()
    wheel = folder / "tinypkg-0.1-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return wheel


@pytest.fixture
def tiny_lock(tmp_path) -> dict:
    """The environment of a build from a one-wheel lock, offline (no ATTNGEOM_VENV), its build log in a
    temporary folder of its own (TMPDIR)."""
    wheel = _tiny_wheel(tmp_path / "wheels")
    lock = tmp_path / "tiny.lock"
    lock.write_text(f"tinypkg==0.1 --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n")
    env = {k: v for k, v in os.environ.items() if k != "ATTNGEOM_VENV"}
    (tmp_path / "tmp").mkdir()
    return {
        **env,
        "ATTNGEOM_LOCK": str(lock),
        "ATTNGEOM_PYTHON": sys.executable,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheel.parent),
        "TMPDIR": str(tmp_path / "tmp"),
    }


def _build_logs(env: dict) -> list[Path]:
    return sorted(Path(env["TMPDIR"]).glob("attngeom-venv.*.log"))


def _built_from(venv: Path, env: dict) -> bool:
    lock = hashlib.sha256(Path(env["ATTNGEOM_LOCK"]).read_bytes()).hexdigest()
    imported = subprocess.run([str(venv / "bin" / "python"), "-c", "import tinypkg"], check=False).returncode == 0
    return (venv / ".lock-sha256").read_text().strip() == lock and imported


@pytest.mark.slow
def test_an_interrupted_first_install_is_built_again(tmp_path, tiny_lock):
    venv = tmp_path / "venv"
    env = {**tiny_lock, "ATTNGEOM_VENV": str(venv)}
    for _ in range(5):  # a try counts once Ctrl-C reached a build under way
        shutil.rmtree(venv, ignore_errors=True)
        # `bench` with no name: the environment is built first, then the command is refused (2).
        with subprocess.Popen(
            in_a_terminal([str(SCRIPT), "bench"]),
            cwd=tmp_path,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        ) as first:
            deadline = time.monotonic() + 120
            while not (venv / "bin" / "python").exists() and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            # frozen, the build is seen under way or done: a loaded machine can starve this test that long
            with held(first.pid) as live:
                under_way = live and not (venv / ".lock-sha256").exists()
                if under_way:
                    os.killpg(first.pid, signal.SIGINT)  # Ctrl-C in the terminal: the whole group
            err = first.stderr.read()
            status = first.wait(timeout=120)
        if under_way:
            break
    assert under_way, "the build ended before Ctrl-C 5 times in a row"
    assert status == 130, err
    assert err.strip().splitlines()[-1] == "interrupted" and not (venv / ".lock-sha256").exists()

    again = subprocess.run([str(SCRIPT), "bench"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 2 and "unfinished build" in again.stderr, again.stderr
    assert again.stderr.strip().splitlines()[-1].startswith("error: bench:") and _built_from(venv, env)
    assert (
        len(_build_logs(env)) == 1
    )  # the interrupted build's (its path was shown as it began); none of the build after


def test_a_build_that_fails_names_its_log_and_one_that_succeeds_leaves_none(tmp_path, tiny_lock):
    """The build's log is for a build that failed: the error line names it, and it holds pip's reason."""
    missing = tmp_path / "missing.lock"
    missing.write_text("nosuchpkg==1.0 --hash=sha256:" + "0" * 64 + "\n")
    failed = run(
        "bench", cwd=tmp_path, **{**tiny_lock, "ATTNGEOM_LOCK": str(missing), "ATTNGEOM_VENV": str(tmp_path / "v1")}
    )
    (log,) = _build_logs(tiny_lock)
    assert failed.returncode == 2 and "Traceback" not in failed.stderr, failed.stderr
    assert failed.stderr.strip().splitlines()[-1] == f"error: could not install the locked dependencies; see {log}"
    assert "nosuchpkg" in log.read_text()
    log.unlink()
    done = run("bench", cwd=tmp_path, **{**tiny_lock, "ATTNGEOM_VENV": str(tmp_path / "v2")})
    assert done.returncode == 2 and "error: bench:" in done.stderr and _built_from(tmp_path / "v2", tiny_lock)
    assert _build_logs(tiny_lock) == []


@pytest.mark.slow
def test_the_checkouts_venv_left_without_pip_by_an_earlier_version_is_built_again(tmp_path, tiny_lock):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy2(SCRIPT, checkout / SCRIPT.name)
    venv = checkout / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)  # what Ctrl-C left
    done = subprocess.run(
        [str(checkout / SCRIPT.name), "bench"], cwd=tmp_path, env=tiny_lock, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 2 and "unfinished build" in done.stderr and _built_from(venv, tiny_lock), done.stderr


def test_a_system_python_runs_the_command_and_builds_nothing(tmp_path):
    proc = run(
        "--help", cwd=tmp_path, ATTNGEOM_SYSTEM_PYTHON=sys.executable, ATTNGEOM_VENV=str(tmp_path / "v"), PYTHONPATH=""
    )
    assert proc.returncode == 0 and "rerun" in proc.stdout, proc.stderr[-2000:]
    assert not (tmp_path / "v").exists()


def test_a_module_the_system_python_lacks_is_one_error_line_naming_it(tmp_path):
    bare = tmp_path / "python3"  # this interpreter without its site-packages: the standard library alone
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    bare.chmod(0o755)
    proc = run("rerun", "--help", cwd=tmp_path, ATTNGEOM_SYSTEM_PYTHON=str(bare), ATTNGEOM_VENV=str(tmp_path / "v"))
    assert_one_error_line(proc, 2, starts=f"error: ATTNGEOM_SYSTEM_PYTHON={bare}: `rerun` needs the module(s) numpy,")
    assert " jax," in proc.stderr and not (tmp_path / "v").exists()
