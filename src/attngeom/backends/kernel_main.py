"""attngeom on Kaggle: retrain one bundle of the original runs with the attngeom package itself.

This module is the program of the kernel script that `./reproduce.sh kaggle build` writes: the
script is this file's source followed by the run's `SETTINGS`, the payload `SOURCE` (the package
source, its `expected/` folder and the hash-pinned lock, as one base64 tar.gz) and a call to
`main`. It therefore imports the standard library only and runs on the image's own Python.

The kernel checks the payload, installs the lock into a fresh environment without `ensurepip`
(Kaggle's image has no `python3-venv`): `uv`, pinned by hash in the lock, is installed with the
image's pip into a scratch folder, then `uv venv` and `uv pip install --require-hashes` with no
cache left behind. It trains with the local backend on one GPU, stamps the run's id into the
bundle folder's `manifest.json` (so outputs of an older push are recognised) and leaves that
folder in the working directory, which Kaggle keeps as output.
`ATTNGEOM_KERNEL_PYTHON=/path/to/python` skips the install and trains with that interpreter,
which must already have the locked packages.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

PYTHONS = ((3, 11), (3, 13))  # the lock's range for training (jax 0.10.2 needs 3.11 or newer)
KAGGLE_WORKING = Path("/kaggle/working")


def say(message: str) -> None:
    """One line of the kernel's log."""
    print(f"attngeom kernel: {message}", flush=True)


def run(cmd: list[str], **kwargs) -> None:
    """Run `cmd`, echoed to the log; a failure ends the kernel with one line naming it."""
    print("+ " + " ".join(cmd), flush=True)
    status = subprocess.run(cmd, check=False, **kwargs).returncode
    if status != 0:
        sys.exit(f"attngeom kernel: {Path(cmd[0]).name} {cmd[1]} failed (exit status {status}); its output is above")


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
    run([*pip, "--require-hashes", "--no-deps", "--target", str(tool), "-r", str(scratch / "uv.txt")])
    uv = str(tool / "bin" / "uv")
    venv = scratch / "venv"
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_NO_CACHE="1")
    run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], env=env)
    python = str(venv / "bin" / "python")
    run([uv, "pip", "install", "--quiet", "--python", python, "--require-hashes", "-r", str(lock)], env=env)
    say(f"installed {lock.name} in {time.monotonic() - started:.0f} s")
    return python


def require_gpu(python: str, env: dict) -> None:
    """Stop early, with the reason, when jax sees no GPU in this session."""
    probe = "import jax; print(jax.devices()[0].platform)"
    found = subprocess.run([python, "-c", probe], check=False, env=env, capture_output=True, text=True).stdout.strip()
    if found != "gpu":
        sys.exit(
            f"attngeom kernel: no GPU in this session (jax sees '{found or 'nothing'}'); Kaggle gives GPUs "
            "only to phone-verified accounts with GPU quota left"
        )


def stamp_manifest(out: Path, settings: dict) -> None:
    """Record which run and kernel made this folder in its manifest, so a stale output is recognised."""
    path = out / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["kaggle"] = {"run_id": settings["RUN_ID"], "bundle": settings["BUNDLE"], "seed": int(settings["SEED"])}
    part = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    part.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    os.replace(part, path)


def main(settings: dict, source_b64: str) -> None:
    """Unpack, install, train `settings["BUNDLE"]` for one seed, and leave the bundle as the kernel's output."""
    if not PYTHONS[0] <= sys.version_info[:2] <= PYTHONS[1]:
        sys.exit(f"attngeom kernel: Python {sys.version.split()[0]} is not supported (3.11 to 3.13 train)")
    on_kaggle = bool(os.environ.get("KAGGLE_KERNEL_RUN_TYPE"))
    work = KAGGLE_WORKING if on_kaggle and KAGGLE_WORKING.is_dir() else Path.cwd()
    scratch = Path(tempfile.mkdtemp(prefix="attngeom-kernel-"))
    repo = scratch / "repo"
    unpack(source_b64, settings["SOURCE_SHA256"], repo)
    python = interpreter(scratch, repo)
    env = dict(os.environ, PYTHONPATH=str(repo / "src"))
    if env.get("ATTNGEOM_MIRROR"):  # relative to this folder, not to the unpacked source where training runs
        env["ATTNGEOM_MIRROR"] = str(Path(env["ATTNGEOM_MIRROR"]).expanduser().resolve())
    if on_kaggle:
        env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]  # one kernel, one GPU
    if on_kaggle and settings["PRESET"] != "smoke":  # the smoke preset trains on whatever jax finds
        require_gpu(python, env)
    out = work / settings["OUTPUT_DIR"]
    cmd = [python, "-m", "attngeom", "rerun", "--preset", settings["PRESET"]]
    cmd += ["--out", str(out), "--variants", settings["VARIANTS"], "--seeds", settings["SEED"], "--quiet"]
    print("+ " + " ".join(cmd), flush=True)
    status = subprocess.run(cmd, check=False, env=env, cwd=str(repo)).returncode
    what = f"{settings['BUNDLE']} seed {settings['SEED']}"
    # 1 = trained, but a claim misses its tolerance: the bundle is still the result to pull.
    if status not in (0, 1) or not (out / "manifest.json").is_file():
        sys.exit(f"attngeom kernel: training {what} failed (exit status {status})")
    stamp_manifest(out, settings)
    shutil.rmtree(scratch, ignore_errors=True)
    say(f"{what} done; bundle and manifest in {out}")
