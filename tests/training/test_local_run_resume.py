"""`rerun --resume` continues the trajectory an uninterrupted run follows, or refuses with one line and
changes nothing: another code generation, core count or training code, a checkpoint of another run or
past the run's stop; and a kill at the exact write (strace's fault injection) never parts members trained
together (a kill at each write of a run of one model: tests/process/test_kill_at_every_rename.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO
from helpers.runs import restore_device_settings, same_files, trained_in_process

from attngeom import cli
from attngeom.base import fetch
from attngeom.training import data, runs, trajectory

STOPPED = ["rerun", "--preset", "smoke", "--variants", "softmax", "--windows", "2", "--stop-after", "20", "--quiet"]


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory) -> Path:
    """A smoke run of softmax stopped after step 20 (read only: copy it to change it)."""
    return trained_in_process(tmp_path_factory.mktemp("stopped") / "run", STOPPED)


def _copy(run: Path, tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    out = tmp_path / "run"
    shutil.copytree(run, out)
    return out, {p.name: p.read_bytes() for p in (out / runs.MANIFEST, runs.checkpoint_path(out, "softmax", 0))}


def _refused(out: Path, before: dict[str, bytes], capsys, *options: str) -> str:
    """Resume `out`: one `error:` line, status 2, the manifest and the checkpoint as they were."""
    capsys.readouterr()
    assert cli.main(["rerun", "--resume", str(out), "--quiet", *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert (out / runs.MANIFEST).read_bytes() == before[runs.MANIFEST]
    assert runs.checkpoint_path(out, "softmax", 0).read_bytes() == before["softmax_s0.npz"]
    return err


@pytest.mark.slow
def test_a_resume_under_another_code_generation_is_refused_and_changes_nothing(
    stopped_run, tmp_path, monkeypatch, capsys
):
    restore_device_settings(monkeypatch)
    out, before = _copy(stopped_run, tmp_path)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=SSE4_2")
    err = _refused(out, before, capsys)
    assert "cannot resume: cpu_code_generation was" in err and "SSE4_2" in err


@pytest.mark.slow
def test_a_resume_on_another_number_of_cores_is_refused(stopped_run, tmp_path, monkeypatch, capsys):
    restore_device_settings(monkeypatch)
    out, before = _copy(stopped_run, tmp_path)
    recorded = json.loads(before[runs.MANIFEST])["trajectory"]["cores"]
    monkeypatch.setattr(trajectory, "cores", lambda: recorded + 1)
    assert f"cores was {recorded}, is now {recorded + 1}" in _refused(out, before, capsys)


@pytest.mark.slow
def test_a_manifest_that_lacks_a_training_field_is_refused_not_filled_with_a_default(
    stopped_run, tmp_path, monkeypatch, capsys
):
    restore_device_settings(monkeypatch)
    out, before = _copy(stopped_run, tmp_path)
    manifest = json.loads(before[runs.MANIFEST])
    del manifest["config"]["train"]["steps"]  # today's default is the paper's 12,000
    before[runs.MANIFEST] = json.dumps(manifest).encode()
    (out / runs.MANIFEST).write_bytes(before[runs.MANIFEST])
    assert "config.train: missing key(s) steps" in _refused(out, before, capsys)


def _restamp(path: Path, **changes) -> None:
    """Rewrite a checkpoint with its stamp changed (a key set to None is removed; no stamp at all if empty)."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    stamp = {**runs.checkpoint_stamp(arrays), **changes}
    arrays[runs.STAMP] = runs.stamp_array({k: v for k, v in stamp.items() if v is not None})
    if not changes:
        del arrays[runs.STAMP]
    runs.write_checkpoint(path, arrays)


