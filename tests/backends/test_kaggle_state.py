"""kaggle-state.json is read only after its schema accepts it: any other shape is one error line, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from attngeom.backends.kaggle_state import STATE_FILE, load_state, save_state
from attngeom.base.errors import InputError

KERNEL = {
    "bundle": "attngeom-goat",
    "seed": 0,
    "id": "reviewer/attngeom-goat-s0",
    "variants": ["goat_v"],
    "folder": "kernels/attngeom-goat-s0",
    "state": "PUSHED",
    "pushed": 1.0,
    "version": 3,
    "url": "https://www.kaggle.com/code/reviewer/attngeom-goat-s0",
}
GOOD = {
    "username": "reviewer",
    "created": "2026-01-01T00:00:00+00:00",
    "run_id": "0123456789abcdef0123456789abcdef",
    "preset": "paper",
    "accelerator": "NvidiaTeslaT4",
    "timeout": 21600,
    "concurrency": 2,
    "kernels": [KERNEL],
}
BAD = {
    "a list": [],
    "an empty object": {},
    "a kernel without its id": {**GOOD, "kernels": [{k: v for k, v in KERNEL.items() if k != "id"}]},
    "no kernels": {**GOOD, "kernels": []},
    "kernels not a list": {**GOOD, "kernels": {"id": "x"}},
    "a seed as text": {**GOOD, "kernels": [{**KERNEL, "seed": "0"}]},
    "a folder out of the run": {**GOOD, "kernels": [{**KERNEL, "folder": "../../etc"}]},
    "an unknown preset": {**GOOD, "preset": "huge"},
}


def write(run: Path, text: str) -> Path:
    run.mkdir(exist_ok=True)
    (run / STATE_FILE).write_text(text)
    return run


def test_a_state_this_version_writes_is_accepted(tmp_path):
    save_state(tmp_path, GOOD)
    assert load_state(tmp_path) == GOOD
    old = {k: v for k, v in GOOD.items() if k != "run_id"}  # runs started before kernels were stamped
    save_state(tmp_path, old)
    assert load_state(tmp_path) == old


@pytest.mark.parametrize("case", sorted(BAD))
def test_valid_json_of_the_wrong_shape_is_one_error(tmp_path, case):
    run = write(tmp_path / "r", json.dumps(BAD[case]))
    with pytest.raises(InputError, match=f"{STATE_FILE}: not a {STATE_FILE} this version wrote: at ") as info:
        load_state(run)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000 + "]" * 200_000,
        '{"a":' * 100_000 + "1" + "}" * 100_000,
        "{",
        "",
        json.dumps({**GOOD, "timeout": 10**400}),  # refused before Python builds the integer
    ],
)
def test_deep_nesting_and_broken_json_are_one_error(tmp_path, text):
    with pytest.raises(InputError, match=f"not a readable {STATE_FILE}"):
        load_state(write(tmp_path / "r", text))


def test_the_command_exits_2_with_one_line(tmp_path):
    cases = (("status", []), ("pull", {}), ("status", {**GOOD, "kernels": [{"state": "BUILT"}]}))
    for i, (action, doc) in enumerate(cases):
        run = write(tmp_path / f"r{i}", json.dumps(doc))
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"), KAGGLE_USERNAME="u", KAGGLE_KEY="k")
        done = subprocess.run(
            [sys.executable, "-m", "attngeom", "kaggle", action, "--run", str(run)],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and done.stderr.startswith("error: ") and "this version wrote" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
