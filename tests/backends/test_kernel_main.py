"""The kernel's program as a module: its lock reading and manifest stamp, and the script built from it."""

from __future__ import annotations

import ast
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers import REPO

from attngeom.backends import kernel_main
from attngeom.backends.kaggle_kernel import definitions, kernel_script


def test_lock_entry_is_the_pin_and_its_hashes_only(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text(
        "tqdm==4.67.1 \\\n    --hash=sha256:aa\n    # via -r requirements.in\n"
        "uv==0.13.9 \\\n    --hash=sha256:bb \\\n    --hash=sha256:cc\n    # via -r requirements.in\n"
        "wheel==0.45.1 \\\n    --hash=sha256:dd\n"
    )
    assert kernel_main.lock_entry(lock, "uv") == "uv==0.13.9 \\\n    --hash=sha256:bb \\\n    --hash=sha256:cc\n"
    with pytest.raises(SystemExit, match="numpy is not pinned"):
        kernel_main.lock_entry(lock, "numpy")


def test_both_locks_pin_uv_with_hashes():
    for name in ("requirements.lock", "requirements-cuda.lock"):
        entry = kernel_main.lock_entry(REPO / name, "uv")
        assert entry.startswith("uv==") and entry.count("--hash=sha256:") >= 10  # one per platform's wheel


def test_stamp_adds_the_run_and_keeps_the_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"completed": True, "files": {"a": "00"}}))
    kernel_main.stamp_manifest(tmp_path, {"RUN_ID": "r-1", "BUNDLE": "attngeom-goat", "SEED": "3"})
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest == {
        "completed": True,
        "files": {"a": "00"},
        "kaggle": {"run_id": "r-1", "bundle": "attngeom-goat", "seed": 3},
    }
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_script_is_the_module_then_settings_payload_and_call():
    script = kernel_script(definitions()["attngeom-goat"], 1, "smoke", b"payload", run_id="r-9")
    module = Path(kernel_main.__file__).read_text()
    assert script.startswith(module.rstrip())
    tree = ast.parse(script)  # valid Python on its own
    assigned = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign) for t in node.targets}
    settings = ast.literal_eval(assigned["SETTINGS"])
    assert settings["RUN_ID"] == "r-9" and settings["SEED"] == "1" and settings["PRESET"] == "smoke"
    assert settings["VARIANTS"] == "goat_v" and settings["BUNDLE"] == "attngeom-goat"
    imports = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    imports |= {n.module.split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert "attngeom" not in imports and imports <= {"__future__", *__import__("sys").stdlib_module_names}


def test_unsupported_python_is_refused(monkeypatch):
    monkeypatch.setattr(kernel_main.sys, "version_info", (3, 10, 14))
    with pytest.raises(SystemExit, match="3.11 to 3.13"):
        kernel_main.main({}, "")


def test_a_kernel_that_fails_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(kernel_main.tempfile, "tempdir", None)  # read TMPDIR again
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match="sha256 mismatch"):
        kernel_main.main({"SOURCE_SHA256": "0" * 64}, "cGF5bG9hZA==")
    assert list(tmp_path.iterdir()) == []


def test_library_path_drops_the_system_cuda_and_keeps_the_driver(tmp_path, capsys):
    driver, cuda, other = tmp_path / "nvidia" / "lib64", tmp_path / "cuda-12.8" / "lib64", tmp_path / "lib"
    for folder, name in ((driver, "libcuda.so.1"), (cuda, "libnvJitLink.so.12"), (other, "libz.so.1")):
        folder.mkdir(parents=True)
        (folder / name).touch()
    value = f"{driver}:/usr/local/cuda/lib64::{cuda}:{other}:{tmp_path / 'missing'}"
    kept, dropped = kernel_main.clean_library_path(value)
    assert kept.split(":") == [str(driver), str(other), str(tmp_path / "missing")]
    assert dropped == ["/usr/local/cuda/lib64", str(cuda)]


