"""attngeom on Kaggle: retrain one bundle of the original runs with the attngeom package itself.

This module is the program of the kernel script that `./reproduce.sh kaggle build` writes: the
script is this file's source followed by the run's `SETTINGS`, the payload `SOURCE` (the package
source, its `expected/` folder and the hash-pinned lock, as one base64 tar.gz) and a call to
`main`. It therefore imports the standard library only and runs on the image's own Python.

The kernel checks the payload, installs the lock into a fresh environment without `ensurepip`
(Kaggle's image has no `python3-venv`): `uv`, pinned by hash in the lock, is installed with the
image's pip into a scratch folder, then `uv venv` and `uv pip install --require-hashes` with no
cache left behind. Every process in that environment gets a library path without the image's
system CUDA (`clean_library_path`), and a probe with `JAX_PLATFORMS=cuda` stops the kernel with
the cause when jax cannot use the GPU. It trains with the local backend on one GPU, stamps the run's id into the
bundle folder's `manifest.json` (so outputs of an older push are recognised) and leaves that
folder in the working directory, which Kaggle keeps as output. With `MEMBERS` set it trains an
ensemble (`rerun --members K`) into that folder instead, its members split over the session's GPUs
(one process per GPU, each a vmapped group), and stamps every member's manifest.
`ATTNGEOM_KERNEL_PYTHON=/path/to/python` skips the install and trains with that interpreter,
which must already have the locked packages.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

PYTHONS = ((3, 11), (3, 13))  # the lock's range for training (jax 0.10.2 needs 3.11 or newer)
KAGGLE_WORKING = Path("/kaggle/working")
# The libraries jax's CUDA plugin preloads (jax_plugins/xla_cuda12/__init__.py, _load_nvidia_libraries)
# and nvJitLink, which cuSPARSE loads through its RUNPATH; libcuda (the driver) is not one of them.
CUDA_LIBRARY = re.compile(
    r"lib(cudart|nvrtc|cublas|cublasLt|nccl|cupti|cusparse|cusolver|cufft|nvshmem_host|cudnn|nvJitLink)\.so"
)
# How pip (urllib3) and uv (reqwest) say that no package index can be reached.
NETWORK_ERROR = re.compile(
    r"Temporary failure in name resolution|Name or service not known|Failed to establish a new connection"
    r"|Network is unreachable|dns error|failed to lookup address|tcp connect error|Could not connect to"
)
# The device files by which jax decides that a session has an NVIDIA GPU (jax/_src/hardware_utils.py,
# _NVIDIA_GPU_DEVICES); without one, jax skips CUDA without a word.
GPU_DEVICES = ("nvidia0", "nvidiactl", "dxg")
NO_INTERNET_HELP = (
    "this session has no internet: Kaggle gives kernels internet (and GPUs) only on phone-verified "
    "accounts; verify your phone at https://www.kaggle.com/settings and push again"
)


def say(message: str) -> None:
    """One line of the kernel's log."""
    print(f"attngeom kernel: {message}", flush=True)


