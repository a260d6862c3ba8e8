"""Kaggle kernel definitions (`kaggle/<bundle>/`) and the self-contained scripts built from them.

A definition folder holds a `kernel-metadata.json` template (`{username}` and `{seed}` are
filled in at build time) and a `run.json` naming the variants its bundle holds. The built
script carries this package's own source, `expected/` and the hash-pinned CUDA lock as one
base64 tar.gz, so the kernel trains with exactly the code of this checkout: on Kaggle it
installs the lock with `pip --require-hashes` into a fresh virtual environment, runs
`python -m attngeom rerun --backend local` and leaves the bundle folder with its
`manifest.json` under `attngeom-run/` in the working directory, which Kaggle keeps as output.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

from attngeom.errors import InputError
from attngeom.files import REPO
from attngeom.training.rerun import PRESET_NAMES

KAGGLE_DIR = REPO / "kaggle"
GPU_LOCK = REPO / "requirements-cuda.lock"  # also the Docker image's: the project's pins plus jax's CUDA 12 wheels
METADATA_FILE = "kernel-metadata.json"
CODE_FILE = "attngeom_kernel.py"
OUTPUT_DIR = "attngeom-run"


@dataclass(frozen=True)
class KernelDef:
    """One original bundle: its name, the variants it holds and its metadata template."""

    name: str
    variants: tuple[str, ...]
    metadata: dict

    def slug(self, seed: int) -> str:
        return f"{self.name}-s{seed}"

    def kernel_id(self, username: str, seed: int) -> str:
        return f"{username}/{self.slug(seed)}"


def definitions(root: Path = KAGGLE_DIR) -> dict[str, KernelDef]:
    """Every kernel definition under `root`, by bundle name."""
    found = {}
    for meta_path in sorted(Path(root).glob(f"*/{METADATA_FILE}")):
        folder = meta_path.parent
        try:
            metadata = json.loads(meta_path.read_text(encoding="utf-8"))
            variants = tuple(json.loads((folder / "run.json").read_text(encoding="utf-8"))["variants"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{folder}: unreadable kernel definition ({type(exc).__name__}: {exc})") from exc
        found[folder.name] = KernelDef(folder.name, variants, metadata)
    if not found:
        raise InputError(f"{root}: no kernel definitions (*/{METADATA_FILE})")
    return found


def kernel_metadata(defn: KernelDef, username: str, seed: int) -> dict:
    """The template with the user's name and the seed filled into its string fields."""
    if not username or username != username.strip() or "/" in username:
        raise InputError(f"'{username}' is not a Kaggle user name (pass --username or set up credentials)")
    return {
        k: v.replace("{username}", username).replace("{seed}", str(seed)) if isinstance(v, str) else v
        for k, v in defn.metadata.items()
    }


def _add_file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


