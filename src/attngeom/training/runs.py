"""Run folders: created new, never written over, and marked complete only at the very end.

A run folder holds the bundles, `train_log.jsonl` (one line per training step) and
`manifest.json`. The manifest is written when the run starts with `completed: false` and
rewritten (atomically) with `completed: true` and the sha256 of every file once everything is
in place; a run that is interrupted, killed or crashes keeps `completed: false` (or records the
error), and `require_complete` refuses it. `RunFolder.resume` reopens such a run to continue it.

One process at a time owns a run folder: it holds an exclusive lock on the folder's `.lock`
file (which names its process id) while it works, and the kernel releases the lock when the
process ends, however it ends. While training, each variant keeps a checkpoint in
`checkpoints/`; `read_checkpoint` reads every byte of one before it is trusted.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import sys
import time
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from attngeom.base.environment import against_lock
from attngeom.base.errors import InputError, one_line
from attngeom.base.files import (
    atomic_file,
    git_commit,
    is_temporary,
    machine,
    naming,
    remove_temporaries,
    sha256_file,
    versions,
    write_atomic,
    write_json_atomic,
)
from attngeom.base.variants import model_key
from attngeom.bundles.manifest import MANIFEST, REPORT, read_manifest  # noqa: F401 - the run folder's names, read here too

TRAIN_LOG = "train_log.jsonl"
LOCK = ".lock"
CHECKPOINTS = "checkpoints"
RUNS_DIR = Path("runs")
CHECKPOINT_ERRORS = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def file_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file a run keeps, by POSIX path relative to `root`: all but the manifest, the lock,
    the checkpoints (working state, deleted once the run completes, or kept to carry it on) and what a
    killed writer left (`files.is_temporary`)."""
    kept = (
        p
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and p.relative_to(root).as_posix() not in (MANIFEST, LOCK)
        and p.relative_to(root).parts[0] != CHECKPOINTS
        and not any(is_temporary(part) for part in p.relative_to(root).parts)
    )
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in kept}


def new_run_dir(out: Path | None, label: str, runs_dir: Path = RUNS_DIR) -> Path:
    """Create an empty run folder: `out`, else a new `runs_dir/<UTC time>-<label>[-n]`; never reuse one."""
    try:
        if out is None:
            runs_dir.mkdir(parents=True, exist_ok=True)
            stem = runs_dir / f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{label}"
            for n in range(1, 1000):  # mkdir is atomic: of two runs started in the same second, each gets its own
                path = stem if n == 1 else stem.with_name(f"{stem.name}-{n}")
                try:
                    path.mkdir()
                    return path
                except FileExistsError:
                    continue
            raise InputError(f"{runs_dir}: too many runs named {stem.name}; choose an --out")
        path = Path(out)
        # a folder holding only the lock of a run that never wrote its manifest (refused, or killed at once)
        # and what its killed writer left is empty: `RunFolder` claims it, unless its process still holds it
        if path.exists() and (
            not path.is_dir() or {p.name for p in path.iterdir() if not is_temporary(p.name)} - {LOCK}
        ):
            raise InputError(
                f"{path}: already exists and is not empty; a run is never written over, choose a new --out"
            )
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{exc.filename}: cannot create the run folder ({exc.strerror})") from exc
    return path


def claim(path: Path) -> int:
    """Lock a run folder for this process (an open descriptor, held until closed or the process ends)."""
    lock = Path(path) / LOCK
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise InputError(f"{lock}: cannot lock the run folder ({exc.strerror})") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise InputError(f"{path}: in use by another run (process {owner}); wait for it to end") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def checkpoint_path(run_dir: Path, variant: str, seed: int) -> Path:
    """Where a variant's latest checkpoint lives while its run is in progress."""
    return Path(run_dir) / CHECKPOINTS / f"{variant}_s{seed}.npz"


