"""Helpers shared by the report and the run folders: hashes, atomic writes, the commit, versions."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import glob
import hashlib
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata
from pathlib import Path
from typing import BinaryIO

import numpy as np

from attngeom.base.errors import FULL_DISK, UNWRITABLE, InputError, shown  # noqa: F401 - read from here too

REPO = Path(__file__).resolve().parents[3]
LIBRARIES = ("numpy", "scipy", "pooch", "matplotlib", "jax", "jaxlib", "flax", "optax", "kaggle")


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


"""What the machine answers when a path cannot be written (read-only, immutable, a file-size limit, a
folder in the way): unusable output, the user's to fix, never an internal error (`cli.ended`)."""
SPECIAL_TREES = ("/proc", "/sys", "/dev")  # kernel and device files: never an output, whatever their type
_NAME_KEPT = 200  # bytes of a name kept in a temporary name beside it (a name holds at most 255 bytes)


def tmp_prefix(name: str) -> str:
    """The prefix of a temporary name beside `name`: `.NAME.`, the name cut so that any name fits."""
    return f".{os.fsdecode(os.fsencode(name)[:_NAME_KEPT])}."


def is_temporary(name: str) -> bool:
    """Whether `name` is one that `atomic_file` or `replaced_folder` writes under before its rename
    (`.NAME.XXXXXXXX.tmp`): what a writer killed half-way leaves behind."""
    return name.startswith(".") and name.endswith(".tmp") and len(name) > len("..tmp")