@pytest.mark.slow
@pytest.mark.parametrize(
    "changes, message",
    [
        ({"lr": 0.003}, "lr was 0.003, is now 0.0003"),
        ({"training_code": "0" * 64}, "training_code was"),
        ({"member": 1}, "member was 1, is now 0"),
        ({}, "it records no trajectory"),
    ],
)
def test_a_checkpoint_of_another_trajectory_is_refused(stopped_run, tmp_path, monkeypatch, capsys, changes, message):
    restore_device_settings(monkeypatch)
    out, _ = _copy(stopped_run, tmp_path)
    _restamp(runs.checkpoint_path(out, "softmax", 0), **changes)
    before = {p.name: p.read_bytes() for p in (out / runs.MANIFEST, runs.checkpoint_path(out, "softmax", 0))}
    err = _refused(out, before, capsys)
    assert "not a checkpoint of this run's trajectory" in err and message in err


@pytest.mark.slow
def test_a_checkpoint_past_the_runs_stop_is_refused(stopped_run, tmp_path, monkeypatch, capsys):
    restore_device_settings(monkeypatch)
    out, _ = _copy(stopped_run, tmp_path)
    manifest = json.loads((out / runs.MANIFEST).read_text())
    manifest["stopped_after"] = manifest["config"]["train"]["stop_after"] = 10
    (out / runs.MANIFEST).write_text(json.dumps(manifest))
    before = {p.name: p.read_bytes() for p in (out / runs.MANIFEST, runs.checkpoint_path(out, "softmax", 0))}
    assert "holds 21 steps, against 11 in the run stopped after step 10" in _refused(out, before, capsys)


@pytest.mark.slow
def test_a_resumed_run_records_each_segment(stopped_run, tmp_path, monkeypatch, capsys):
    restore_device_settings(monkeypatch)
    out, _ = _copy(stopped_run, tmp_path)
    assert cli.main(["rerun", "--resume", str(out), "--quiet"]) == 0
    manifest = runs.require_complete(out)
    first, second = manifest["segments"]
    assert (first["from_steps"], first["to_steps"]) == ({"softmax_s0": 0}, {"softmax_s0": 21})
    assert (second["from_steps"], second["to_steps"]) == ({"softmax_s0": 21}, {"softmax_s0": 60})
    for segment in (first, second):
        assert segment["machine"] == runs.run_machine() and segment["wall_s"] > 0
        assert segment["training_code"] == trajectory.code_hash() == manifest["trajectory"]["training_code"]
    assert not (out / runs.CHECKPOINTS).exists()


@pytest.mark.slow
def test_a_segment_left_open_by_a_killed_process_is_closed_on_resume(stopped_run, tmp_path, monkeypatch):
    restore_device_settings(monkeypatch)
    out, _ = _copy(stopped_run, tmp_path)
    manifest = json.loads((out / runs.MANIFEST).read_text())
    for key in ("to_steps", "wall_s"):  # as a process ended by a signal during a chunk leaves it
        del manifest["segments"][-1][key]
    (out / runs.MANIFEST).write_text(json.dumps(manifest))
    assert cli.main(["rerun", "--resume", str(out), "--quiet"]) == 0
    first, second = runs.require_complete(out)["segments"]
    assert first["to_steps"] == {"softmax_s0": 21} == second["from_steps"] and "wall_s" not in first
    assert first["ended"].startswith("without closing") and second["to_steps"] == {"softmax_s0": 60}


# A kill at the exact write: strace stops the process with SIGKILL at the Nth rename of its main thread (strace
# counts each thread's calls apart), N read off a traced uninterrupted run of the same command.

STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(STRACE is None and not os.environ.get("CI"), reason="strace is not installed")


def _command(*options: str) -> list[str]:
    return [sys.executable, "-m", "attngeom", "rerun", "--quiet", *options]


def _env() -> dict[str, str]:
    # The session's compilation cache: jax writes its entries in place, so a run that fills it renames
    # what a run that reads it renames (`_killed_at` checks that the kill landed on its target).
    return dict(os.environ, PYTHONPATH=str(REPO / "src"))