def run(what: str, cmd: list[str], **kwargs) -> None:
    """Run an install step, echoed to the log; a failure ends the kernel with one line naming its cause.

    A package index that cannot be reached means the session has no internet, which on Kaggle
    means an account without phone verification: that is said where it happens, at the install.
    """
    print("+ " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    print(done.stdout, end="", flush=True)
    if done.returncode == 0:
        return
    if NETWORK_ERROR.search(done.stdout):
        sys.exit(f"attngeom kernel: {what} cannot reach the package index; {NO_INTERNET_HELP}")
    sys.exit(f"attngeom kernel: {what} failed (exit status {done.returncode}); its output is above")


def unpack(source_b64: str, sha256: str, dest: Path) -> None:
    """Check the payload against its sha256 and extract it into `dest`."""
    payload = base64.b64decode(source_b64)
    if hashlib.sha256(payload).hexdigest() != sha256:
        sys.exit("attngeom kernel: the embedded source is corrupt (sha256 mismatch); rebuild the kernel")
    extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:gz") as tar:
        tar.extractall(dest, **extra)


def lock_entry(lock: Path, name: str) -> str:
    """The lines that pin `name` in a `uv pip compile --generate-hashes` lock (version and hashes)."""
    entry: list[str] = []
    for line in lock.read_text(encoding="utf-8").splitlines():
        if entry and not line.startswith("    --hash="):
            break
        if entry or line.startswith(f"{name}=="):
            entry.append(line)
    if not entry:
        sys.exit(f"attngeom kernel: {name} is not pinned in {lock.name}; rebuild the kernel from a current checkout")
    return "\n".join(entry) + "\n"


def interpreter(scratch: Path, repo: Path) -> str:
    """A Python with the locked packages: `ATTNGEOM_KERNEL_PYTHON`, or a fresh environment built with uv."""
    given = os.environ.get("ATTNGEOM_KERNEL_PYTHON")
    if given:
        return given
    lock = repo / "requirements.lock"
    started = time.monotonic()
    (scratch / "uv.txt").write_text(lock_entry(lock, "uv"), encoding="utf-8")
    tool = scratch / "uv"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-cache-dir"]
    pip += ["--root-user-action", "ignore"]  # Kaggle runs kernels as root
    run("pip install uv", [*pip, "--require-hashes", "--no-deps", "--target", str(tool), "-r", str(scratch / "uv.txt")])
    uv = str(tool / "bin" / "uv")
    venv = scratch / "venv"
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_NO_CACHE="1")
    run("uv venv", [uv, "venv", "--quiet", "--python", sys.executable, str(venv)], env=env)
    python = str(venv / "bin" / "python")
    run(
        f"uv pip install -r {lock.name}",
        [uv, "pip", "install", "--quiet", "--python", python, "--require-hashes", "-r", str(lock)],
        env=env,
    )
    say(f"installed {lock.name} in {time.monotonic() - started:.0f} s")
    return python


def clean_library_path(value: str) -> tuple[str, list[str]]:
    """`LD_LIBRARY_PATH` without the folders that hold CUDA libraries: (the path kept, the folders dropped).

    Kaggle's image sets `LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64`, the second
    holding the system's CUDA 12.8. The lock's CUDA 12.9 wheels find each other through their
    RUNPATH, which `LD_LIBRARY_PATH` overrides: cuSPARSE 12.9 then binds to nvJitLink 12.8, fails
    with an undefined symbol, and jax's plugin drops CUDA with a warning and trains on the CPU.
    The driver's folder (`/usr/local/nvidia/lib64`, libcuda) holds none of them and stays.
    """
    kept, dropped = [], []
    for entry in filter(None, value.split(":")):
        try:
            holds_cuda = any(CUDA_LIBRARY.match(p.name) for p in Path(entry).iterdir())
        except OSError:  # a missing or unreadable folder
            holds_cuda = False
        (dropped if holds_cuda or entry.startswith("/usr/local/cuda") else kept).append(entry)
    return ":".join(kept), dropped


def kernel_env(repo: Path, on_kaggle: bool) -> dict:
    """The environment of every process run with the kernel's Python: its source, and no system CUDA."""
    env = dict(os.environ, PYTHONPATH=str(repo / "src"))
    if env.get("ATTNGEOM_MIRROR"):  # relative to this folder, not to the unpacked source where training runs
        env["ATTNGEOM_MIRROR"] = str(Path(env["ATTNGEOM_MIRROR"]).expanduser().resolve())
    if on_kaggle:
        env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]  # one kernel, one GPU
    if env.get("LD_LIBRARY_PATH"):
        env["LD_LIBRARY_PATH"], dropped = clean_library_path(env["LD_LIBRARY_PATH"])
        if dropped:
            say(
                f"LD_LIBRARY_PATH without {':'.join(dropped)} (system CUDA libraries would shadow the lock's); "
                f"now '{env['LD_LIBRARY_PATH']}'"
            )
        if not env["LD_LIBRARY_PATH"]:
            del env["LD_LIBRARY_PATH"]
    return env


