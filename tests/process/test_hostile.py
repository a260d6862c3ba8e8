"""The exit contract in a hostile environment: full disks, odd `--out` targets, odd files in bundle folders
and caches, and a run's environment."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import REPO
from helpers.bundles import QK, copy_published, npz_array, rewrite_npz
from helpers.mounts import fill
from helpers.reports import (
    assert_consistent_set,
    assert_one_error_line,
    cli,
    command,
    run,
    stray_temporaries,
)

from attngeom.base import fetch
from attngeom.base.errors import InputError

# 5. Disks and names.


def test_verify_on_a_full_disk_is_2_naming_the_folder(published_root, tmp_path, tmpfs):
    disk = tmpfs(tmp_path / "disk", size="256k")
    fill(disk)
    proc = cli("--bundles", str(published_root), "--out", str(disk / "report"), cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert str(disk / "report") in proc.stderr and "No space left" in proc.stderr


def test_a_full_disk_while_writing_a_file_is_2_naming_the_folder(tmp_path, tmpfs, monkeypatch, capsys):
    from attngeom import cli as cli_module
    from attngeom.base.files import shown, write_atomic

    disk = tmpfs(tmp_path / "disk", size="64k")
    monkeypatch.setattr(cli_module, "_run", lambda argv: write_atomic(disk / "checkpoint.npz", b"\0" * 200_000))
    assert cli_module.main([]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"error: {shown(disk)}: cannot write there (No space left on device); free some space or write elsewhere\n"
    )
    assert sorted(p.name for p in disk.iterdir()) == [], "no temporary file is left behind"


@pytest.mark.slow
def test_a_rerun_whose_disk_fills_up_is_2_naming_the_folder(tmp_path, tmpfs):
    disk = tmpfs(tmp_path / "disk", size="512k")  # the manifest and the log fit, the first checkpoint does not
    run = ("rerun", "--preset", "smoke", "--steps", "4", "--variants", "softmax", "--quiet")
    proc = cli(*run, "--out", str(disk / "run"), cwd=tmp_path)
    assert proc.returncode == 2 and "No space left" in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {disk / 'run' / 'checkpoints'}: cannot write")
    assert "Traceback" not in proc.stderr


def _read_only(tmpfs, folder: Path, files: dict[str, str]) -> Path:
    """A read-only file system at `folder` holding `files` (name -> text)."""
    disk = tmpfs(folder)
    for name, text in files.items():
        (disk / name).parent.mkdir(parents=True, exist_ok=True)
        (disk / name).write_text(text)
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    return disk


def test_bands_and_summary_outputs_on_a_read_only_file_system_are_2_naming_the_file(tmp_path, tmpfs):
    kept = (REPO / "expected" / "measured" / "paper-step1200.json").read_text()
    disk = _read_only(tmpfs, tmp_path / "ro", {"kept.json": kept})
    ensemble = REPO / "expected" / "measured" / "ensemble-step1200.json"
    for args, target in (
        (("bands", str(ensemble), "--write", str(disk / "rerun.json")), disk / "rerun.json"),
        (("summary", str(tmp_path / "no-run"), "--out", str(disk / "kept.json")), None),  # its input is named first
    ):
        proc = cli(*args, cwd=tmp_path)
        assert_one_error_line(proc, 2)
        if target is not None:
            assert proc.stderr.startswith(f"error: {target}: cannot be written (Read-only file system)"), proc.stderr


def test_an_output_in_an_immutable_folder_is_2_naming_the_file(tmp_path, tmpfs):
    folder = tmpfs(tmp_path / "disk") / "kept"
    folder.mkdir()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    try:
        ensemble = REPO / "expected" / "measured" / "ensemble-step1200.json"
        proc = cli("bands", str(ensemble), "--write", str(folder / "rerun.json"), cwd=tmp_path)
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    assert_one_error_line(proc, 2)
    assert proc.stderr.startswith(f"error: {folder / 'rerun.json'}: cannot be written (Operation not permitted)")


@pytest.mark.slow
def test_a_resume_of_a_run_folder_on_a_read_only_file_system_is_2_and_a_file_size_limit_too(tmp_path, tmpfs):
    manifest = {
        "completed": False,
        "config": {"preset": "smoke", "variants": ["softmax"], "seeds": [0], "train": {"steps": 60}},
    }
    disk = _read_only(tmpfs, tmp_path / "ro", {"run/manifest.json": json.dumps(manifest)})
    proc = cli("rerun", "--resume", str(disk / "run"), "--quiet", cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert "Read-only file system" in proc.stderr
    fetch.fetch_corpus()  # in the download cache already: the first write past the limit is the run's
    out = tmp_path / "run"
    cmd = command("rerun", "--preset", "smoke", "--variants", "softmax", "--steps", "4", "--out", str(out), "--quiet")
    proc = run(["bash", "-c", 'ulimit -f 1000; exec "$@"', "bash", *cmd], tmp_path)  # 1000 KiB: no checkpoint fits
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: {out / 'checkpoints'}/softmax_s0.npz: cannot be written (File too large)")
    )


def test_an_out_name_of_255_bytes_is_written(published_root, tmp_path):
    out = tmp_path / ("r" * 255)
    proc = cli("--bundles", str(published_root), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert_consistent_set(out)
    assert not stray_temporaries(tmp_path)


def test_an_out_that_is_a_mount_point_is_refused_before_the_work(published_root, tmp_path, tmpfs):
    disk = tmpfs(tmp_path / "disk")
    proc = cli("--bundles", str(published_root), "--out", str(disk), cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert "mount point" in proc.stderr and proc.stdout == ""


def test_an_out_holding_a_mount_point_is_refused_and_the_disk_keeps_its_files(published_root, tmp_path, tmpfs):
    out = tmp_path / "out"
    assert cli("--bundles", str(published_root), "--out", str(out), cwd=tmp_path).returncode == 1
    disk = tmpfs(out / "sub" / "disk")
    (disk / "precious.txt").write_text("mine")
    proc = cli("--bundles", str(published_root), "--out", str(out), cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert (disk / "precious.txt").read_text() == "mine" and "mount point" in proc.stderr


def test_an_out_that_is_a_symlink_is_written_where_it_points(published_root, tmp_path):
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    (real / "mine.txt").write_text("kept")
    link.symlink_to(real)
    proc = cli("--bundles", str(published_root), "--out", str(link), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert link.is_symlink() and link.resolve() == real
    assert_consistent_set(real)
    assert (real / "mine.txt").read_text() == "kept"
    assert not stray_temporaries(tmp_path)


def test_out_dot_keeps_the_working_folder(published_root, tmp_path):
    here = tmp_path / "here"
    here.mkdir()
    (here / "mine.txt").write_text("kept")
    inode = here.stat().st_ino
    for _ in range(2):  # the second renews a set already there
        proc = cli("--bundles", str(published_root), "--out", ".", cwd=here)
        assert proc.returncode == 1, proc.stderr[-2000:]
    assert here.stat().st_ino == inode and (here / "mine.txt").read_text() == "kept"
    assert_consistent_set(here)
    assert not stray_temporaries(tmp_path)


# 6. Inputs and caches.


def test_a_zero_padded_seed_file_is_refused(published_root, tmp_path):
    root = copy_published(published_root, tmp_path / "b")
    shutil.copyfile(root / QK / "geom_softmax_s0.npz", root / QK / "geom_softmax_s01.npz")
    proc = cli("--bundles", str(root), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert "geom_softmax_s01.npz" in proc.stderr


@pytest.mark.parametrize("recorded", [True, False], ids=["schedule", "no-schedule"])
def test_a_step_key_beyond_the_schedule_is_refused(recorded, published_root, tmp_path):
    root = copy_published(published_root, tmp_path / "b")
    if not recorded:  # then the bound is the largest step any file may name
        run_json = root / QK / "yat_attention.json"
        doc = json.loads(run_json.read_text())
        doc["cfg"].pop("STEPS", None)
        run_json.write_text(json.dumps(doc))
    path = root / QK / "attn_softmax_s0.npz"
    rewrite_npz(path, **{"step" + "9" * 30: npz_array(path, "step0")})
    proc = cli("--bundles", str(root), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert "beyond the schedule" in proc.stderr


@pytest.fixture
def private_cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNGEOM_CACHE", str(cache))
    return cache


def _refused_by_the_cache(where: Path, cause: str) -> None:
    with pytest.raises(InputError) as caught:
        fetch.fetch(fetch.CORPUS_URL)
    text = str(caught.value)
    assert str(where) in text and cause in text and "download failed" not in text, text


def test_a_cache_entry_record_that_is_a_folder_is_named(private_cache):
    entry = private_cache / fetch.url_path(fetch.CORPUS_URL)
    (entry.parent / (entry.name + fetch.SIDECAR)).mkdir(parents=True)
    _refused_by_the_cache(private_cache, "(is a folder, not a file to write")


def test_a_cache_that_is_a_file_is_named(private_cache):
    private_cache.write_text("not a folder")
    _refused_by_the_cache(private_cache, "Not a directory")


def test_a_read_only_cache_is_named(private_cache, tmpfs):
    tmpfs(private_cache, read_only=True)
    _refused_by_the_cache(private_cache, "Read-only file system")


def test_a_full_cache_is_named(private_cache, tmpfs):
    fill(tmpfs(private_cache, size="256k"))
    _refused_by_the_cache(private_cache, "No space left")


# 7. The environment of the run: checked before the run folder is claimed.


@pytest.mark.parametrize(
    "setting, shown",
    [({"XLA_FLAGS": "--xla_no_such_flag"}, "Unknown flag in XLA_FLAGS"), ({"JAX_PLATFORMS": "cuda"}, "cuda")],
    ids=["xla-flags", "jax-platforms"],
)
def test_a_run_environment_that_cannot_start_leaves_no_folder(setting, shown, tmp_path):
    pytest.importorskip("jax")
    if "JAX_PLATFORMS" in setting and shutil.which("nvidia-smi"):
        pytest.skip("this machine may have a GPU")
    out = tmp_path / "run"
    proc = cli("rerun", "--preset", "smoke", "--out", str(out), "--quiet", cwd=tmp_path, **setting)
    assert_one_error_line(proc, 2)
    assert shown in proc.stderr and not out.exists()


@pytest.mark.parametrize("limit_kib", [1_000_000, 2_000_000])
def test_a_rerun_under_too_small_an_address_space_is_one_out_of_memory_line_and_no_folder(limit_kib, tmp_path):
    """Under `ulimit -v 1000000` XLA's compiler aborts (134, no line); under 2000000 the first loss is NaN."""
    out = tmp_path / "run"
    cmd = command("rerun", "--preset", "smoke", "--variants", "softmax", "--steps", "4", "--out", str(out))
    proc = run(["bash", "-c", f'ulimit -v {limit_kib}; exec "$@"', "bash", *cmd], tmp_path)
    assert_one_error_line(proc, 2, starts="error: out of memory: this process may map ")
    assert "(ulimit -v)" in proc.stderr and not out.exists()


def test_a_device_that_cannot_start_for_want_of_memory_says_so(monkeypatch):
    """The probe's child under an address space too small for jax's backend (the parent's limit is not lowered)."""
    pytest.importorskip("jax")
    from attngeom.training import device_probe

    real = subprocess.run

    def limited(cmd, *args, **kwargs):
        small = 200 << 20  # jaxlib's libraries cannot all be mapped
        return real(["prlimit", f"--as={small}", "--", *cmd], *args, **kwargs)  # it execs cmd under the limit

    monkeypatch.setattr(device_probe.subprocess, "run", limited)
    with pytest.raises(
        InputError,
        match=r"^out of memory: the device cannot start( \(.*\))?: .*(failed to map segment|pthread_create|allocate)",
    ):
        device_probe.check_device()