def _strace(cmd: list[str], log: Path, inject_at: int | None = None) -> tuple[subprocess.CompletedProcess, int]:
    """`cmd` under strace (with a SIGKILL at its main thread's `inject_at`-th rename): its end and its pid."""
    assert STRACE, "strace is not installed (.ci/tools.sh installs it)"
    trace = [STRACE, "-f", "-qq", "-e", "signal=none", "-e", "trace=rename", "-o", str(log)]
    if inject_at is not None:
        trace += ["-e", f"inject=rename:signal=KILL:when={inject_at}"]
    pid_file = log.with_suffix(".pid")
    shell = ["sh", "-c", f'echo $$ > "{pid_file}"; exec "$@"', "sh", *cmd]  # the pid the command runs under
    proc = subprocess.run([*trace, *shell], env=_env(), cwd=REPO, capture_output=True, text=True, timeout=900)
    return proc, int(pid_file.read_text())


def _main_thread_renames(log: Path, pid: int) -> list[str]:
    """The targets of the renames the process's main thread made, in order (a call another thread
    interrupted is logged `<unfinished ...>`, its target already named)."""
    found = []
    for line in log.read_text().splitlines():
        m = re.match(rf'{pid}\s+rename\("[^"]*", "([^"]*)"', line)
        if m:
            found.append(m.group(1))
    return found


def _traced_run(tmp: Path, *options: str) -> tuple[Path, list[str]]:
    """An uninterrupted run of `options` under strace: its folder and its main thread's renames."""
    out, log = tmp / "whole", tmp / "whole.strace"
    proc, pid = _strace(_command(*options, "--out", str(out)), log)
    assert proc.returncode == 0, proc.stderr
    renames = _main_thread_renames(log, pid)
    assert renames, "no rename traced"
    return out, renames


def _killed_at(tmp: Path, renames: list[str], target: str, which: int, *options: str) -> Path:
    """The run of `options` killed at the `which`-th rename (0 first, -1 last) of its main thread onto `target`."""
    out, log = tmp / "cut", tmp / "cut.strace"
    at = [i for i, t in enumerate(renames) if t.endswith(target)][which] + 1
    proc, pid = _strace(_command(*options, "--out", str(out)), log, inject_at=at)
    assert proc.returncode != 0, "the injected kill did not stop the run"
    cut = _main_thread_renames(log, pid)
    assert len(cut) == at and cut[-1].endswith(target), f"killed at {cut[-1:]}, not at {target}"
    return out


@pytest.fixture(scope="module")
def warm_cache(published_root) -> None:
    """The corpus and the published bundles in the download cache before a traced run: a first download's
    renames would shift the count of the run that downloads and not of the one after it."""
    data.load_corpus()
    fetch.fetch_companion()  # verify's first read of the companion's runs


def _qk_bundles(a: Path, b: Path) -> None:
    same_files(a / "attngeom-qk", b / "attngeom-qk", ["attn_yat_b_s0.npz", "geom_yat_b_s0.npz", "windows_yat_b_s0.npz"])
    assert (a / runs.TRAIN_LOG).read_text() == (b / runs.TRAIN_LOG).read_text()  # no step trained twice


ENSEMBLE = (
    "--preset",
    "smoke",
    "--variants",
    "yat_b",
    "--windows",
    "2",
    "--members",
    "2",
    "--members-mode",
    "together",
)


@pytest.mark.slow
@needs_strace
def test_members_trained_together_killed_between_their_checkpoints_resume_together(tmp_path, warm_cache):
    whole, renames = _traced_run(tmp_path, *ENSEMBLE)
    # member 1's checkpoint at step 20 put in place after member 0's: the kill parts them on today's disk
    cut = _killed_at(tmp_path, renames, "member-1/checkpoints/yat_b_s0.npz", 0, *ENSEMBLE)
    proc = subprocess.run(_command("--resume", str(cut)), env=_env(), cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "put in place" in proc.stdout and "trained together" in proc.stdout  # the recorded mode, not the CPU's
    for m in (0, 1):
        _qk_bundles(whole / f"member-{m}", cut / f"member-{m}")
