"""Kaggle kernel definitions (`kaggle/<bundle>/`) and the self-contained scripts built from them.

A definition folder holds a `kernel-metadata.json` template (`{username}` and `{seed}` are
filled in at build time); the variants its kernel trains are the published ones the variants
table puts in its bundle (variants.VARIANTS_TABLE, the one list of them). The built
script is the program in `kernel_main` followed by the run's settings and this package's own
source, `expected/` and the hash-pinned CUDA lock as one base64 tar.gz, so the kernel trains
with exactly the code of this checkout: it installs the lock with uv and `--require-hashes`
into a fresh environment, drops the image's system CUDA from `LD_LIBRARY_PATH`, checks that jax
can use the GPU, runs `python -m attngeom rerun` and leaves the bundle
folder with its `manifest.json` under `attngeom-run/` in the working directory, which Kaggle
keeps as output (with `--members K`, the ensemble folder: `ensemble.json` and `member-<m>/`).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

from attngeom.backends import kernel_main
from attngeom.base import schema
from attngeom.base.errors import InputError
from attngeom.base.files import REPO
from attngeom.base.train_config import PRESET_NAMES
from attngeom.base.variants import PUBLISHED, variant

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
        except (OSError, ValueError) as exc:
            raise InputError(f"{folder}: unreadable kernel definition ({type(exc).__name__}: {exc})") from exc
        variants = tuple(v for v in PUBLISHED if variant(v).bundle == folder.name)
        if not variants:
            raise InputError(f"{folder}: no published variant of the variants table is trained in bundle {folder.name}")
        found[folder.name] = KernelDef(folder.name, variants, metadata)
    if not found:
        raise InputError(f"{root}: no kernel definitions (*/{METADATA_FILE})")
    return found


def kernel_metadata(defn: KernelDef, username: str, seed: int) -> dict:
    """The template with the user's name and the seed filled into its string fields."""
    if not re.fullmatch(schema.KAGGLE_USER, username):
        raise InputError(f"{username!r} is not a Kaggle user name (pass --username or set up credentials)")
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


def kernel_script(
    defn: KernelDef, seed: int, preset: str, archive: bytes, run_id: str = "", members: int | None = None
) -> str:
    """The kernel's Python script: `kernel_main`'s source, the settings and the payload, then a call to `main`
    (`members`: an ensemble of that many members instead of one run)."""
    if preset not in PRESET_NAMES:
        raise InputError(f"unknown preset '{preset}' (choose from {', '.join(PRESET_NAMES)})")
    b64 = base64.b64encode(archive).decode("ascii")
    chunks = "\n".join(f'    "{b64[i : i + 100]}"' for i in range(0, len(b64), 100))
    settings = {
        "BUNDLE": defn.name,
        "VARIANTS": ",".join(defn.variants),
        "SEED": str(seed),
        "PRESET": preset,
        "MEMBERS": str(members or ""),
        "OUTPUT_DIR": OUTPUT_DIR,
        "RUN_ID": run_id,
        "SOURCE_SHA256": hashlib.sha256(archive).hexdigest(),
    }
    program = Path(kernel_main.__file__).read_text(encoding="utf-8").rstrip()
    lines = "".join(f"    {k!r}: {v!r},\n" for k, v in settings.items())
    call = 'if __name__ == "__main__":\n    main(SETTINGS, "".join(SOURCE))\n'
    return f"{program}\n\n\nSETTINGS = {{\n{lines}}}\nSOURCE = (\n{chunks}\n)\n\n{call}"


def build_kernel(
    defn: KernelDef,
    username: str,
    seed: int,
    folder: Path,
    preset: str = "paper",
    archive: bytes | None = None,
    run_id: str = "",
    members: int | None = None,
) -> Path:
    """Write `kernel-metadata.json` and the script into `folder`, ready for `kaggle kernels push`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    metadata = kernel_metadata(defn, username, seed)
    archive = archive if archive is not None else source_archive()
    script = kernel_script(defn, seed, preset, archive, run_id, members)
    (folder / metadata["code_file"]).write_text(script, encoding="utf-8")
    (folder / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    return folder