def write_checkpoint(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """A checkpoint's named arrays, written atomically (tmp + rename)."""
    with atomic_file(path) as f:
        np.savez(f, **arrays)


def read_checkpoint(path: Path, steps: int) -> dict[str, np.ndarray]:
    """Every array of a checkpoint, each read in full (a damaged byte fails its CRC), `done` and `losses` checked.

    A checkpoint is saved after an evaluation or at a stop, so `done` is a step count from 1 to
    `steps`, and training stops on the first non-finite loss, so its `done` losses are finite.
    """
    unusable = f"{path}: unusable checkpoint"
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
    except CHECKPOINT_ERRORS as exc:
        raise InputError(f"{unusable} ({type(exc).__name__}); delete it to restart that variant") from exc
    done = arrays.get("done")
    if done is None or done.shape != () or done.dtype.kind not in "iu" or not 0 < done <= steps:
        raise InputError(f"{unusable} (its step count is not from 1 to {steps}); delete it to restart that variant")
    losses = arrays.get("losses")
    if losses is None or losses.shape != (int(done),) or not np.isfinite(losses).all():
        raise InputError(f"{unusable} (not {int(done)} finite losses); delete it to restart that variant")
    return arrays


def checkpoint_step(path: Path, steps: int) -> int:
    """Completed steps in a checkpoint, 0 if there is none; a damaged one is an InputError."""
    return int(read_checkpoint(path, steps)["done"]) if os.path.lexists(path) else 0


STAMP = "trajectory"  # the checkpoint's member holding its trajectory's stamp (training.trajectory), as JSON


def stamp_array(stamp: dict) -> np.ndarray:
    """A stamp as the checkpoint stores it."""
    return np.array(json.dumps(stamp, sort_keys=True))


def checkpoint_stamp(arrays: dict[str, np.ndarray]) -> dict | None:
    """The stamp a checkpoint's arrays (`read_checkpoint`) record; None for one that records none."""
    text = arrays.get(STAMP)
    if text is None or text.shape != () or text.dtype.kind != "U":
        return None
    try:
        stamp = json.loads(str(text))
    except ValueError:
        return None
    return stamp if isinstance(stamp, dict) else None


PENDING = ".pending"  # a group's checkpoint written, not yet in place (`settle_group`)


def pending_path(path: Path) -> Path:
    """Where a checkpoint of a group waits until every member's is written."""
    return Path(path).with_name(Path(path).name + PENDING)


def commit_group(paths: list[Path], write) -> None:
    """Save the checkpoints of members trained together so that they never part: `write(i, path)` writes
    member i's at `pending_path`, and only once every one is written are they renamed into place. A kill
    before the renames leaves the old checkpoints (the pending ones are discarded), a kill during them
    leaves what `settle_group` completes."""
    for i, path in enumerate(paths):
        write(i, pending_path(path))
    for path in paths:
        os.replace(pending_path(path), path)


def settle_group(paths: list[Path], steps: int) -> str | None:
    """Before a group trained together is resumed: finish or discard an interrupted `commit_group`.

    The renames begin only once every member's pending checkpoint is written, so when every member has
    either a pending checkpoint or one in place at the newest pending step, the commit was complete and
    its renames are finished; otherwise none had begun and the pending ones go. Returns what was done."""
    pending = [pending_path(p) for p in paths if os.path.lexists(pending_path(p))]
    if not pending:
        return None
    try:
        newest = max(checkpoint_step(p, steps) for p in pending)
        whole = all(os.path.lexists(pending_path(p)) or checkpoint_step(p, steps) == newest for p in paths)
    except InputError:  # a pending checkpoint cut short: the commit had not reached its renames
        whole = False
    if whole:
        for p in pending:
            os.replace(p, p.with_name(p.name[: -len(PENDING)]))
        return f"the members' checkpoints at step {newest}, written together, are put in place"
    for p in pending:
        os.unlink(p)
    return "the members' unfinished checkpoints are discarded (they had not all been written)"


# The CPU code generations XLA's `--xla_cpu_max_isa` names, each with the /proc/cpuinfo flag that
# shows a CPU has it, newest first. Each one rounds float32 differently (other fused and vectorised
# instruction sequences), so the last digits of a run depend on the one in force.
XLA_CPU_ISAS = (("AVX512", "avx512f"), ("AVX2", "avx2"), ("AVX", "avx"), ("SSE4_2", "sse4_2"))


def xla_cpu_isa() -> str:
    """The CPU code generation XLA compiles for: the `--xla_cpu_max_isa` in XLA_FLAGS, else "default" and
    the CPU's best from /proc/cpuinfo (XLA's default uses everything the CPU has)."""
    chosen = [
        f.partition("=")[2] for f in os.environ.get("XLA_FLAGS", "").split() if f.startswith("--xla_cpu_max_isa=")
    ]
    if chosen:
        return f"{chosen[-1]} (XLA_FLAGS --xla_cpu_max_isa)"
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    flags = {f for line in text.splitlines() if line.startswith("flags") for f in line.partition(":")[2].split()}
    best = next((isa for isa, flag in XLA_CPU_ISAS if flag in flags), "unknown")
    return f"default (the CPU's best: {best})"


def run_machine() -> str:
    """The manifest's `machine`: the machine and the XLA CPU code generation its run was compiled for."""
    return f"{machine()}, XLA CPU ISA {xla_cpu_isa()}"


def environment() -> dict:
    """Versions, device and the settings that change numerics (XLA flags, matmul precision)."""
    import jax

    device = jax.devices()[0]
    return {
        "versions": (used := versions()),
        "environment": against_lock(used),
        "git_commit": git_commit(),
        "platform": platform.platform(),
        "machine": run_machine(),
        "device": {"platform": device.platform, "kind": device.device_kind, "count": jax.device_count()},
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "matmul_precision": str(jax.config.jax_default_matmul_precision),
        "command": " ".join(["python -m attngeom", *sys.argv[1:]]),
    }


class RunFolder:
    """A run in progress: its manifest, its training log and its completion."""

    def __init__(self, path: Path, config: dict, **first):
        """Claim the new run folder `path` and write its first manifest: `config` and the facts in `first`
        (the trajectory's stamp), so that no kill leaves a run that cannot say what it is."""
        self.path = Path(path)
        self.lock = claim(self.path)
        if (self.path / MANIFEST).exists():
            self.release()
            raise InputError(f"{self.path}: already holds a run; a run is never written over, choose a new --out")
        remove_temporaries(self.path)  # what a run killed before its first manifest left
        self.started = time.perf_counter()
        self.manifest = {
            "completed": False,
            "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "config": config,
            **environment(),
            "wall_s": None,
            "files": {},
            **first,
        }
        write_json_atomic(self.path / MANIFEST, self.manifest)

    @classmethod
    def reopen(cls, path: Path) -> RunFolder:
        """Claim a run to continue it, writing nothing yet: one that did not complete, or one stopped early.

        A finished full run, a folder without manifest or a run another process holds is refused.
        """
        _resumable(path)
        run = cls.__new__(cls)
        run.path, run.lock = Path(path), claim(path)
        try:
            run.manifest = _resumable(path)  # read again under the lock: another run may have finished it
        except InputError:
            run.release()
            raise
        run.started = time.perf_counter()
        run.removed = remove_temporaries(run.path)  # a killed writer's leftovers: never listed, never read
        return run

    @classmethod
    def resume(cls, path: Path) -> RunFolder:
        """`reopen` and `restart`."""
        run = cls.reopen(path)
        run.restart()
        return run

    def restart(self) -> None:
        """Mark the run incomplete again and in progress: the earlier error is cleared, the restart recorded."""
        resumed = [*self.manifest.get("resumed_utc", []), datetime.now(timezone.utc).isoformat(timespec="seconds")]
        self.manifest.pop("error", None)
        self.update(completed=False, resumed_utc=resumed)

    def release(self) -> None:
        """Give up the claim on the folder (the end of the process does it too)."""
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None

    def kept_log(self, kept: dict[tuple[str, int], int]) -> str | None:
        """The training log with only the logged steps below `kept[(variant, seed)]` (those a resumed run will
        not redo), a torn last line dropped; None without a log. Reads only: a damaged line is an InputError
        raised before a resume writes anything."""
        log = self.path / TRAIN_LOG
        if not log.is_file():
            return None
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        records = []
        for number, line in enumerate(lines, 1):
            if not line.endswith("\n"):  # a torn last line: the writer was killed there
                break
            try:
                record = json.loads(line)
                records.append((line, int(record["step"]), (record["variant"], int(record["seed"]))))
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(f"{log}:{number}: not a line of this run's training log ({one_line(exc)})") from None
        return "".join(line for line, step, model in records if step < kept.get(model, 0))

    def write_log(self, text: str | None) -> None:
        """Replace the training log with `text` (`kept_log`); None: there is none."""
        if text is not None:
            write_atomic(self.path / TRAIN_LOG, text)

    def log_steps(self, variant: str, seed: int, first: int, losses: np.ndarray) -> None:
        """Append one line per step: variant, seed, step, loss."""
        lines = (
            json.dumps({"variant": variant, "seed": seed, "step": first + i, "loss": float(loss)})
            for i, loss in enumerate(np.asarray(losses).tolist())
        )
        with naming(self.path / TRAIN_LOG), open(self.path / TRAIN_LOG, "a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))

    def update(self, **fields) -> None:
        """Record more facts (per-variant wall times, the verification status) in the manifest."""
        self.manifest.update(fields)
        write_json_atomic(self.path / MANIFEST, self.manifest)

    def checkpoint_steps(self) -> dict[str, int | None]:
        """Steps done in each model's checkpoint (0: none yet; None: unreadable), by `<variant>_s<seed>`."""
        config = self.manifest["config"]
        out: dict[str, int | None] = {}
        for seed in config["seeds"]:
            for variant in config["variants"]:
                try:
                    out[model_key(variant, seed)] = checkpoint_step(
                        checkpoint_path(self.path, variant, seed), config["train"]["steps"]
                    )
                except InputError:
                    out[model_key(variant, seed)] = None
        return out

    def begin_segment(self, facts: dict) -> None:
        """Record that this process trains the run on, from the steps in its checkpoints, under `facts`
        (`trajectory.segment_facts`): one segment per process, closed by `fail` or `complete`. A segment
        left open (its process ended by a signal or killed before it could say so) is closed here, at
        the steps its checkpoints hold, without a wall time."""
        reached = self.checkpoint_steps()
        segments = [dict(s) for s in self.manifest.get("segments", [])]
        if segments and "to_steps" not in segments[-1]:
            segments[-1].update(to_steps=reached, ended="without closing (interrupted or killed): closed on resume")
        segment = {
            "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": run_machine(),
            **facts,
            "from_steps": reached,
        }
        self.update(segments=[*segments, segment])

    def _segment_end(self) -> dict:
        """The manifest's segments with this process's closed: the steps it left and its wall time."""
        segments = [dict(s) for s in self.manifest.get("segments", [])]
        if segments:
            segments[-1].update(to_steps=self.checkpoint_steps(), wall_s=round(time.perf_counter() - self.started, 3))
        return {"segments": segments} if segments else {}

    def fail(self, error: BaseException) -> None:
        """Keep the run marked incomplete and say why."""
        wall_s = round(time.perf_counter() - self.started, 3)
        self.update(completed=False, error=f"{type(error).__name__}: {error}", wall_s=wall_s, **self._segment_end())

    def complete(self, **fields) -> None:
        """Hash every file and mark the run complete (call again after adding files)."""
        self.update(
            **fields,
            **self._segment_end(),
            completed=True,
            wall_s=round(time.perf_counter() - self.started, 3),
            files=file_hashes(self.path),
        )


def _resumable(path: Path) -> dict:
    """The manifest of a run that can be continued; else InputError."""
    manifest_path = Path(path) / MANIFEST
    try:
        manifest = read_manifest(manifest_path)
    except InputError as exc:
        raise InputError(f"missing or unreadable run manifest; only a run folder can be resumed: {exc}") from exc
    if manifest.get("completed") is not False and manifest.get("stopped_after") is None:
        raise InputError(f"{path}: this run already completed; nothing to resume (start a new run with --out)")
    return manifest


def require_complete(path: Path) -> dict:
    """The manifest of a finished run whose files are all present and unchanged; else InputError."""
    manifest_path = Path(path) / MANIFEST
    try:
        manifest = read_manifest(manifest_path)
        files = manifest["files"]
    except (InputError, KeyError) as exc:
        raise InputError(f"{manifest_path}: missing or unreadable run manifest ({exc})") from exc
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
