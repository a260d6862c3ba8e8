"""The built kernel script in a Kaggle-like container, through its real install path.

The image (`tests/kaggle-runtime/Dockerfile`) keeps what matters of Kaggle's GPU image: Ubuntu
22.04 with Python 3.12 and pip but without venv/ensurepip, Kaggle's LD_LIBRARY_PATH with system
CUDA 12.8 libraries in /usr/local/cuda/lib64, a sitecustomize importing a module a fresh
environment lacks, /kaggle/working as the working directory, a read-only /kaggle/input,
KAGGLE_KERNEL_RUN_TYPE set, no GPU. The kernel runs with no network and without
ATTNGEOM_KERNEL_PYTHON, so it installs its lock itself; the wheels come from a find-links folder
filled once and kept in the Docker cache folder of `.ci/docker.sh`: the CPU lock's (the install
path is the CUDA lock's) and the CUDA lock's wheels whose libraries the CUDA test loads. One test
trains an ensemble of two, one member per GPU device file, and the fake Kaggle serves what the
kernel left in /kaggle/working for the backend to pull, check and summarise; one loads jax's CUDA libraries under the kernel's environment and under
the image's; one runs without internet. Needs the engine and the Kaggle base image of `. .ci/docker.sh`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import REPO
from helpers.kaggle import kaggle_command as kaggle
from helpers.runs import restore_device_settings

from attngeom import cli
from attngeom.backends import kaggle as kaggle_backend
from attngeom.backends.docker import default_ca_bundle, docker_client
from attngeom.backends.kaggle_kernel import GPU_LOCK, definitions, kernel_script, source_archive
from attngeom.backends.kernel_main import lock_entry
from attngeom.bundles.layout import load_models
from attngeom.jobs import ensemble
from attngeom.training.runs import require_complete

pytestmark = [pytest.mark.kaggle_runtime, pytest.mark.slow]

RUNTIME = REPO / "tests" / "kaggle-runtime"  # the image's build context
LOCK = REPO / "requirements.lock"  # the CPU lock: the kernel's install path without gigabytes of CUDA wheels
RUNTIME_IMAGE = "attngeom-kaggle-runtime"
# The CUDA lock's wheels the CUDA test installs: cuSPARSE (which needs nvJitLink 12.9 symbols) and
# nvJitLink, with the small runtime and CUPTI that jax's plugin loads before them.
CUDA_WHEELS = ("nvidia-cuda-runtime-cu12", "nvidia-cuda-cupti-cu12", "nvidia-cusparse-cu12", "nvidia-nvjitlink-cu12")
# Run with the kernel's Python: jax's plugin's preloading (jax_plugins/xla_cuda12/__init__.py of
# jax-cuda12-pjrt 0.10.2, `_load_nvidia_libraries`): each wheel's library by full path, in this
# order, for the wheels installed. jax swallows the OSError and then drops CUDA; here it is shown.
LOADER = """
import ctypes, importlib
from pathlib import Path
ORDER = (("cuda_runtime", ("libcudart.so.12",)), ("cuda_nvrtc", ("libnvrtc.so.12",)),
         ("cublas", ("libcublas.so.12", "libcublasLt.so.12")), ("nccl", ("libnccl.so.2",)),
         ("cuda_cupti", ("libcupti.so.12",)), ("cusparse", ("libcusparse.so.12",)),
         ("cusolver", ("libcusolver.so.11",)), ("cufft", ("libcufft.so.11",)),
         ("nvshmem", ("libnvshmem_host.so.3",)), ("cudnn", ("libcudnn.so.9",)))
loaded = []
for module, names in ORDER:
    try:
        folder = Path(importlib.import_module(f"nvidia.{module}").__path__[0]) / "lib"
    except ImportError:
        continue
    for name in names:
        ctypes.CDLL(str(folder / name))
        loaded.append(name)
