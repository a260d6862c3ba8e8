"""Run folders: never written over; complete only when finished; changed files are caught."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO

from attngeom.base.errors import InputError
from attngeom.base.files import is_temporary, machine
from attngeom.training import runs

CONFIG = {"preset": "smoke", "variants": ["softmax"], "seeds": [0], "train": {"steps": 60, "stop_after": None}}
"""What every manifest names of its run (the schema requires it of a run folder)."""


def _finished_run(path):
    run = runs.RunFolder(runs.new_run_dir(path, "x"), config=CONFIG)
    (run.path / "bundle").mkdir()
    (run.path / "bundle" / "a.npz").write_bytes(b"abc")
    run.log_steps("softmax", 0, 5, np.array([1.5, 1.25], np.float32))
    run.complete(variant_wall_s={"softmax_s0": 1.0})
    return run


def test_a_finished_run_lists_every_file_with_its_sha256(tmp_path):
    run = _finished_run(tmp_path / "r")
    manifest = runs.require_complete(run.path)
    assert manifest["completed"] is True
    assert set(manifest["files"]) == {"bundle/a.npz", runs.TRAIN_LOG}
    assert manifest["files"]["bundle/a.npz"] == runs.sha256_file(run.path / "bundle" / "a.npz")
    assert manifest["config"] == CONFIG
    assert {"versions", "device", "xla_flags", "wall_s", "git_commit"} <= set(manifest)
    assert manifest["versions"]["jax"]


def test_the_training_log_has_one_line_per_step(tmp_path):
    run = _finished_run(tmp_path / "r")
    lines = [json.loads(x) for x in (run.path / runs.TRAIN_LOG).read_text().splitlines()]
    assert lines == [
        {"variant": "softmax", "seed": 0, "step": 5, "loss": 1.5},
        {"variant": "softmax", "seed": 0, "step": 6, "loss": 1.25},
    ]


def test_an_unfinished_run_is_never_taken_for_a_finished_one(tmp_path):
    run = runs.RunFolder(runs.new_run_dir(tmp_path / "r", "x"), config=CONFIG)
    (run.path / "half.npz").write_bytes(b"partial")
    with pytest.raises(InputError, match="did not complete"):
        runs.require_complete(run.path)
    run.fail(KeyboardInterrupt("stopped"))
    with pytest.raises(InputError, match="KeyboardInterrupt"):
        runs.require_complete(run.path)


def test_a_changed_or_missing_file_is_caught(tmp_path):
    run = _finished_run(tmp_path / "r")
    (run.path / "bundle" / "a.npz").write_bytes(b"abd")
    with pytest.raises(InputError, match="changed since"):
        runs.require_complete(run.path)
    (run.path / "bundle" / "a.npz").unlink()
    with pytest.raises(InputError, match="missing"):
        runs.require_complete(run.path)


def test_a_folder_without_manifest_is_refused(tmp_path):
    with pytest.raises(InputError, match="manifest"):
        runs.require_complete(tmp_path)


def test_a_run_is_never_written_over(tmp_path):
    run = _finished_run(tmp_path / "r")
    with pytest.raises(InputError, match="never written over"):
        runs.new_run_dir(run.path, "x")
    assert runs.require_complete(run.path)["completed"] is True


def test_default_run_folders_are_new_and_labelled(tmp_path):
    path = runs.new_run_dir(None, "smoke-s0", runs_dir=tmp_path / "runs")
    assert path.is_dir() and path.parent == tmp_path / "runs" and path.name.endswith("-smoke-s0")
    (tmp_path / "empty").mkdir()
    assert runs.new_run_dir(tmp_path / "empty", "x") == tmp_path / "empty"  # an existing empty folder is fine


def test_only_an_unfinished_run_is_resumed_and_its_error_is_cleared(tmp_path):
    with pytest.raises(InputError, match="already completed"):
        runs.RunFolder.resume(_finished_run(tmp_path / "done").path)
    with pytest.raises(InputError, match="manifest"):
        runs.RunFolder.resume(tmp_path)
    run = runs.RunFolder(runs.new_run_dir(tmp_path / "r", "x"), config=CONFIG)
    run.fail(KeyboardInterrupt("stopped"))
    run.release()
    resumed = runs.RunFolder.resume(run.path)
    manifest = json.loads((run.path / runs.MANIFEST).read_text())
    assert "error" not in manifest and len(manifest["resumed_utc"]) == 1 and resumed.manifest == manifest


def test_trimming_the_log_keeps_the_steps_before_each_checkpoint(tmp_path):
    run = runs.RunFolder(runs.new_run_dir(tmp_path / "r", "x"), config=CONFIG)
    run.log_steps("softmax", 0, 0, np.arange(4, dtype=np.float32))
    run.log_steps("yat_b", 0, 0, np.arange(3, dtype=np.float32))
    with open(run.path / runs.TRAIN_LOG, "a") as f:
        f.write('{"variant": "yat_b", "se')  # a line torn by a kill
    run.write_log(run.kept_log({("softmax", 0): 2}))
    lines = [json.loads(x) for x in (run.path / runs.TRAIN_LOG).read_text().splitlines()]
    assert [(r["variant"], r["step"]) for r in lines] == [("softmax", 0), ("softmax", 1)]


def test_a_run_folder_is_claimed_by_one_process_at_a_time(tmp_path):
    path = runs.new_run_dir(tmp_path / "r", "x")
    assert runs.new_run_dir(path, "x") == path  # still empty: two commands can both get this far
    first = runs.RunFolder(path, config=CONFIG)
    with pytest.raises(InputError, match="in use by another run"):
        runs.RunFolder(path, config=CONFIG)
    first.fail(KeyboardInterrupt("stopped"))
    with pytest.raises(InputError, match="in use by another run"):
        runs.RunFolder.resume(path)
    first.release()
    with pytest.raises(InputError, match="never written over"):
        runs.RunFolder(path, config=CONFIG)
    assert json.loads((path / runs.MANIFEST).read_text())["config"] == CONFIG


def test_another_process_holding_a_run_folder_keeps_it(tmp_path):
    path = runs.new_run_dir(tmp_path / "r", "x")
    hold = (
        f"import sys; from attngeom.training import runs; runs.claim({str(path)!r}); "
        "print('held', flush=True); sys.stdin.read()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match=f"in use by another run \\(process {holder.pid}\\)"):
            runs.RunFolder(path, config=CONFIG)
        assert not (path / runs.MANIFEST).exists()
    finally:
        holder.communicate("", timeout=60)
    runs.RunFolder(path, config=CONFIG).release()  # the lock dies with its process


def test_default_run_names_never_collide(tmp_path):
    paths = [runs.new_run_dir(None, "smoke-s0", runs_dir=tmp_path) for _ in range(3)]
    assert len(set(paths)) == 3 and all(p.is_dir() and p.parent == tmp_path for p in paths)


def test_the_manifest_machine_names_the_xla_cpu_code_generation(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_deterministic_ops=true --xla_cpu_max_isa=SSE4_2")
    assert runs.run_machine() == f"{machine()}, XLA CPU ISA SSE4_2 (XLA_FLAGS --xla_cpu_max_isa)"
    monkeypatch.delenv("XLA_FLAGS")
    best = runs.xla_cpu_isa()
    assert best.removeprefix("default (the CPU's best: ").removesuffix(")") in {
        *(isa for isa, _ in runs.XLA_CPU_ISAS),
        "unknown",
    }


def _checkpoint(path: Path, done: int) -> None:
    runs.write_checkpoint(path, {"done": np.array(done), "losses": np.ones(done, np.float32)})


@pytest.mark.parametrize("renamed", [0, 1, 2])
def test_a_group_commit_cut_during_its_renames_is_completed(tmp_path, renamed):
    paths = [tmp_path / f"m{m}.npz" for m in range(3)]
    for p in paths:
        _checkpoint(p, 20)
        _checkpoint(runs.pending_path(p), 40)  # every pending written: the renames had begun
    for p in paths[:renamed]:
        os.replace(runs.pending_path(p), p)
    assert "step 40" in runs.settle_group(paths, 60)
    assert [runs.checkpoint_step(p, 60) for p in paths] == [40, 40, 40]
    assert not any(runs.pending_path(p).exists() for p in paths)


@pytest.mark.parametrize("written", [1, 2])
def test_a_group_commit_cut_before_its_renames_is_discarded(tmp_path, written):
    paths = [tmp_path / f"m{m}.npz" for m in range(3)]
    for p in paths:
        _checkpoint(p, 20)
    for p in paths[:written]:
        _checkpoint(runs.pending_path(p), 40)
    assert "discarded" in runs.settle_group(paths, 60)
    assert [runs.checkpoint_step(p, 60) for p in paths] == [20, 20, 20]
    assert not any(runs.pending_path(p).exists() for p in paths)
    assert runs.settle_group(paths, 60) is None


def test_a_runs_files_leave_out_checkpoints_and_a_killed_writers_leftovers(tmp_path):
    for name in (
        "a.npz",
        "b/c.json",
        "checkpoints/x.npz",
        ".a.npz.k2j3.tmp",
        "report/.r.json.1x.tmp",
        ".report.9.tmp/f",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    assert sorted(runs.file_hashes(tmp_path)) == ["a.npz", "b/c.json"]
    from attngeom.base.files import remove_temporaries

    assert sorted(remove_temporaries(tmp_path)) == [".a.npz.k2j3.tmp", ".report.9.tmp", "report/.r.json.1x.tmp"]
    assert not any(is_temporary(p.name) for p in tmp_path.rglob("*"))
    assert not is_temporary(".tmp") and not is_temporary("a.tmp") and not is_temporary(".lock")
