"""Kernel definitions and the built kernel script: metadata the client accepts, a script that trains."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from helpers import REPO

from attngeom.backends.kaggle_client import connect
from attngeom.backends.kaggle_kernel import (
    CODE_FILE,
    GPU_LOCK,
    KAGGLE_DIR,
    METADATA_FILE,
    OUTPUT_DIR,
    build_kernel,
    definitions,
    kernel_metadata,
    source_archive,
)
from attngeom.base.errors import InputError
from attngeom.base.variants import PUBLISHED
from attngeom.bundles.layout import load_models
from attngeom.training.local_run import BUNDLES
from attngeom.training.runs import require_complete

MIRROR = Path(os.environ.get("ATTNGEOM_MIRROR") or REPO.parent / "shared" / "mirror").resolve()  # from the start


@pytest.fixture(scope="module")
def archive() -> bytes:
    return source_archive()


def test_one_definition_per_original_bundle():
    defs = definitions()
    assert set(defs) == {"attngeom-qk", "attngeom-goat"}
    # the variants each kernel trains: the variants table's published ones of its bundle, in table order
    assert {name: d.variants for name, d in defs.items()} == {
        name: tuple(v for v in PUBLISHED if v in BUNDLES[name]) for name in defs
    }
    assert sorted(v for d in defs.values() for v in d.variants) == sorted(PUBLISHED)
    assert all(set(d.variants) <= set(BUNDLES[name]) for name, d in defs.items())  # where rerun writes them
    for d in defs.values():
        meta = kernel_metadata(d, "reviewer", 2)
        assert meta["id"] == f"reviewer/{d.name}-s2" and meta["title"] == f"{d.name}-s2"
        assert (meta["language"], meta["kernel_type"], meta["code_file"]) == ("python", "script", CODE_FILE)
        assert meta["enable_gpu"] is True and meta["enable_internet"] is True and meta["is_private"] is True


def test_the_definitions_name_no_variants_of_their_own():
    """The variants table is the one list of what each bundle's kernel trains: no file beside it."""
    for folder in KAGGLE_DIR.iterdir():
        if folder.is_dir():
            assert sorted(p.name for p in folder.iterdir()) == ["README.md", METADATA_FILE], folder.name


def test_bad_username_is_refused():
    with pytest.raises(InputError, match="not a Kaggle user name"):
        kernel_metadata(definitions()["attngeom-qk"], "a/b", 0)


def test_metadata_passes_the_clients_own_checks(fake_kaggle, archive, monkeypatch, tmp_path):
    """Push a built kernel with the real client: it checks id, slug, title, code file, language, type."""
    fake = fake_kaggle
    api = connect()
    for name, defn in definitions().items():
        folder = build_kernel(defn, fake.username, 0, tmp_path / name, "paper", archive)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            reply = api.kernels_push(str(folder))
        assert not reply.error and "does not resolve to the specified id" not in printed.getvalue()
        sent = fake.kernels[f"{fake.username}/{name}-s0"].pushes[0]
        assert sent["slug"] == f"{fake.username}/{name}-s0" and sent["newTitle"] == f"{name}-s0"
        assert (sent["language"], sent["kernelType"]) == ("python", "script")
        assert sent["text"] == (folder / CODE_FILE).read_text()
    # The same checks do reject a broken definition, so passing them means something.
    meta = json.loads((folder / METADATA_FILE).read_text())
    (folder / METADATA_FILE).write_text(json.dumps({**meta, "kernel_type": "notebook-ish"}))
    with pytest.raises(ValueError, match="valid kernel type"):
        api.kernels_push(str(folder))


def test_source_archive_is_reproducible_and_carries_the_package_and_lock():
    archive = source_archive()
    assert source_archive() == archive  # byte for byte: same checkout, same kernel script
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        names = set(tar.getnames())
        lock = tar.extractfile("requirements.lock").read()
    assert {"src/attngeom/backends/kernel_main.py", "src/attngeom/training/train.py", "src/attngeom/cli.py"} <= names
    assert "src/attngeom/backends/kaggle_kernel.py" in names
    assert not any("__pycache__" in n for n in names)
    assert lock == GPU_LOCK.read_bytes() and b"jax-cuda12-plugin==" in lock and b"--hash=sha256:" in lock


def _kaggle_layout(tmp_path: Path) -> Path:
    for sub in ("input", "working", "temp"):
        (tmp_path / "kaggle" / sub).mkdir(parents=True)
    return tmp_path / "kaggle" / "working"


def test_script_refuses_a_corrupt_payload(archive, tmp_path):
    folder = build_kernel(definitions()["attngeom-goat"], "reviewer", 0, tmp_path / "k", "smoke", archive)
    script = folder / CODE_FILE
    text = script.read_text()
    at = text.index('    "', text.index("SOURCE = (")) + 10
    script.write_text(text[:at] + ("A" if text[at] != "A" else "B") + text[at + 1 :])
    done = subprocess.run([sys.executable, str(script)], cwd=_kaggle_layout(tmp_path), capture_output=True, text=True)
    assert done.returncode != 0 and "corrupt" in done.stderr


@pytest.mark.slow
def test_built_script_trains_in_a_kaggle_working_dir(archive, tmp_path):
    """The kernel script, run as Kaggle would (smoke preset), leaves a valid bundle and manifest."""
    folder = build_kernel(definitions()["attngeom-qk"], "reviewer", 0, tmp_path / "k", "smoke", archive)
    working = _kaggle_layout(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ATTNGEOM_KERNEL_PYTHON"] = sys.executable  # this checkout's environment already has the lock
    (working.parent / "input" / "mirror").symlink_to(MIRROR)  # as a dataset attached to the kernel
    env["ATTNGEOM_MIRROR"] = "../input/mirror"  # relative, as the README writes it
    done = subprocess.run(
        [sys.executable, str(folder / CODE_FILE)], cwd=working, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = working / OUTPUT_DIR
    assert require_complete(out)["completed"]
    models = load_models(out, ("softmax", "yat_b"))
    assert models["yat_b"].q_LHTD.shape == models["softmax"].k_LHTD.shape
    assert sorted(p.name for p in working.iterdir()) == [OUTPUT_DIR]  # nothing else lands in the output
