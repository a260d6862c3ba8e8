"""The kernel's program as a module: its lock reading and manifest stamp, and the script built from it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from attngeom.backends import kernel_main
from attngeom.backends.kaggle_kernel import definitions, kernel_script

REPO = Path(__file__).resolve().parents[1]


def test_lock_entry_is_the_pin_and_its_hashes_only(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text(
        "tqdm==4.67.1 \\\n    --hash=sha256:aa\n    # via -r requirements.in\n"
        "uv==0.13.9 \\\n    --hash=sha256:bb \\\n    --hash=sha256:cc\n    # via -r requirements.in\n"
        "wheel==0.45.1 \\\n    --hash=sha256:dd\n"
    )
    assert kernel_main.lock_entry(lock, "uv") == "uv==0.13.9 \\\n    --hash=sha256:bb \\\n    --hash=sha256:cc\n"
    with pytest.raises(SystemExit, match="numpy is not pinned"):
        kernel_main.lock_entry(lock, "numpy")


def test_both_locks_pin_uv_with_hashes():
    for name in ("requirements.lock", "requirements-cuda.lock"):
        entry = kernel_main.lock_entry(REPO / name, "uv")
        assert entry.startswith("uv==") and entry.count("--hash=sha256:") >= 10  # one per platform's wheel


def test_stamp_adds_the_run_and_keeps_the_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"completed": True, "files": {"a": "00"}}))
    kernel_main.stamp_manifest(tmp_path, {"RUN_ID": "r-1", "BUNDLE": "attngeom-goat", "SEED": "3"})
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest == {
        "completed": True,
        "files": {"a": "00"},
        "kaggle": {"run_id": "r-1", "bundle": "attngeom-goat", "seed": 3},
    }
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_script_is_the_module_then_settings_payload_and_call():
    script = kernel_script(definitions()["attngeom-goat"], 1, "smoke", b"payload", run_id="r-9")
    module = Path(kernel_main.__file__).read_text()
    assert script.startswith(module.rstrip())
    tree = ast.parse(script)  # valid Python on its own
    assigned = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign) for t in node.targets}
    settings = ast.literal_eval(assigned["SETTINGS"])
    assert settings["RUN_ID"] == "r-9" and settings["SEED"] == "1" and settings["PRESET"] == "smoke"
    assert settings["VARIANTS"] == "goat_v" and settings["BUNDLE"] == "attngeom-goat"
    imports = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    imports |= {n.module.split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert "attngeom" not in imports and imports <= {"__future__", *__import__("sys").stdlib_module_names}


def test_unsupported_python_is_refused(monkeypatch):
    monkeypatch.setattr(kernel_main.sys, "version_info", (3, 10, 14))
    with pytest.raises(SystemExit, match="3.11 to 3.13"):
        kernel_main.main({}, "")