def require_gpu(python: str, env: dict, devices: Path = Path("/dev")) -> None:
    """Stop early, with the true cause, when this session has no GPU or jax cannot use it.

    The probe runs with `JAX_PLATFORMS=cuda`, so that jax raises instead of falling back to the CPU;
    its last lines (say "Unable to load cuSPARSE", or a driver too old) end the kernel's log.
    """
    if not any((devices / name).exists() for name in GPU_DEVICES):
        sys.exit(
            f"attngeom kernel: no GPU attached to this session (none of {', '.join(GPU_DEVICES)} in {devices}): "
            "push the kernel with a GPU accelerator (enable_gpu in kernel-metadata.json, --accelerator)"
        )
    probe = "import jax; print(jax.devices()[0].platform)"
    cmd = [python, "-c", probe]
    done = subprocess.run(cmd, check=False, env=dict(env, JAX_PLATFORMS="cuda"), capture_output=True, text=True)
    if done.returncode == 0 and done.stdout.strip() == "gpu":
        return
    print(done.stderr, end="", flush=True)
    last = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()][-6:]
    shown = "\n".join(f"    {line}" for line in last) or "    (no output)"
    sys.exit(
        f"attngeom kernel: a GPU is attached but jax cannot use it (probe exit status {done.returncode}, "
        f"JAX_PLATFORMS=cuda); the probe's last lines:\n{shown}"
    )


def stamp_manifest(out: Path, settings: dict) -> None:
    """Record which run and kernel made this folder in its manifest, so a stale output is recognised."""
    path = out / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["kaggle"] = {"run_id": settings["RUN_ID"], "bundle": settings["BUNDLE"], "seed": int(settings["SEED"])}
    part = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    part.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    os.replace(part, path)


