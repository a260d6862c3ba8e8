"""bench/gpu_carry.py, which fills carry/ for a GPU machine without network: refused with one line when the
mirror lacks what the check reads (it filled for real in tests/process/test_gpu_check.py)."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO


def test_a_mirror_without_the_files_the_check_reads_is_one_error_line(tmp_path):
    (tmp_path / "mirror").mkdir()
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_carry.py"), "--mirror", str(tmp_path / "mirror")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1
    assert "not in the mirror" in done.stderr and "Traceback" not in done.stderr