def test_kernel_env_says_what_it_dropped(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64:/usr/local/cuda/lib64")
    env = kernel_main.kernel_env(tmp_path, on_kaggle=True)
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert env["PYTHONPATH"] == str(tmp_path / "src") and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert "LD_LIBRARY_PATH without /usr/local/cuda/lib64" in capsys.readouterr().out
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/cuda/lib64")
    assert "LD_LIBRARY_PATH" not in kernel_main.kernel_env(tmp_path, on_kaggle=False)


def fake_python(folder: Path, stderr: str, status: int) -> str:
    """An interpreter stand-in whose probe prints `stderr` and exits with `status`."""
    path = folder / "python"
    path.write_text(
        f"#!/bin/sh\necho \"JAX_PLATFORMS=$JAX_PLATFORMS\"\ncat >&2 <<'END'\n{stderr}\nEND\nexit {status}\n"
    )
    path.chmod(0o755)
    return str(path)


def test_probe_without_a_gpu_says_none_is_attached(tmp_path):
    python = fake_python(tmp_path, "", 0)
    with pytest.raises(SystemExit) as stop:
        kernel_main.require_gpu(python, {}, devices=tmp_path)
    assert "no GPU attached to this session" in str(stop.value) and "phone" not in str(stop.value)


def test_probe_that_jax_fails_shows_its_last_lines(tmp_path):
    (tmp_path / "nvidia0").touch()
    cause = (
        "RuntimeError: Unable to initialize backend 'cuda': Unable to load cuSPARSE. Is it installed? "
        "(set JAX_PLATFORMS='' to automatically choose an available backend)"
    )
    python = fake_python(tmp_path, f"Traceback (most recent call last):\n  File x\n{cause}", 1)
    with pytest.raises(SystemExit) as stop:
        kernel_main.require_gpu(python, {}, devices=tmp_path)
    message = str(stop.value)
    assert "a GPU is attached but jax cannot use it" in message and cause in message
    assert "JAX_PLATFORMS=cuda" in message and "phone" not in message  # the probe ran loud


def test_probe_that_finds_the_gpu_passes(tmp_path):
    (tmp_path / "nvidiactl").touch()
    script = tmp_path / "python"
    script.write_text('#!/bin/sh\n[ "$JAX_PLATFORMS" = cuda ] && echo gpu\n')
    script.chmod(0o755)
    kernel_main.require_gpu(str(script), {}, devices=tmp_path)


@pytest.mark.parametrize("tool", ["pip", "uv"])
def test_an_unreachable_index_is_said_to_be_no_internet(tool, tmp_path, monkeypatch):
    """pip and uv themselves, against an index on a closed port: the advice on phone verification."""
    index = "http://127.0.0.1:9/simple"
    if tool == "pip":
        cmd = [sys.executable, "-m", "pip", "install", "--index-url", index, "--retries", "1", "--target", "t", "uv"]
    else:
        uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or pytest.skip("no uv beside this Python")
        cmd = [uv, "pip", "install", "--index-url", index, "--python", sys.executable, "--target", "t", "six"]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        kernel_main.run(
            f"{tool} install",
            cmd,
            env=dict(os.environ, UV_NO_CACHE="1", UV_NO_CONFIG="1", PIP_NO_CACHE_DIR="1", PIP_CONFIG_FILE=os.devnull),
        )
    assert f"{tool} install cannot reach the package index" in str(stop.value) and "phone-verified" in str(stop.value)


def test_another_install_failure_is_not_blamed_on_the_network():
    with pytest.raises(SystemExit) as stop:
        kernel_main.run("step", [sys.executable, "-c", "raise SystemExit(3)"])
    assert "step failed (exit status 3)" in str(stop.value) and "internet" not in str(stop.value)


@pytest.mark.parametrize(
    ("members", "gpus", "groups"),
    [(4, 2, [[0, 1], [2, 3]]), (3, 2, [[0], [1, 2]]), (2, 4, [[0], [1]]), (2, 0, [[0, 1]]), (5, 1, [[0, 1, 2, 3, 4]])],
)
def test_members_split_into_one_contiguous_group_per_gpu(members, gpus, groups):
    assert kernel_main.member_groups(members, gpus) == groups


def test_the_gpus_are_the_visible_devices_or_the_numbered_device_files(tmp_path, monkeypatch):
    for name in ("nvidia0", "nvidia10", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert kernel_main.gpu_ids(tmp_path) == ["0", "1", "10"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert kernel_main.gpu_ids(tmp_path) == ["1"]
