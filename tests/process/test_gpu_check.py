"""The GPU check (bench/gpu_check.sh) rehearsed on the CPU exactly as it runs on a lent GPU machine: offline,
on an interpreter that already holds the packages, from a checkout whose carry/ folder bench/gpu_carry.py
filled, its results within what such a machine hands back.

Its tests run last (`last`, tests/conftest.py; every test of the file, so that `-n N` gives the file out
last too), when the session's compilation cache already holds most of
the steps they compile (the fidelity step, the smoke reruns, members of yat_b trained together)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = pytest.mark.last


def _offline() -> list[str]:
    """The prefix that runs a command without network, as on the lent GPU machine: a network namespace of
    its own (`unshare -n` as root, `unshare -rn` in a user namespace otherwise)."""
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):
        if shutil.which("unshare") and subprocess.run([*prefix, "true"], capture_output=True).returncode == 0:
            return prefix
    if os.environ.get("CI"):
        pytest.fail("CI rehearses the GPU check offline: unshare -n and unshare -rn were both refused")
    pytest.skip("no network namespace here (unshare -n and unshare -rn both refused): the rehearsal runs in CI")


@pytest.fixture(scope="module")
def gpu_checkout(tmp_path_factory) -> Path:
    """A copy of the checkout as a GPU machine receives it: its files, and carry/ filled by bench/gpu_carry.py
    (the mirror from ATTNGEOM_MIRROR, the wheels by pip download), so the checkout itself stays as it was."""
    copy = tmp_path_factory.mktemp("gpu-machine") / "checkout"
    top = {".git", ".venv", "carry", "report", "runs", "docker-out"}  # the checkout's own outputs, at its root
    anywhere = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".hypothesis")

    def left(folder: str, names: list[str]) -> set[str]:
        return set(anywhere(folder, names)) | (top & set(names) if Path(folder) == REPO else set())

    shutil.copytree(REPO, copy, ignore=left, symlinks=True)
    done = subprocess.run(
        [sys.executable, str(copy / "bench" / "gpu_carry.py")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MiB (at most 64 MiB)" in done.stdout and sorted(
        p.name.split("-")[0] for p in (copy / "carry" / "wheels").iterdir()
    ) == ["platformdirs", "pooch", "tenacity"]
    return copy


def _rehearse(checkout: Path, out: Path, *args: str) -> dict[str, Path]:
    """bench/gpu_check.sh `args` as on the lent GPU machine: offline, on this interpreter as the system's (no
    environment built), the mirror and the wheels read from carry/, a fresh download cache (the session's
    compiled steps are reused), results under $OUT. It must pass, within the limits of what comes back."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ATTNGEOM_MIRROR", "ATTNGEOM_VENV")}
    env |= {"ATTNGEOM_SYSTEM_PYTHON": sys.executable, "OUT": str(out), "ATTNGEOM_CACHE": str(out.parent / "cache")}
    env["TMPDIR"] = str(out.parent)  # the work folder the check keeps (run folders, checkpoints) goes with the test's
    done = subprocess.run(
        [*_offline(), str(checkout / "bench" / "gpu_check.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert not (checkout / ".venv").exists() and f"mirror {checkout / 'carry' / 'mirror'}" in done.stderr
    assert {"pooch", "tenacity", "platformdirs"} <= {p.name for p in (checkout / "carry" / "site").iterdir()}
    files = {str(p.relative_to(out)): p for p in out.rglob("*") if p.is_file()}
    assert 0 < len(files) <= 8 and all(
        p.stat().st_size <= 16 << 20 and len(p.relative_to(out).parts) <= 3 for p in files.values()
    )
    return files


@pytest.mark.slow
def test_the_gpu_check_rehearsed_offline_runs_every_step_and_hands_back_its_results_whole(gpu_checkout, tmp_path):
    out = tmp_path / "out"
    files = _rehearse(gpu_checkout, out, "--smoke")
    assert sorted(files) == ["gpu_check.json", "gpu_check.tar.gz"]
    doc = json.loads(files["gpu_check.json"].read_text())
    assert list(doc["steps"]) == ["fidelity", "bench_train", "rerun", "kaggle_cuda"]
    assert doc["kaggle_cuda"]["verdict"] == "PASS" and doc["kaggle_cuda"]["kernel_path"]["platform"] == "cpu"
    assert doc["verdict"] == "PASS" and doc["fidelity"]["verdict"] == "PASS" and doc["smoke"]
    assert doc["bench_train"]["variants"]["softmax"]["identical_losses"]
    assert doc["rerun"]["completed"] and doc["rerun"]["verify_exit"] == 0 and doc["rerun"]["steps"] == 60
    assert doc["environment"]["locked"] is not None and doc["versions"]["pooch"]
    with tarfile.open(files["gpu_check.tar.gz"]) as tar:
        names = tar.getnames()
    assert {"fidelity.log", "rerun.log", "rerun/manifest.json", "rerun/report/REPORT.md"} <= set(names)
    assert not [n for n in names if n.endswith(".npz")] and doc["archive"]["files"] == len(names)


@pytest.mark.slow
def test_the_gpu_ensemble_rehearsed_offline_writes_the_summary_bands_reads(gpu_checkout, tmp_path):
    out = tmp_path / "out"
    files = _rehearse(gpu_checkout, out, "--smoke", "--ensemble")
    assert sorted(files) == ["ensemble-smoke.json", "gpu_ensemble.json", "gpu_ensemble.tar.gz"]
    doc = json.loads(files["gpu_ensemble.json"].read_text())
    assert doc["verdict"] == "PASS" and list(doc["ensembles"]) == ["ensemble-yat_b", "ensemble-softmax"]
    first = doc["ensembles"]["ensemble-yat_b"]
    assert first["members_complete"] == [0, 1] and first["budget"]["stop_after"] is None
    assert set(first["budget"]["step_flops"]) == {"yat_b"}
    summary = json.loads(files["ensemble-smoke.json"].read_text())
    assert {m for run in summary["runs"].values() for m in run["ensemble"]["statistics"]} == {"yat_b_s0", "softmax_s0"}
    bands = subprocess.run(
        [str(REPO / "reproduce.sh"), "bands", str(files["ensemble-smoke.json"]), "--step", "1200"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bands.returncode == 0 and "step 1200 entropy" in bands.stdout, bands.stderr[-2000:]
