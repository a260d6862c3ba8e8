"""`docker build|run` command lines, GPU detection and the image's lock, without a Docker engine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from helpers.docker import command, parse

from attngeom.backends import docker as docker_backend
from attngeom.base import environment
from attngeom.base.errors import InputError


def fake_docker(tmp_path: Path, script: str) -> Path:
    """An executable standing in for the docker client; it appends its arguments to calls.txt."""
    exe = tmp_path / "docker"
    exe.write_text(f'#!/bin/sh\necho "$*" >>"{tmp_path}/calls.txt"\n{script}\n')
    exe.chmod(0o755)
    return exe


def test_run_forwards_everything_after_its_own_options():
    args = parse(["docker", "run", "--gpus", "none", "rerun", "--preset", "paper", "--gpus", "x"])
    assert (args.gpus, args.args) == ("none", ["rerun", "--preset", "paper", "--gpus", "x"])
    assert parse(["docker", "run"]).args == []


def test_run_command_mounts_output_and_mirror_as_the_caller(tmp_path):
    cmd = docker_backend.run_command(
        "docker", "img", tmp_path / "out", tmp_path / "m", ["--gpus", "all"], ["--", "--bundles", "b"]
    )
    joined = " ".join(cmd)
    assert f"--user {os.getuid()}:{os.getgid()}" in joined
    assert f"--volume {tmp_path / 'out'}:/out --workdir /out" in joined
    assert f"--volume {tmp_path / 'm'}:/mirror:ro --env ATTNGEOM_MIRROR=/mirror" in joined
    assert cmd[-5:] == ["--gpus", "all", "img", "--bundles", "b"] and "JAX_PLATFORMS=cpu" not in cmd


def test_run_command_without_mirror_or_gpu():
    cmd = docker_backend.run_command("docker", "img", Path("/o"), None, [], ["verify"])
    assert "ATTNGEOM_MIRROR=/mirror" not in cmd and "--gpus" not in cmd
    assert "JAX_PLATFORMS=cpu" in cmd
    assert cmd[-2:] == ["img", "verify"]


def test_build_command_passes_base_ca_secret_and_proxies(monkeypatch, tmp_path):
    for var in docker_backend.PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    cmd = docker_backend.build_command("docker", "img", "base:1", tmp_path / "ca.crt", REPO)
    assert cmd[:4] == ["docker", "build", "--tag", "img"]
    assert ["--build-arg", "BASE_IMAGE=base:1"] == cmd[4:6]
    assert f"id=ca,src={tmp_path / 'ca.crt'}" in cmd
    assert ["--build-arg", "HTTPS_PROXY"] == cmd[-3:-1] and cmd[-1] == str(REPO)
    monkeypatch.delenv("HTTPS_PROXY")
    plain = docker_backend.build_command("docker", "img", None, None, REPO)
    assert plain == ["docker", "build", "--tag", "img", str(REPO)]


@pytest.mark.parametrize(
    ("smi_output", "runtimes", "expect_gpu", "says"),
    [
        (None, '{"runc":{}}', False, "no NVIDIA GPU"),
        ("GPU 0: NVIDIA H100 (UUID: GPU-1)", '{"runc":{}}', False, "Container Toolkit"),
        ("GPU 0: NVIDIA H100 (UUID: GPU-1)", '{"nvidia":{},"runc":{}}', True, "NVIDIA H100"),
    ],
)
def test_gpu_flags(monkeypatch, tmp_path, smi_output, runtimes, expect_gpu, says):
    docker = fake_docker(tmp_path, f"echo '{runtimes}'")
    if smi_output is not None:
        smi = tmp_path / "nvidia-smi"
        smi.write_text(f"#!/bin/sh\necho '{smi_output}'\n")
        smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    flags, note = docker_backend.gpu_flags(str(docker))
    assert (flags == ["--gpus", "all"]) is expect_gpu
    assert says in note


@pytest.mark.parametrize(
    ("version", "buildx", "expected"),
    [("20.10.24+dfsg1", False, True), ("28.2.2", False, False), ("28.2.2", True, True)],
)
def test_has_buildkit(tmp_path, version, buildx, expected):
    docker = fake_docker(tmp_path, f'[ "$1" = buildx ] && exit {0 if buildx else 1}\necho {version}')
    assert docker_backend.has_buildkit(str(docker)) is expected


def test_cmd_run_returns_the_containers_exit_status(monkeypatch, tmp_path):
    docker = fake_docker(tmp_path, '[ "$1" = run ] && exit 3\nexit 0')
    monkeypatch.setenv("ATTNGEOM_DOCKER", str(docker))
    monkeypatch.setenv("ATTNGEOM_MIRROR", str(tmp_path))
    out = tmp_path / "results" / "nested"
    assert command(["docker", "run", "--output", str(out), "--gpus", "none", "rerun", "--preset", "smoke"]) == 3
    assert out.is_dir()
    run_line = (tmp_path / "calls.txt").read_text().splitlines()[-1]
    assert run_line.startswith("run --rm") and run_line.endswith("attngeom rerun --preset smoke")


def test_cmd_run_without_the_image_says_to_build(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNGEOM_DOCKER", str(fake_docker(tmp_path, "exit 1")))
    with pytest.raises(InputError, match="docker build"):
        command(["docker", "run", "--output", str(tmp_path / "o")])


def test_missing_docker_client_is_input_error(monkeypatch):
    monkeypatch.setenv("ATTNGEOM_DOCKER", "no-such-docker-client")
    with pytest.raises(InputError, match="install Docker"):
        docker_backend.docker_client()


def test_build_refuses_a_client_without_buildkit(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNGEOM_DOCKER", str(fake_docker(tmp_path, '[ "$1" = buildx ] && exit 1\necho 28.0.0')))
    with pytest.raises(InputError, match="BuildKit"):
        command(["docker", "build"])


def pins(lock: Path) -> dict[str, str]:
    """name -> version of every pin that applies to Python 3.12 on Linux."""
    linux_312 = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux", "os_name": "posix"}
    return {name: version for name, (version, _) in environment.entries(lock, linux_312).items()}


def test_cuda_lock_matches_the_cpu_lock():
    cpu, cuda = pins(REPO / "requirements.lock"), pins(REPO / "requirements-cuda.lock")
    assert {name: cuda.get(name) for name in cpu} == cpu, "recompile requirements-cuda.lock (see its header)"
    assert cuda["jax-cuda12-plugin"] == cuda["jax-cuda12-pjrt"] == cuda["jax"]


def test_dockerfile_builds_the_cuda_lock_and_passes_hadolint():
    text = (REPO / "Dockerfile").read_text()
    assert not text.startswith("# syntax"), "a syntax line makes BuildKit contact a registry"
    assert re.search(r"^ARG BASE_IMAGE=nvidia/cuda:[\d.]+-base-ubuntu24\.04@sha256:[0-9a-f]{64}$", text, re.M)
    assert "ATTNGEOM_LOCK=/opt/attngeom/requirements-cuda.lock" in text
    hadolint = Path(sys.executable).with_name("hadolint")
    done = subprocess.run([str(hadolint), str(REPO / "Dockerfile")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_kaggle_runtime_dockerfile_keeps_kaggles_traits_and_passes_hadolint():
    path = REPO / "tests" / "kaggle-runtime" / "Dockerfile"
    text = path.read_text()
    assert "ARG BASE_IMAGE=ubuntu:22.04" in text and "rm -rf /usr/lib/python3.12/ensurepip" in text
    assert "python3-venv" not in text and "python3.12-venv" not in text
    assert "LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64" in text
    assert "/usr/lib/python3.12/sitecustomize.py" in text and "nvidia-nvjitlink-cu12==12.8." in (
        path.with_name("system-cuda.txt").read_text()
    )
    assert "WORKDIR /kaggle/working" in text and "KAGGLE_KERNEL_RUN_TYPE=" in text
    hadolint = Path(sys.executable).with_name("hadolint")
    done = subprocess.run([str(hadolint), str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