maps = Path("/proc/self/maps").read_text().splitlines()
print("loaded:", *loaded)
print("nvJitLink:", *sorted({line.split()[-1] for line in maps if "libnvJitLink" in line}))
"""
# The kernel's own steps up to training (unpack, install, environment), then the loader under the
# kernel's environment and under the image's, then the kernel's GPU probe, each one's output after a
# `=== NAME exit N` line.
PROBE = """
def probe_cuda(settings, source_b64):
    scratch = Path(tempfile.mkdtemp(prefix="attngeom-kernel-"))
    repo = scratch / "repo"
    unpack(source_b64, settings["SOURCE_SHA256"], repo)
    python = interpreter(scratch, repo)
    for name, env in (("kernel", kernel_env(repo, on_kaggle=True)), ("image", dict(os.environ))):
        done = subprocess.run([python, "-c", LOADER], env=env, capture_output=True, text=True)
        print(f"=== {name} exit {done.returncode}\\n{done.stdout}{done.stderr}", flush=True)
    try:  # a device file says a GPU is attached; jax, with no CUDA plugin in this lock, cannot use it
        require_gpu(python, kernel_env(repo, on_kaggle=True))
    except SystemExit as stop:
        print(f"=== require_gpu exit 1\\n{stop}", flush=True)
"""


def cache_root() -> Path:
    return Path(os.environ.get("ATTNGEOM_DOCKER_CACHE") or "/var/cache/attngeom")


def cuda_test_lock() -> str:
    """The CPU lock and the CUDA lock's pins of `CUDA_WHEELS`: what the CUDA test's kernel installs."""
    return LOCK.read_text(encoding="utf-8") + "".join(lock_entry(GPU_LOCK, name) for name in CUDA_WHEELS)


def build_context(folder: Path) -> Path:
    """The image's build context: the runtime folder and the wheels its system-cuda.txt pins.

    This machine's pip fetches them (with this machine's certificates: a build may not reach PyPI
    through a TLS-intercepting proxy); the image's pip checks them against the file's hashes.
    """
    for path in RUNTIME.iterdir():
        if path.is_file():
            shutil.copy(path, folder / path.name)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]
    cmd += ["--require-hashes", "--only-binary=:all:", "--python-version", "3.12", "--abi", "cp312"]
    cmd += ["--implementation", "cp", "--dest", str(folder / "wheels"), "-r", str(RUNTIME / "system-cuda.txt")]
    for glibc in ("2_5", "2_12", "2_17"):  # the tags NVIDIA's and wrapt's wheels carry
        cmd += ["--platform", f"manylinux_{glibc}_x86_64"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


@pytest.fixture(scope="module")
def runtime_image(tmp_path_factory) -> str:
    """The image, built once per build context and base and kept, like the base, for the next run."""
    base = os.environ.get("ATTNGEOM_KAGGLE_BASE")
    if not base:
        if os.environ.get("CI"):
            pytest.fail("no ATTNGEOM_KAGGLE_BASE in CI: .ci/run must source .ci/docker.sh")
        pytest.skip("no ATTNGEOM_KAGGLE_BASE: `. .ci/docker.sh` prepares a Docker engine and the base image")
    docker = docker_client()
    files = b"".join(p.name.encode() + p.read_bytes() for p in sorted(RUNTIME.iterdir()) if p.is_file())
    tag = hashlib.sha256(files + base.encode()).hexdigest()[:16]
    name = f"{RUNTIME_IMAGE}:{tag}"
    if subprocess.run([docker, "image", "inspect", name], capture_output=True, check=False).returncode != 0:
        listed = subprocess.run(
            [docker, "images", "--format", "{{.Repository}}:{{.Tag}}", RUNTIME_IMAGE],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        subprocess.run([docker, "rmi", "--force", *listed], capture_output=True, check=False)  # older Dockerfiles'
        context = build_context(tmp_path_factory.mktemp("context"))
        cmd = [docker, "build", "--quiet", "--tag", name, "--build-arg", f"BASE_IMAGE={base}", str(context)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return name


@pytest.fixture(scope="module")
def wheels(runtime_image, tmp_path_factory) -> Path:
    """The CUDA test lock's wheels for the image's Python, downloaded once by the image's own pip and kept."""
    lock = tmp_path_factory.mktemp("lock") / "requirements.lock"
    lock.write_text(cuda_test_lock(), encoding="utf-8")
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    folder = cache_root() / f"kaggle-wheels-{digest}"
    if (folder / ".complete").is_file():
        return folder
    for stale in cache_root().glob("kaggle-wheels-*"):  # an older lock's wheels
        shutil.rmtree(stale, ignore_errors=True)
    part = folder.with_name(folder.name + ".part")
    part.mkdir(parents=True)
    cmd = [docker_client(), "run", "--rm", "-v", f"{part}:/wheels", "-v", f"{lock}:/lock.txt:ro"]
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