def gpu_ids(devices: Path = Path("/dev")) -> list[str]:
    """The GPUs of this session, as CUDA numbers them: `CUDA_VISIBLE_DEVICES` when set, else one per
    `/dev/nvidia<N>` device file (Kaggle's T4 x2 machine has two)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d for d in visible.split(",") if d.strip()]
    numbered = (re.fullmatch(r"nvidia(\d+)", p.name) for p in devices.glob("nvidia*"))
    return sorted((m[1] for m in numbered if m), key=int)


def member_groups(members: int, gpus: int) -> list[list[int]]:
    """The ensemble's members 0 to `members` - 1 in one contiguous group per GPU (at most one group per
    member; one group when there is no GPU): each GPU trains its group as one vmapped step."""
    n = max(1, min(gpus, members))
    return [list(range(i * members // n, (i + 1) * members // n)) for i in range(n)]


def train_ensemble(python: str, env: dict, repo: Path, out: Path, settings: dict, gpus: list[str]) -> list[int]:
    """`rerun --members K` into `out`, its members split over the GPUs: one process per GPU, each pinned to
    it and training its group (`--member-ids`) into the same ensemble folder. The first process creates the
    folder; the others resume it once its ensemble.json is there. Their exit statuses."""
    members = int(settings["MEMBERS"])
    groups = member_groups(members, len(gpus))

    def start(group: list[int], gpu: str | None, args: list[str]) -> subprocess.Popen:
        ids = ["--member-ids", ",".join(map(str, group))] if len(groups) > 1 else []
        cmd = [python, "-m", "attngeom", "rerun", *args, *ids, "--quiet"]
        say(f"members {', '.join(map(str, group))}" + (f" on GPU {gpu}" if gpu is not None else ""))
        print("+ " + " ".join(cmd), flush=True)
        pinned = dict(env, CUDA_VISIBLE_DEVICES=gpu) if gpu is not None else env
        return subprocess.Popen(cmd, env=pinned, cwd=str(repo))

    plan = ["--preset", settings["PRESET"], "--variants", settings["VARIANTS"], "--seeds", settings["SEED"]]
    first = start(groups[0], gpus[0] if gpus else None, [*plan, "--members", str(members), "--out", str(out)])
    procs = [first]
    if len(groups) > 1:
        while not (out / "ensemble.json").is_file() and first.poll() is None:
            time.sleep(1)
        if (out / "ensemble.json").is_file():  # else the first process failed before it began: its status says why
            procs += [start(g, gpu, ["--resume", str(out)]) for g, gpu in zip(groups[1:], gpus[1:])]
    return [p.wait() for p in procs]


def train_in(
    scratch: Path, work: Path, settings: dict, source_b64: str, on_kaggle: bool, gpus: list[str]
) -> tuple[str, Path]:
    """Unpack and install into `scratch`, train into `work`, stamp the manifests: what was trained, and where."""
    repo = scratch / "repo"
    unpack(source_b64, settings["SOURCE_SHA256"], repo)
    python = interpreter(scratch, repo)
    env = kernel_env(repo, on_kaggle)
    if on_kaggle and settings["PRESET"] != "smoke":  # the smoke preset trains on whatever jax finds
        require_gpu(python, env)
    out = work / settings["OUTPUT_DIR"]
    what = f"{settings['BUNDLE']} seed {settings['SEED']}"
    if settings.get("MEMBERS"):
        statuses = train_ensemble(python, env, repo, out, settings, gpus)
        folders = [out / f"member-{m}" for m in range(int(settings["MEMBERS"]))]
        what += f", {settings['MEMBERS']} members"
    else:
        cmd = [python, "-m", "attngeom", "rerun", "--preset", settings["PRESET"]]
        cmd += ["--out", str(out), "--variants", settings["VARIANTS"], "--seeds", settings["SEED"], "--quiet"]
        print("+ " + " ".join(cmd), flush=True)
        statuses, folders = [subprocess.run(cmd, check=False, env=env, cwd=str(repo)).returncode], [out]
    # 1 = trained, but a claim misses its tolerance: the bundle is still the result to pull.
    for folder in folders:
        if (folder / "manifest.json").is_file():
            stamp_manifest(folder, settings)
    if any(status not in (0, 1) for status in statuses) or not all((f / "manifest.json").is_file() for f in folders):
        sys.exit(f"attngeom kernel: training {what} failed (exit status {', '.join(map(str, statuses))})")
    return what, out


def main(settings: dict, source_b64: str) -> None:
    """Unpack, install, train `settings["BUNDLE"]` for one seed (or an ensemble of it), and leave the
    bundle folder (or the ensemble folder) as the kernel's output."""
    if not PYTHONS[0] <= sys.version_info[:2] <= PYTHONS[1]:
        sys.exit(f"attngeom kernel: Python {sys.version.split()[0]} is not supported (3.11 to 3.13 train)")
    os.environ["PYTHONSAFEPATH"] = "1"  # no Python it starts (pip, jax's check, the rerun) imports from its folder
    on_kaggle = bool(os.environ.get("KAGGLE_KERNEL_RUN_TYPE"))
    gpus = gpu_ids()  # before kernel_env pins one for a single run
    work = KAGGLE_WORKING if on_kaggle and KAGGLE_WORKING.is_dir() else Path.cwd()
    scratch = Path(tempfile.mkdtemp(prefix="attngeom-kernel-"))  # the environment, the unpacked source
    try:
        what, out = train_in(scratch, work, settings, source_b64, on_kaggle, gpus)
    finally:  # whatever ends the kernel: a failure on a machine that is not Kaggle's leaves nothing in its /tmp
        shutil.rmtree(scratch, ignore_errors=True)
    say(f"{what} done; bundles and manifests in {out}")
