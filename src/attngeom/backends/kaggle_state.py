"""`<run>/kaggle-state.json`: what a Kaggle run has recorded so far, read only after one schema accepts it.

The file is rewritten atomically at every step of a run, and `status`, `pull` and `run --run DIR`
continue from it, so it is read as untrusted input: valid JSON of another shape (a list, an empty
object, a kernel without its id, a path out of the run folder, deep nesting) is one clear error.
"""

from __future__ import annotations

from pathlib import Path

from attngeom import schema
from attngeom.errors import InputError
from attngeom.files import write_json_atomic
from attngeom.schema import Items, Maybe, Number, Record, Text
from attngeom.training.config import PRESET_NAMES

STATE_FILE = "kaggle-state.json"
MAX_STATE_BYTES = 1 << 20  # a few hundred kernels' worth

_NAME = "[A-Za-z0-9._-]+"
_TIME = Maybe(Number(0))
KERNEL_SCHEMA = Record(
    {
        "bundle": Text(256, _NAME),
        "seed": Number(0, 2**32 - 1, integer=True),
        "id": Text(512, rf"[^/\s]+/{_NAME}"),
        "variants": Items(Text(64), max_len=64),
        "folder": Text(512, rf"kernels/{_NAME}"),
        "state": Text(64, "[A-Z_]+"),
        "pushed": _TIME,
        "finished": _TIME,
        "version": Maybe(Number(1, 2**31 - 1, integer=True)),
        "url": Text(65536),
        "message": Maybe(Text(65536)),
    },
    required=("bundle", "seed", "id", "variants", "folder", "state"),
    other=None,
)
STATE_SCHEMA = Record(
    {
        "username": Text(256, min_len=1),
        "created": Text(65536),
        "run_id": Text(32, "[0-9a-f]{32}"),
        "preset": Text(64, "|".join(PRESET_NAMES)),
        "accelerator": Text(256, min_len=1),
        "timeout": Number(1, 10**7, integer=True),
        "concurrency": Number(1, 1000, integer=True),
        "kernels": Items(KERNEL_SCHEMA, max_len=10_000, min_len=1),
    },
    required=("username", "created", "preset", "accelerator", "timeout", "concurrency", "kernels"),
    other=None,
)


def load_state(run: Path) -> dict:
    """What was recorded about the run so far, checked against `STATE_SCHEMA`."""
    path = Path(run) / STATE_FILE
    if not path.is_file():
        raise InputError(f"{run}: no {STATE_FILE} here; start with `./reproduce.sh kaggle run` or `kaggle build`")
    try:
        state = schema.read_json(path, max_bytes=MAX_STATE_BYTES)
    except InputError as exc:
        raise InputError(f"{path}: not a readable {STATE_FILE} ({str(exc)[:200]})") from exc
    for where, problem in STATE_SCHEMA.errors(state, ""):
        raise InputError(
            f"{path}: not a {STATE_FILE} this version wrote: at {where or 'the top level'}, {problem[:200]}"
        )
    return state


def save_state(run: Path, state: dict) -> None:
    """Atomically: a crash leaves the old or the new state, never half of one."""
    write_json_atomic(Path(run) / STATE_FILE, state)