def remove_temporaries(root: Path, recursive: bool = True, of: str | None = None) -> list[str]:
    """Delete every file and folder in `root` (and below it, if `recursive`) that a killed writer left
    (`is_temporary`), or only those it left of the entry named `of`; their names, relative to `root`. Call
    it only on what this process owns (a run folder it has claimed, an output it holds `exclusive`)."""
    root, removed = Path(root), []
    pattern = f"{glob.escape(tmp_prefix(of))}*.tmp" if of is not None else ".*.tmp"
    found = root.rglob(pattern) if recursive else root.glob(pattern)
    for path in sorted(found, key=lambda p: len(p.parts)):
        if not is_temporary(path.name) or not os.path.lexists(path):  # inside a removed folder already
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        removed.append(path.relative_to(root).as_posix())
    return removed


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def regular_output(path: Path) -> None:
    """Refuse an output path that is not a new file or a regular one (a link is replaced, not followed):
    renaming over a device, a FIFO, a socket or a folder would replace it, and a file of /proc, /sys or
    /dev is the kernel's. One InputError naming what it is."""

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise InputError(f"{shown(path)}: cannot be written ({exc.strerror})") from exc
    kinds = {stat.S_ISDIR: "a folder", stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device"}
    kinds |= {stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket"}
    what = next((name for test, name in kinds.items() if mode is not None and test(mode)), None)
    parent = os.path.realpath(Path(path).parent)
    tree = next((t for t in SPECIAL_TREES if parent == t or parent.startswith(t + "/")), None)
    if what is None and tree:
        what = f"a file under {tree}, the kernel's"
    if what:
        raise InputError(f"{shown(path)}: is {what}, not a file to write; name a new file or a regular one")


def output_file(text: str) -> Path:
    """The argparse type of a file a command writes (`--write`, `--out`, `--json`): refused as the
    options are read, before any work, when it cannot be one (`regular_output`)."""
    regular_output(Path(text))
    return Path(text)


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary file that replaces `path` only when the block ends without error.

    It is written under a temporary name unique to this process beside `path` and renamed over
    it, so a reader, a crash or a concurrent writer never sees half a file.
    """
    path = Path(path)
    regular_output(path)
    with naming(path, lambda name: name is None or Path(name).parent == path.parent and is_temporary(Path(name).name)):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=tmp_prefix(path.name), suffix=".tmp", dir=path.parent)
        try:
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide the file from its other readers
            with os.fdopen(fd, "wb") as f:
                yield f
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


@contextlib.contextmanager
def naming(path: Path, unnamed: Callable[[str | None], bool] = lambda name: name is None) -> Iterator[None]:
    """An unwritable output's error (UNWRITABLE) names `path` where it names no file or one of `unnamed`
    (a write names none, and a temporary name is not the reader's): the message says what to fix."""
    try:
        yield
    except OSError as exc:
        if exc.errno in UNWRITABLE and unnamed(exc.filename):
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write text (UTF-8) or bytes to `path` through `atomic_file`."""
    with atomic_file(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def _to_json(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def write_json_atomic(path: Path, doc: dict) -> None:
    """`write_atomic` of a JSON document (numpy scalars allowed). NaN and infinities are refused: JSON has no
    such numbers, and the package's own readers refuse them (`schema.Number`)."""

    try:
        text = json.dumps(doc, indent=1, ensure_ascii=False, default=_to_json, allow_nan=False)
    except ValueError as exc:
        raise InputError(f"{shown(path)}: not written: it would hold a number that is not finite ({exc})") from exc
    write_atomic(path, text + "\n")


def _exchange(a: Path, b: Path) -> None:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE)."""
    if not sys.platform.startswith("linux"):
        raise OSError(errno.ENOSYS, "no atomic exchange on this system")
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_exchange = -100, 2
    if libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(b))


def replace_together(texts: dict[Path, str]) -> None:
    """Give each existing file of `texts` its new text, every one of them or none: each text is written
    whole beside its file first, then each swapped in (`_exchange`); a swap that fails (a file that cannot
    be replaced) swaps the ones before it back, and raises."""
    staged: dict[Path, Path] = {}
    try:
        for path, text in texts.items():
            fd, name = tempfile.mkstemp(prefix=tmp_prefix(path.name), suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(text.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
            os.chmod(name, stat.S_IMODE(path.stat().st_mode))
            staged[path] = Path(name)
        swapped: list[Path] = []
        try:
            for path, new in staged.items():
                _exchange(new, path)
                swapped.append(path)
        except OSError:
            for path in reversed(swapped):
                _exchange(staged[path], path)
            raise
    finally:
        for new in staged.values():
            new.unlink(missing_ok=True)


def _swap_in(new: Path, target: Path) -> Path | None:
    """Put folder `new` at `target`; return where the folder it replaced now is (None: there was none)."""
    for _ in range(100):  # another process may create or replace `target` between two attempts
        if not os.path.lexists(target):
            try:
                os.rename(new, target)
                return None
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
                continue
        try:
            _exchange(new, target)
            return new
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                continue
            if exc.errno not in (errno.ENOSYS, errno.EINVAL):
                raise
        old = new.with_suffix(".old")  # no atomic exchange here: target is briefly absent
        os.rename(target, old)
        os.rename(new, target)
        return old
    raise OSError(errno.EBUSY, "kept changing while being replaced", str(target))


def _holds_working_folder(real: Path) -> bool:
    cwd = Path(os.path.realpath(os.getcwd()))
    return real == cwd or real in cwd.parents


def apart(out: Path, inputs: Iterable[Path], what: str) -> None:
    """Refuse, before any work, an output `out` (`what` it holds) that would write over what a command reads:
    an input itself, a place inside one or a folder holding one (a run's files would be replaced or
    listed among the output's), or a file-system root or mount point (never a folder of its own)."""
    real = Path(os.path.realpath(out))
    if real == Path(real.anchor) or (real.is_dir() and os.path.ismount(real)):
        raise InputError(f"{shown(out)}: a file-system root or mount point; {what} needs a folder of its own")
    for given in inputs:
        source = Path(os.path.realpath(given))
        if real == source or real.is_relative_to(source) or source.is_relative_to(real):
            how = "is" if real == source else "lies inside" if real.is_relative_to(source) else "holds"
            raise InputError(f"{shown(out)} {how} {shown(given)}, which it reads; write {what} elsewhere")


@contextlib.contextmanager
def exclusive(*outputs: Path) -> Iterator[None]:
    """Hold the folders that hold `outputs` for this process while it reads, changes and writes them, so
    that two commands writing one output take turns instead of losing one's work: an exclusive lock on
    each folder (taken in one order by every process, so none waits on another in a circle), released
    when the block ends or the process does."""
    folders = sorted({Path(os.path.realpath(o)).parent for o in outputs})
    held: list[int] = []
    try:
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(folder, os.O_RDONLY)
            held.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in held:
            os.close(fd)


def replaceable(target: Path) -> Path:
    """The real folder that `replaced_folder(target)` would write, refused where that would do harm.

    A symlink is followed (the set goes where it points; the link stays). A mount point cannot be
    renamed, and one inside the folder would have its files carried off and deleted.
    """
    real = Path(os.path.realpath(target))
    if not real.is_dir() or _holds_working_folder(real):  # the working folder is written in place
        return real
    if os.path.ismount(real):
        raise OSError(errno.EBUSY, "it is a mount point, which the swap cannot replace; name a folder inside it")
    device = real.stat().st_dev
    for folder, subfolders, _ in os.walk(real):
        for name in subfolders:
            inner = Path(folder) / name
            if not inner.is_symlink() and (inner.stat().st_dev != device or os.path.ismount(inner)):
                raise OSError(
                    errno.EBUSY, f"{shown(inner)} inside it is a mount point, whose files the swap would remove"
                )
    return real


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _renew_entries(new: Path, target: Path, renewed: set[str]) -> None:
    """Swap each renewed entry of `new` into `target`; the replaced ones (and renewed entries `new`
    lacks) end up in `new`, which the caller removes."""
    for name in sorted(renewed):
        if os.path.lexists(new / name):
            _swap_in(new / name, target / name)
        elif os.path.lexists(target / name):
            os.rename(target / name, new / name)


@contextlib.contextmanager
def replaced_folder(target: Path, renewed: set[str]) -> Iterator[Path]:
    """A fresh folder beside `target` that replaces it whole when the block ends without error.

    Everything in the old folder except the entries named in `renewed` is carried over (hard
    links where possible) before the block runs; the block writes the renewed entries. The swap
    is one rename, so a kill at any instant leaves the old folder or the new one, never a mix, and
    a concurrent writer's folder is replaced whole too. The temporary name is unique per process.
    What `replaceable` refuses is refused before anything is written. The caller's working folder
    (or one holding it) keeps its place, or the caller's shell would be left in a deleted folder:
    there each renewed entry is swapped in on its own, one rename each.
    """
    target = replaceable(target)
    if os.path.lexists(target) and not target.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "exists and is not a folder", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=tmp_prefix(target.name), suffix=".tmp", dir=target.parent))
    try:
        mode = (target.stat().st_mode if target.is_dir() else 0o777 & ~_umask()) & 0o7777
        in_place = target.is_dir() and _holds_working_folder(target)
        if target.is_dir():
            for entry in os.scandir(target):
                if entry.name in renewed:
                    continue
                if in_place:  # read through links, never copied, never removed
                    os.symlink(entry.path, new / entry.name)
                elif entry.is_dir(follow_symlinks=False):
                    shutil.copytree(entry.path, new / entry.name, symlinks=True, copy_function=_link_or_copy)
                else:
                    _link_or_copy(entry.path, new / entry.name)
        yield new
        if in_place:
            _renew_entries(new, target, renewed)
            return
        os.chmod(new, mode)
        old = _swap_in(new, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(new, ignore_errors=True)


def git_commit() -> str | None:
    """The commit of the source tree this package runs from, if it is a git checkout."""
    if not (REPO / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


def versions() -> dict[str, str]:
    """Python, this package and every installed library the results depend on."""
    from attngeom import __version__

    found = {"attngeom": __version__, "python": platform.python_version()}
    for lib in LIBRARIES:
        try:
            found[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            continue
    return found


def _cpuinfo(keys: tuple[str, ...]) -> str | None:
    """The first value under one of `keys` in /proc/cpuinfo (Linux), if any."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in keys and value.strip():
                return value.strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The processor's model name (float round-off, and so the last digits, depend on it)."""
    model = _cpuinfo(("model name", "Hardware", "cpu model"))
    if model:
        return model
    if sys.platform == "darwin":
        out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, check=False)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return platform.processor() or "unknown CPU model"


def cpu_identity() -> str:
    """A short hash of the architecture, CPU model and instruction-set flags: what XLA's CPU code depends on
    (two machines with the same model name but different flags, as virtual machines can be, differ here)."""
    flags = _cpuinfo(("flags", "Features")) or ""
    text = f"{platform.machine()}|{cpu_model()}|{' '.join(sorted(flags.split()))}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def machine() -> str:
    """Platform, architecture, CPU model and number of cores."""
    return f"{platform.platform()} ({platform.machine()}, {cpu_model()}, {os.cpu_count()} cores)"
