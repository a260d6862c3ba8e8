import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from attngeom import files


def test_sha256_file_is_hashlib_of_the_bytes(tmp_path: Path):
    path = tmp_path / "f.bin"
    data = os.urandom(3 << 20)  # several read blocks
    path.write_bytes(data)
    assert files.sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_atomic_file_replaces_only_on_success(tmp_path: Path):
    path = tmp_path / "sub" / "out.txt"
    files.write_atomic(path, "old")
    with pytest.raises(RuntimeError), files.atomic_file(path) as f:
        f.write(b"half")
        raise RuntimeError("crash while writing")
    assert path.read_text() == "old"
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.txt"], "no temporary file is left behind"
    files.write_atomic(path, b"new")
    assert path.read_bytes() == b"new"


def test_write_json_atomic_accepts_numpy_scalars_and_keeps_unicode(tmp_path: Path):
    path = tmp_path / "doc.json"
    files.write_json_atomic(path, {"n": np.int64(3), "x": np.float32(0.5), "s": "ε"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"n": 3, "x": 0.5, "s": "ε"}
    assert "ε" in path.read_text(encoding="utf-8")
    with pytest.raises(TypeError):
        files.write_json_atomic(path, {"a": object()})


def test_repo_and_versions():
    assert (files.REPO / "src" / "attngeom" / "files.py").is_file()
    found = files.versions()
    assert {"attngeom", "python", "numpy"} <= set(found)
    commit = files.git_commit()
    assert commit is None or len(commit) == 40
