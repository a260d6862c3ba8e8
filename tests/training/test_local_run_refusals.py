"""A refused rerun changes nothing and leaves nothing: every check of a resume (jax's settings, each checkpoint
loaded whole into its model, the training log) runs before the manifest or any file is touched, and every
option of a new run is checked before its folder is claimed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO
from helpers.runs import restore_device_settings, trained_in_process

from attngeom import cli
from attngeom.training import runs

STOPPED = ["rerun", "--preset", "smoke", "--variants", "softmax", "--windows", "2", "--stop-after", "20", "--quiet"]


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory) -> Path:
    """A smoke run of softmax stopped after step 20 (read only: copy it to change it)."""
    return trained_in_process(tmp_path_factory.mktemp("stopped") / "run", STOPPED)


def copied(run: Path, tmp_path: Path) -> Path:
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


def everything(run: Path) -> dict[str, bytes]:
    """Every file of the run but its lock (which names the process that last claimed it)."""
    return {
        p.relative_to(run).as_posix(): p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != runs.LOCK
    }


def resume(run: Path, **env: str) -> subprocess.CompletedProcess:
    """`rerun --resume RUN` in a process of its own, with `env` set before jax loads."""
    return subprocess.run(
        [sys.executable, "-m", "attngeom", "rerun", "--resume", str(run), "--quiet"],
        env={**os.environ, "PYTHONPATH": str(REPO / "src"), **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def assert_refused(proc: subprocess.CompletedProcess, says: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "setting, says",
    [
        ({"JAX_DEFAULT_PRNG_IMPL": "rbg"}, 'jax_config: jax_default_prng_impl was "threefry2x32", is now "rbg"'),
        ({"JAX_THREEFRY_PARTITIONABLE": "0"}, "jax_config: jax_threefry_partitionable was true, is now false"),
        ({"JAX_ENABLE_X64": "1"}, "jax_config: jax_enable_x64 was false, is now true"),
    ],
)
def test_a_resume_under_other_jax_settings_is_refused_and_changes_nothing(stopped_run, tmp_path, setting, says):
    run = copied(stopped_run, tmp_path)
    before = everything(run)
    assert_refused(resume(run, **setting), says)
    assert everything(run) == before


def rewritten(path: Path, change) -> None:
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    change(arrays)
    runs.write_checkpoint(path, arrays)


def parameter(arrays: dict) -> str:
    return next(k for k in sorted(arrays) if k.startswith("state/0/") and arrays[k].dtype == np.float32)


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, says",
    [
        (lambda a: a.update({parameter(a): np.zeros((3, 1), np.float32)}), "checkpoint of another configuration"),
        (lambda a: a.pop(parameter(a)), "checkpoint of another configuration"),
        (lambda a: a.update({parameter(a): np.full_like(a[parameter(a)], np.nan)}), "a parameter that is not finite"),
    ],
    ids=["another shape", "missing", "NaN"],
)
def test_a_checkpoint_that_does_not_load_into_its_model_is_refused_before_anything_changes(
    stopped_run, tmp_path, change, says
):
    run = copied(stopped_run, tmp_path)
    rewritten(runs.checkpoint_path(run, "softmax", 0), change)
    before = everything(run)
    assert_refused(resume(run), says)
    assert everything(run) == before
    manifest = json.loads((run / runs.MANIFEST).read_text())
    assert (manifest["completed"], manifest["stopped_after"]) == (True, 20)


@pytest.mark.slow
@pytest.mark.parametrize(
    "line, says",
    [("{not json\n", "not a line of this run's training log"), ('{"variant": "softmax"}\n', "'step'")],
    ids=["not JSON", "no step"],
)
def test_a_damaged_training_log_is_refused_before_anything_changes(stopped_run, tmp_path, line, says):
    run = copied(stopped_run, tmp_path)
    log = run / runs.TRAIN_LOG
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join([*lines[:3], line, *lines[3:]]))
    before = everything(run)
    proc = resume(run)
    assert_refused(proc, says)
    assert f"{runs.TRAIN_LOG}:4:" in proc.stderr
    assert everything(run) == before


@pytest.mark.parametrize(
    "options, says",
    [
        (["--lr", "inf"], "--lr: a positive finite number, got inf"),
        (["--lr", "nan"], "--lr: a positive finite number, got nan"),
        (["--steps", "2000000000", "--stop-after", "3"], "--steps: from 2"),
        (["--windows", "0"], "--windows: from 1 to 256"),
    ],
)
def test_a_new_run_with_an_option_it_cannot_use_claims_no_folder(tmp_path, monkeypatch, capsys, options, says):
    restore_device_settings(monkeypatch)
    out = tmp_path / "run"
    assert cli.main(["rerun", "--preset", "smoke", "--out", str(out), *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err, err
    assert not out.exists()


def test_options_that_plan_a_run_are_refused_beside_resume(stopped_run, tmp_path, monkeypatch, capsys):
    restore_device_settings(monkeypatch)
    run = copied(stopped_run, tmp_path)
    before = everything(run)
    assert cli.main(["rerun", "--resume", str(run), "--steps", "99", "--lr", "0.1"]) == 2
    assert capsys.readouterr().err == (
        "error: --steps, --lr: a resumed run carries on as it was planned; give only --resume RUN there\n"
    )
    assert everything(run) == before


@pytest.mark.slow
def test_a_folder_left_holding_only_a_dead_runs_lock_takes_a_new_run(tmp_path, monkeypatch, capsys):
    restore_device_settings(monkeypatch)
    out = tmp_path / "run"
    out.mkdir()
    (out / runs.LOCK).write_text("12345\n")
    (out / ".manifest.json.abcd1234.tmp").write_text("{")  # its killed writer's
    assert cli.main([*STOPPED[:-1], "--out", str(out), "--quiet"]) == 0
    assert runs.require_complete(out)["stopped_after"] == 20
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