def source_archive(repo: Path = REPO, lock: Path = GPU_LOCK) -> bytes:
    """A byte-reproducible tar.gz of the package source, `expected/` and the lock (as requirements.lock)."""
    files = [p for p in sorted((repo / "src" / "attngeom").rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    if (repo / "expected").is_dir():
        files += [p for p in sorted((repo / "expected").rglob("*")) if p.is_file()]
    if not lock.is_file():
        raise InputError(f"{lock}: missing; the kernel installs its dependencies from this hash-pinned lock")
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in files:
            _add_file(tar, path.relative_to(repo).as_posix(), path.read_bytes())
        _add_file(tar, "requirements.lock", lock.read_bytes())
    return raw.getvalue()


def kernel_script(defn: KernelDef, seed: int, preset: str, archive: bytes) -> str:
    """The kernel's Python script: the template below with the payload and settings filled in."""
    if preset not in PRESET_NAMES:
        raise InputError(f"unknown preset '{preset}' (choose from {', '.join(PRESET_NAMES)})")
    b64 = base64.b64encode(archive).decode("ascii")
    chunks = "\n".join(f'    "{b64[i : i + 100]}"' for i in range(0, len(b64), 100))
    settings = {
        "BUNDLE": defn.name,
        "VARIANTS": ",".join(defn.variants),
        "SEED": str(seed),
        "PRESET": preset,
        "OUTPUT_DIR": OUTPUT_DIR,
        "SOURCE_SHA256": hashlib.sha256(archive).hexdigest(),
    }
    head = "\n".join(f"{k} = {v!r}" for k, v in settings.items())
    return _SCRIPT.replace("@SETTINGS@", head).replace("@SOURCE@", chunks)


def build_kernel(
    defn: KernelDef, username: str, seed: int, folder: Path, preset: str = "paper", archive: bytes | None = None
) -> Path:
    """Write `kernel-metadata.json` and the script into `folder`, ready for `kaggle kernels push`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    metadata = kernel_metadata(defn, username, seed)
    script = kernel_script(defn, seed, preset, archive if archive is not None else source_archive())
    (folder / metadata["code_file"]).write_text(script, encoding="utf-8")
    (folder / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    return folder


_SCRIPT = '''\
"""attngeom on Kaggle: retrain one bundle of the original runs with the attngeom package itself.

Built by `./reproduce.sh kaggle build`. The payload below is the package source, its
`expected/` folder and the hash-pinned lock; the script installs the lock with
`pip --require-hashes` into a fresh virtual environment, trains with the local backend on one
GPU and leaves the bundle folder and its manifest.json in the working directory (the kernel's
output). ATTNGEOM_KERNEL_PYTHON=/path/to/python skips the install and trains with that
interpreter, which must already have the locked packages.
"""

import base64
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

@SETTINGS@
SOURCE = (
@SOURCE@
)


def run(cmd, **kwargs):
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


def unpack(dest):
    payload = base64.b64decode("".join(SOURCE))
    if hashlib.sha256(payload).hexdigest() != SOURCE_SHA256:
        sys.exit("attngeom kernel: the embedded source is corrupt (sha256 mismatch); rebuild the kernel")
    extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:gz") as tar:
        tar.extractall(dest, **extra)


def interpreter(scratch, repo):
    given = os.environ.get("ATTNGEOM_KERNEL_PYTHON")
    if given:
        return given
    venv = scratch / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--require-hashes", "-r", str(repo / "requirements.lock")])
    return python


def require_gpu(python, env):
    probe = "import jax; print(jax.devices()[0].platform)"
    found = subprocess.run([python, "-c", probe], env=env, capture_output=True, text=True).stdout.strip()
    if found != "gpu":
        sys.exit(f"attngeom kernel: no GPU in this session (jax sees '{found or 'nothing'}'); Kaggle gives GPUs "
                 "only to phone-verified accounts with GPU quota left")


def main():
    on_kaggle = bool(os.environ.get("KAGGLE_KERNEL_RUN_TYPE"))
    kaggle_working = Path("/kaggle/working")
    work = kaggle_working if on_kaggle and kaggle_working.is_dir() else Path.cwd()
    scratch = Path(tempfile.mkdtemp(prefix="attngeom-kernel-"))
    repo = scratch / "repo"
    unpack(repo)
    python = interpreter(scratch, repo)
    env = dict(os.environ, PYTHONPATH=str(repo / "src"))
    if on_kaggle:
        env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]  # one kernel, one GPU
        require_gpu(python, env)
    out = work / OUTPUT_DIR
    cmd = [python, "-m", "attngeom", "rerun", "--backend", "local", "--preset", PRESET, "--out", str(out),
           "--variants", VARIANTS, "--seeds", SEED, "--quiet"]
    print("+ " + " ".join(cmd), flush=True)
    status = subprocess.run(cmd, env=env, cwd=str(repo)).returncode
    # 1 = trained, but a claim misses its tolerance: the bundle is still the result to pull.
    if status not in (0, 1) or not (out / "manifest.json").is_file():
        sys.exit(f"attngeom kernel: training {BUNDLE} seed {SEED} failed (exit status {status})")
    print(f"attngeom kernel: {BUNDLE} seed {SEED} done; bundle and manifest in {out}", flush=True)


if __name__ == "__main__":
    main()
'''
