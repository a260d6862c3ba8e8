"""The built kernel script in a Kaggle-like container, through its real install path, pulled and verified.

The image (`tests/kaggle-runtime/Dockerfile`) keeps what matters of Kaggle's: Python 3.12 with pip
but without the venv/ensurepip package, /kaggle/working as the working directory, a read-only
/kaggle/input, KAGGLE_KERNEL_RUN_TYPE set, no GPU. The kernel runs with no network and without
ATTNGEOM_KERNEL_PYTHON, so it installs the lock itself; the wheels come from a find-links folder
filled once from the CPU lock (the install path is the CUDA lock's) and kept in the Docker cache
folder of `.ci/docker.sh`. The fake Kaggle serves what the kernel left in /kaggle/working, and the
backend pulls, checks and judges it. Needs the engine and base image of `. .ci/docker.sh`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from fake_kaggle import FakeKaggle, point_client_at
from fake_kaggle import kaggle_command as kaggle

from attngeom.backends import kaggle as kaggle_backend
from attngeom.backends.docker import default_ca_bundle, docker_client
from attngeom.backends.kaggle_kernel import OUTPUT_DIR, source_archive
from attngeom.bundles import load_models
from attngeom.files import REPO
from attngeom.training.runs import require_complete

pytestmark = [pytest.mark.kaggle_runtime, pytest.mark.slow]

RUNTIME = Path(__file__).with_name("kaggle-runtime")
LOCK = REPO / "requirements.lock"  # the CPU lock: the kernel's install path without gigabytes of CUDA wheels
RUNTIME_IMAGE = "attngeom-kaggle-runtime"


def cache_root() -> Path:
    return Path(os.environ.get("ATTNGEOM_DOCKER_CACHE") or "/var/cache/attngeom")


@pytest.fixture(scope="module")
def runtime_image() -> str:
    """The image, built once per Dockerfile and base and kept, like the base, for the next run."""
    base = os.environ.get("ATTNGEOM_DOCKER_BASE")
    if not base:
        if os.environ.get("CI"):
            pytest.fail("no ATTNGEOM_DOCKER_BASE in CI: .ci/run must source .ci/docker.sh")
        pytest.skip("no ATTNGEOM_DOCKER_BASE: `. .ci/docker.sh` prepares a Docker engine and the base image")
    docker = docker_client()
    tag = hashlib.sha256((RUNTIME / "Dockerfile").read_bytes() + base.encode()).hexdigest()[:16]
    name = f"{RUNTIME_IMAGE}:{tag}"
    if subprocess.run([docker, "image", "inspect", name], capture_output=True, check=False).returncode != 0:
        listed = subprocess.run(
            [docker, "images", "--format", "{{.Repository}}:{{.Tag}}", RUNTIME_IMAGE],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        subprocess.run([docker, "rmi", "--force", *listed], capture_output=True, check=False)  # older Dockerfiles'
        cmd = [docker, "build", "--quiet", "--tag", name, "--build-arg", f"BASE_IMAGE={base}", str(RUNTIME)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return name


@pytest.fixture(scope="module")
def wheels(runtime_image) -> Path:
    """The CPU lock's wheels for the image's Python, downloaded once by the image's own pip and kept."""
    digest = hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16]
    folder = cache_root() / f"kaggle-wheels-{digest}"
    if (folder / ".complete").is_file():
        return folder
    for stale in cache_root().glob("kaggle-wheels-*"):  # an older lock's wheels
        shutil.rmtree(stale, ignore_errors=True)
    part = folder.with_name(folder.name + ".part")
    part.mkdir(parents=True)
    cmd = [docker_client(), "run", "--rm", "-v", f"{part}:/wheels", "-v", f"{LOCK}:/lock.txt:ro"]
    ca = default_ca_bundle() or Path("/etc/ssl/certs/ca-certificates.crt")
    if ca.is_file():  # pip in the container trusts what this machine trusts (a TLS-intercepting proxy)
        cmd += ["-v", f"{ca.resolve()}:/ca.crt:ro", "-e", "PIP_CERT=/ca.crt"]
    cmd += [runtime_image, "python3", "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
    cmd += ["--require-hashes", "--only-binary=:all:", "--dest", "/wheels", "-r", "/lock.txt"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (part / ".complete").touch()
    part.rename(folder)
    return folder


def run_kernel(image: str, wheels: Path, script: str, kaggle_dir: Path) -> subprocess.CompletedProcess:
    """Run one kernel script as Kaggle would, offline; what it leaves in /tmp is listed after it."""
    (kaggle_dir / "input").mkdir(parents=True)
    (kaggle_dir / "working").mkdir()
    (kaggle_dir / "src").mkdir()
    (kaggle_dir / "src" / "script.py").write_text(script)
    mirror = Path(os.environ["ATTNGEOM_MIRROR"]).resolve()  # the corpus; Kaggle would download it
    cmd = [docker_client(), "run", "--rm", "--network", "none", "--user", f"{os.getuid()}:{os.getgid()}"]
    cmd += ["-e", "HOME=/tmp", "-e", "ATTNGEOM_MIRROR=/mirror", "-v", f"{mirror}:/mirror:ro"]
    cmd += ["-v", f"{wheels}:/wheels:ro", "-e", "PIP_FIND_LINKS=/wheels", "-e", "PIP_NO_INDEX=1"]
    cmd += ["-e", "UV_FIND_LINKS=/wheels", "-e", "UV_OFFLINE=1"]
    cmd += ["-v", f"{kaggle_dir / 'input'}:/kaggle/input:ro", "-v", f"{kaggle_dir / 'working'}:/kaggle/working"]
    cmd += ["-v", f"{kaggle_dir / 'src'}:/kaggle/src:ro", image]
    cmd += ["bash", "-c", "python3 /kaggle/src/script.py && echo LEFT: $(ls -A /tmp /tmp/.cache)"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1500, check=False)


def test_kernel_installs_trains_and_is_pulled_in_a_kaggle_like_runtime(runtime_image, wheels, monkeypatch, tmp_path):
    assert os.environ.get("ATTNGEOM_MIRROR"), "the container reaches no network: it needs the mirror"
    runs: dict[str, subprocess.CompletedProcess] = {}
    monkeypatch.setattr(kaggle_backend, "source_archive", lambda: source_archive(lock=LOCK))
    with FakeKaggle() as fake:
        point_client_at(fake, monkeypatch, tmp_path / "home")
        monkeypatch.chdir(tmp_path)

        def execute(slug: str, request: dict) -> None:
            kernel, kaggle_dir = fake.kernel(slug), tmp_path / "kaggle" / slug.split("/")[1]
            kernel.states = ["RUNNING"]  # until the container ends

            def session() -> None:
                done = run_kernel(runtime_image, wheels, request["text"], kaggle_dir)
                runs[slug] = done
                working = kaggle_dir / "working"
                kernel.log = done.stdout + done.stderr
                kernel.outputs = {
                    p.relative_to(working).as_posix(): p.read_bytes() for p in working.rglob("*") if p.is_file()
                }
                kernel.states, kernel.polls = (["COMPLETE"] if done.returncode == 0 else ["ERROR"]), 0

            threading.Thread(target=session, daemon=True).start()

        fake.on_push = execute
        status, error = kaggle("run", "--run", "r", "--poll", "1", "--preset", "smoke", "--bundles", "attngeom-goat")
    (done,) = runs.values()
    log = done.stdout[-4000:] + done.stderr[-4000:]
    assert status in (0, 1), f"{error}\n{log}"  # 0 or 1 is the verdict on the smoke-trained bundle
    assert "attngeom kernel: installed requirements.lock in" in done.stdout, log
    left = done.stdout.strip().splitlines()[-1].split()
    assert left[0] == "LEFT:" and not {"pip", "uv"} & set(left), log  # no package cache left on the disk
    assert not any(name.startswith("attngeom-kernel-") for name in left), log  # nor the environment and wheels
    pulled = tmp_path / "r" / "outputs" / "attngeom-goat-s0" / OUTPUT_DIR
    manifest = require_complete(pulled)
    state = kaggle_backend.load_state(tmp_path / "r")
    assert manifest["kaggle"] == {"run_id": state["run_id"], "bundle": "attngeom-goat", "seed": 0}
    assert load_models(pulled, ("goat_v",))["goat_v"].q_LHTD.ndim == 4
    assert (tmp_path / "r" / "report" / "report.json").is_file()