def run_kernel(
    image: str, wheels: Path | None, script: str, kaggle_dir: Path, docker_args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """Run one kernel script as Kaggle would, offline (wheels from `wheels`, or none: no internet at all)."""
    (kaggle_dir / "input").mkdir(parents=True)
    (kaggle_dir / "working").mkdir()
    (kaggle_dir / "src").mkdir()
    (kaggle_dir / "src" / "script.py").write_text(script)
    mirror = Path(os.environ["ATTNGEOM_MIRROR"]).resolve()  # the corpus; Kaggle would download it
    cmd = [docker_client(), "run", "--rm", "--network", "none", "--user", f"{os.getuid()}:{os.getgid()}"]
    cmd += ["-e", "HOME=/tmp", "-e", "ATTNGEOM_MIRROR=/mirror", "-v", f"{mirror}:/mirror:ro"]
    if wheels is not None:
        cmd += ["-v", f"{wheels}:/wheels:ro", "-e", "PIP_FIND_LINKS=/wheels", "-e", "PIP_NO_INDEX=1"]
        cmd += ["-e", "UV_FIND_LINKS=/wheels", "-e", "UV_OFFLINE=1"]
    cmd += ["-v", f"{kaggle_dir / 'input'}:/kaggle/input:ro", "-v", f"{kaggle_dir / 'working'}:/kaggle/working"]
    cmd += ["-v", f"{kaggle_dir / 'src'}:/kaggle/src:ro", *docker_args, image]
    cmd += ["bash", "-c", "python3 /kaggle/src/script.py && echo LEFT: $(ls -A /tmp /tmp/.cache)"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1500, check=False)


def test_kernel_installs_trains_an_ensemble_and_is_pulled_in_a_kaggle_like_runtime(
    runtime_image, wheels, fake_kaggle, monkeypatch, tmp_path
):
    """`kaggle run --members 2` on a session with two GPU device files, as the T4 x2 machine has: the
    kernel trains one member per GPU (here on the CPU: the CPU lock has no CUDA plugin), and the backend
    pulls the ensemble, checks every member and summarises it."""
    assert os.environ.get("ATTNGEOM_MIRROR"), "the container reaches no network: it needs the mirror"
    restore_device_settings(monkeypatch)  # the estimate compiles a step under the device settings
    monkeypatch.setenv("JAX_PLATFORMS", os.environ.get("JAX_PLATFORMS", ""))
    runs: dict[str, subprocess.CompletedProcess] = {}
    monkeypatch.setattr(kaggle_backend, "source_archive", lambda: source_archive(lock=LOCK))
    fake = fake_kaggle

    def execute(slug: str, request: dict) -> None:
        kernel, kaggle_dir = fake.kernel(slug), tmp_path / "kaggle" / slug.split("/")[1]
        kernel.states = ["RUNNING"]  # until the container ends

        def session() -> None:
            gpus = ("-v", "/dev/null:/dev/nvidia0", "-v", "/dev/null:/dev/nvidia1")
            done = run_kernel(runtime_image, wheels, request["text"], kaggle_dir, gpus)
            runs[slug] = done
            working = kaggle_dir / "working"
            kernel.log = done.stdout + done.stderr
            kernel.outputs = {
                p.relative_to(working).as_posix(): p.read_bytes() for p in working.rglob("*") if p.is_file()
            }
            kernel.states, kernel.polls = (["COMPLETE"] if done.returncode == 0 else ["ERROR"]), 0

        threading.Thread(target=session, daemon=True).start()

    fake.on_push = execute
    argv = ("--poll", "1", "--preset", "smoke", "--bundles", "attngeom-goat", "--members", "2")
    status, error = kaggle("run", "--run", "r", *argv)
    (done,) = runs.values()
    log = done.stdout[-4000:] + done.stderr[-4000:]
    assert status in (0, 1), f"{error}\n{log}"  # 0 or 1 is the verdict on the smoke-trained members
    assert "attngeom kernel: installed requirements.lock in" in done.stdout, log
    assert "members 0 on GPU 0" in done.stdout and "members 1 on GPU 1" in done.stdout, log
    left = done.stdout.strip().splitlines()[-1].split()
    assert left[0] == "LEFT:" and not {"pip", "uv"} & set(left), log  # no package cache left on the disk
    assert not any(name.startswith("attngeom-kernel-") for name in left), log  # nor the environment and wheels
    pulled = tmp_path / "r" / "outputs" / "attngeom-goat-s0"
    state = kaggle_backend.load_state(tmp_path / "r")
    doc = ensemble.read(pulled)
    assert [r["state"] for r in doc["member_runs"].values()] == ["complete"] * 2
    assert doc["statistics"]["goat_v_s0"]["distinct_winners"]["0"]["member_ids"] == [0, 1]
    for m in (0, 1):
        manifest = require_complete(ensemble.member_dir(pulled, m))
        assert manifest["kaggle"] == {"run_id": state["run_id"], "bundle": "attngeom-goat", "seed": 0}
        assert manifest["trajectory"]["member"] == m
        assert load_models(ensemble.member_dir(pulled, m), ("goat_v",))["goat_v"].q_LHTD.ndim == 4
        assert (ensemble.member_dir(pulled, m) / "report" / "report.json").is_file()
    assert cli.main(["summary", str(pulled), "--out", str(tmp_path / "summary.json")]) == 0


def sections(log: str) -> dict[str, tuple[int, str]]:
    """The probe's runs in a kernel log: name -> (exit status, output)."""
    found = {}
    for part in log.split("=== ")[1:]:
        head, _, body = part.partition("\n")
        name, _, status = head.partition(" exit ")
        found[name] = (int(status), body)
    return found


def test_cuda_libraries_load_in_the_kernels_environment_and_not_in_the_images(runtime_image, wheels, tmp_path):
    """Kaggle's failure reproduced without a GPU: cuSPARSE 12.9 binds to the system's nvJitLink 12.8.

    The kernel installs the lock with its own code; loading the libraries as jax does must succeed
    with the kernel's library path and fail, with the undefined symbol, with the image's.
    """
    call = 'if __name__ == "__main__":\n    main(SETTINGS, "".join(SOURCE))\n'
    lock = tmp_path / "requirements.lock"
    lock.write_text(cuda_test_lock(), encoding="utf-8")
    script = kernel_script(definitions()["attngeom-goat"], 0, "smoke", source_archive(lock=lock))
    assert script.endswith(call)
    script = script[: -len(call)] + f"LOADER = {LOADER!r}\n{PROBE}\nprobe_cuda(SETTINGS, ''.join(SOURCE))\n"
    done = run_kernel(runtime_image, wheels, script, tmp_path / "kaggle", ("-v", "/dev/null:/dev/nvidia0"))
    log = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, log
    assert "attngeom kernel: installed requirements.lock in" in done.stdout, log
    assert "attngeom kernel: LD_LIBRARY_PATH without /usr/local/cuda/lib64" in done.stdout, log
    runs = sections(done.stdout)
    status, output = runs["kernel"]
    assert status == 0 and "libcusparse.so.12" in output.split("loaded:")[1].split("\n")[0], log
    (jitlink,) = output.split("nvJitLink:")[1].split("\n")[0].split()
    assert jitlink.startswith("/tmp/attngeom-kernel-") and jitlink.endswith("/nvidia/nvjitlink/lib/libnvJitLink.so.12")
    assert "Error in sitecustomize" in output, log  # the image's trait, which the kernel lives with
    status, output = runs["image"]
    assert status != 0 and "undefined symbol: __nvJitLinkGetErrorLogSize_12_9" in output, log
    assert "libcusparse.so.12" in output, log
    status, output = runs["require_gpu"]  # the probe's own failure, from jax itself, ends its message
    assert "a GPU is attached but jax cannot use it" in output and "Unable to initialize backend 'cuda'" in output, log


def test_a_kernel_without_internet_says_so_at_the_install(runtime_image, tmp_path):
    """An unverified account's kernel has no internet: the install stops, naming the cause and the remedy."""
    script = kernel_script(definitions()["attngeom-goat"], 0, "smoke", source_archive(lock=LOCK))
    done = run_kernel(runtime_image, None, script, tmp_path / "kaggle")
    log = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 1, log
    assert "cannot reach the package index; this session has no internet" in done.stderr, log
    assert "phone-verified" in done.stderr and "installed requirements.lock" not in done.stdout, log
