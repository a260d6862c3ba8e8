"""A benchmark's figures as a file (`--json FILE`): the figures with where, when and how they were measured.

The docs quote benchmark figures from these files only, each beside the machine, the date and the
command that measured it, so that no figure is copied by hand and none outlives its measurement.
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import sys
from pathlib import Path

from attngeom.base.files import git_commit, machine, versions, write_json_atomic


def command(argv: list[str]) -> str:
    """The command as a reader types it: `./reproduce.sh bench NAME ...` (`python bench/NAME.py` for
    the scripts reproduce.sh does not name), without the `--json` file."""
    name = Path(argv[0]).stem
    words, skip = [], False
    for w in argv[1:]:
        if skip:
            skip = False
        elif w == "--json":
            skip = True
        elif not w.startswith("--json="):
            words.append(w)
    head = (
        ["./reproduce.sh", "bench", name.removeprefix("bench_")]
        if name.startswith("bench_")
        else ["python", f"bench/{name}.py"]
    )
    return shlex.join([*head, *words])


def write_figures(path: Path, figures: dict) -> None:
    """Write `figures` to `path` with the measurement's provenance under `measured`."""
    wanted = ("python", "jax", "jaxlib", "numpy", "scipy")
    doc = {
        "measured": {
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"),
            "machine": machine(),
            "command": command(sys.argv),
            "git_commit": git_commit(),
            "versions": {k: v for k, v in versions().items() if k in wanted},
            "load_average": [round(x, 2) for x in os.getloadavg()],  # 1, 5, 15 min as it ended: how idle the cores were
        },
        **figures,
    }
    write_json_atomic(path, doc)
