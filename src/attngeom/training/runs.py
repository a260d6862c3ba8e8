"""Run folders: created new, never written over, and marked complete only at the very end.

A run folder holds the bundles, `train_log.jsonl` (one line per training step) and
`manifest.json`. The manifest is written when the run starts with `completed: false` and
rewritten (atomically) with `completed: true` and the sha256 of every file once everything is
in place; a run that is interrupted, killed or crashes keeps `completed: false` (or records the
error), and `require_complete` refuses it. `RunFolder.resume` reopens such a run to continue it.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from attngeom.errors import InputError
from attngeom.files import git_commit, sha256_file, versions, write_atomic, write_json_atomic

MANIFEST = "manifest.json"
TRAIN_LOG = "train_log.jsonl"
RUNS_DIR = Path("runs")


def file_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under `root` but the manifest, by POSIX path relative to `root`."""
    return {
        p.relative_to(root).as_posix(): sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).as_posix() != MANIFEST
    }


def new_run_dir(out: Path | None, label: str, runs_dir: Path = RUNS_DIR) -> Path:
    """Create an empty run folder: `out`, else `runs_dir/<UTC time>-<label>`; never reuse one."""
    path = Path(out) if out is not None else runs_dir / f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{label}"
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise InputError(f"{path}: already exists and is not empty; a run is never written over, choose a new --out")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{path}: cannot create the run folder ({exc.strerror})") from exc
    return path


def environment() -> dict:
    """Versions, device and the settings that change numerics (XLA flags, matmul precision)."""
    import jax

    device = jax.devices()[0]
    return {
        "versions": versions(),
        "git_commit": git_commit(),
        "platform": platform.platform(),
        "device": {"platform": device.platform, "kind": device.device_kind, "count": jax.device_count()},
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "matmul_precision": str(jax.config.jax_default_matmul_precision),
        "command": " ".join(["python -m attngeom", *sys.argv[1:]]),
    }


class RunFolder:
    """A run in progress: its manifest, its training log and its completion."""

    def __init__(self, path: Path, config: dict):
        self.path = Path(path)
        self.started = time.perf_counter()
        self.manifest = {
            "completed": False,
            "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "config": config,
            **environment(),
            "wall_s": None,
            "files": {},
        }
        write_json_atomic(self.path / MANIFEST, self.manifest)

    @classmethod
    def resume(cls, path: Path) -> RunFolder:
        """Reopen an incomplete run to continue it; a finished run or a folder without manifest is refused."""
        manifest_path = Path(path) / MANIFEST
        unreadable = f"{manifest_path}: missing or unreadable run manifest; only a run folder can be resumed"
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(unreadable) from exc
        if not isinstance(manifest, dict) or "config" not in manifest:
            raise InputError(unreadable)
        if manifest.get("completed") is not False:
            raise InputError(f"{path}: this run already completed; nothing to resume (start a new run with --out)")
        run = cls.__new__(cls)
        run.path, run.started, run.manifest = Path(path), time.perf_counter(), manifest
        resumed = [*manifest.get("resumed_utc", []), datetime.now(timezone.utc).isoformat(timespec="seconds")]
        manifest.pop("error", None)
        run.update(resumed_utc=resumed)
        return run

    def trim_log(self, kept: dict[tuple[str, int], int]) -> None:
        """Keep only the logged steps below `kept[(variant, seed)]`: those a resumed run will not redo."""
        log = self.path / TRAIN_LOG
        if not log.is_file():
            return
        lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
        records = [json.loads(line) for line in lines if line.endswith("\n")]  # a torn last line is dropped
        write_atomic(log, "".join(
            line for line, r in zip(lines, records) if r["step"] < kept.get((r["variant"], r["seed"]), 0)
        ))  # fmt: skip

    def log_steps(self, variant: str, seed: int, first: int, losses: np.ndarray) -> None:
        """Append one line per step: variant, seed, step, loss."""
        lines = (
            json.dumps({"variant": variant, "seed": seed, "step": first + i, "loss": float(loss)})
            for i, loss in enumerate(np.asarray(losses).tolist())
        )
        with open(self.path / TRAIN_LOG, "a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))

    def update(self, **fields) -> None:
        """Record more facts (per-variant wall times, the verification status) in the manifest."""
        self.manifest.update(fields)
        write_json_atomic(self.path / MANIFEST, self.manifest)

    def fail(self, error: BaseException) -> None:
        """Keep the run marked incomplete and say why."""
        wall_s = round(time.perf_counter() - self.started, 3)
        self.update(completed=False, error=f"{type(error).__name__}: {error}", wall_s=wall_s)

    def complete(self, **fields) -> None:
        """Hash every file and mark the run complete (call again after adding files)."""
        self.update(
            **fields,
            completed=True,
            wall_s=round(time.perf_counter() - self.started, 3),
            files=file_hashes(self.path),
        )


def require_complete(path: Path) -> dict:
    """The manifest of a finished run whose files are all present and unchanged; else InputError."""
    manifest_path = Path(path) / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        files = dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{manifest_path}: missing or unreadable run manifest ({type(exc).__name__})") from exc
    if manifest.get("completed") is not True:
        why = f" ({manifest['error']})" if manifest.get("error") else ""
        raise InputError(f"{path}: this run did not complete{why}; start a new run")
    for name, want in sorted(files.items()):
        file = Path(path) / name
        if not file.is_file():
            raise InputError(f"{file}: listed in the run manifest but missing")
        if sha256_file(file) != want:
            raise InputError(f"{file}: changed since the run finished (sha256 differs from the manifest)")
    return manifest
