"""The exit contract of every command, through the command line: 0 pass, 1 a claim fails, 2 unusable
input, 3 internal error, 130 Ctrl-C; and the report folder always holds one run's set."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from helpers.bundles import QK, copy_published
from helpers.reports import assert_consistent_set, assert_one_error_line, cli, command, environment, stray_temporaries


@pytest.fixture(scope="module")
def earlier(published_root, tmp_path_factory) -> tuple[Path, Path, dict[str, bytes]]:
    """A report folder holding a full verification, and its files' bytes."""
    tmp = tmp_path_factory.mktemp("earlier")
    out = tmp / "out"
    assert cli("--bundles", str(published_root), "--out", str(out), cwd=tmp).returncode == 1
    return tmp, out, {p.name: p.read_bytes() for p in out.iterdir()}


def _fresh_copy(earlier, tmp_path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(earlier[1], out)
    return out


def _python(code: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=environment(**extra),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_an_internal_error_is_status_3_with_its_traceback_in_a_log(published_root, tmp_path):
    proc = _python(
        f"""
        from attngeom.jobs import verify
        def broken(*args, **kwargs):
            return {{}}["no such key"]
        verify.run_verify = broken
        from attngeom.cli import main
        raise SystemExit(main(["--bundles", {str(published_root)!r}, "--out", "out"]))
        """,
        tmp_path,
        ATTNGEOM_CACHE=str(tmp_path / "cache"),
    )
    assert_one_error_line(proc, 3, "error: internal error: KeyError: 'no such key' (traceback in ")
    log = Path(proc.stderr.split("(traceback in ")[1].rstrip().rstrip(")"))
    assert log.parent == tmp_path / "cache" / "logs" and "Traceback" in log.read_text()
    assert "broken" in log.read_text()


def test_a_crash_while_writing_the_report_keeps_the_earlier_set(earlier, published_root, tmp_path):
    """Case: the old code replaced results.json, then died before REPORT.md, report.json and index.html."""
    out = _fresh_copy(earlier, tmp_path)
    proc = _python(
        f"""
        from attngeom.report import page as html_report
        def broken(*args, **kwargs):
            raise RuntimeError("the page could not be drawn")
        html_report.write_html = broken
        from attngeom.cli import main
        raise SystemExit(main(["--bundles", {str(published_root)!r}, "--variants", "softmax,yat_b", "--out", "out"]))
        """,
        tmp_path,
        ATTNGEOM_CACHE=str(tmp_path / "cache"),
    )
    assert_one_error_line(proc, 3, "error: internal error: RuntimeError: the page could not be drawn")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == earlier[2]
    assert not stray_temporaries(tmp_path)


@pytest.mark.parametrize(
    "args",
    [
        ("--tier", "bogus"),
        ("--variants", "softmax,nope"),
        ("rerun", "--preset", "huge"),
        ("figures", "--bogus"),
        ("kaggle", "status", "--bogus"),
    ],
    ids=["verify tier", "verify variants", "rerun preset", "figures option", "kaggle option"],
)
def test_a_bad_command_line_is_one_line_without_usage(args, tmp_path):
    proc = cli(*args, cwd=tmp_path)
    assert_one_error_line(proc, 2, "error: reproduce.sh")
    assert "usage:" not in proc.stderr


def _unwritable(kind: str, tmp_path: Path) -> str:
    if kind == "an existing file":
        (tmp_path / "file").write_text("keep me")
        return str(tmp_path / "file")
    if kind == "a path under a file":
        (tmp_path / "file").write_text("keep me")
        return str(tmp_path / "file" / "out")
    if kind == "a path under /proc":
        return "/proc/attngeom/out"
    folder = tmp_path / "frozen"
    folder.mkdir()
    (folder / "REPORT.md").write_text("old")
    if kind == "an immutable folder":
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)], check=False).returncode != 0:
            pytest.skip("chattr +i is not available here")
        return str(folder)
    if os.geteuid() == 0:
        pytest.skip("permissions do not bind root")
    folder.chmod(0o555)
    tmp_path.chmod(0o555)
    return str(folder / "out")


@pytest.mark.parametrize(
    "kind",
    ["an existing file", "a path under a file", "a path under /proc", "an immutable folder", "a read-only folder"],
)
@pytest.mark.parametrize("subcommand", ["verify", "figures"])
def test_an_unwritable_out_is_one_line(kind, subcommand, published_root, tmp_path):
    out = _unwritable(kind, tmp_path)
    try:
        args = ("--variants", "softmax,yat_b") if subcommand == "verify" else ()
        proc = cli(subcommand, "--bundles", str(published_root / QK), *args, "--out", out, cwd=tmp_path)
    finally:
        if kind == "an immutable folder":
            subprocess.run(["chattr", "-i", out], check=False)
        tmp_path.chmod(0o755)
    assert_one_error_line(proc, 2, "error: ")
    assert "cannot write the report there" in proc.stderr
    if kind in ("an existing file", "a path under a file"):
        assert (tmp_path / "file").read_text() == "keep me"
    assert not stray_temporaries(tmp_path)


@pytest.mark.parametrize("where", ["--out", "--bundles"])
def test_a_path_that_is_not_utf8_gives_one_consistent_set(where, earlier, published_root, tmp_path):
    """Case: a byte that is not UTF-8 in a path left new results beside the old report and a temporary file."""
    out = _fresh_copy(earlier, tmp_path)
    bundles = str(published_root / QK).encode()
    if where == "--bundles":
        bundles = os.fsencode(tmp_path) + b"/bundles-\xff"
        shutil.copytree(published_root / QK, os.fsdecode(bundles))
    else:
        out = Path(os.fsdecode(os.fsencode(out) + b"-\xff"))
    proc = subprocess.run(
        command("--bundles", bundles, "--variants", "softmax,yat_b", "--out", os.fsencode(out)),
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr.decode(errors="replace")
    assert not proc.stderr and (where == "--bundles" or b"-\\xff/REPORT.md" in proc.stdout)
    report = assert_consistent_set(out)
    assert "\\xff" in (report["bundles"] if where == "--bundles" else report["provenance"]["command"])
    assert not stray_temporaries(tmp_path)


def test_two_verifies_into_one_folder_both_leave_a_consistent_set(published_root, tmp_path):
    """Case: a shared temporary name killed one of them; in others report.json named one bundle, results.json held the other's."""
    out = tmp_path / "out"
    for _ in range(2):
        procs = [
            subprocess.Popen(
                command("--bundles", str(published_root), "--out", str(out)),
                cwd=tmp_path,
                env=environment(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
            subprocess.Popen(
                command("--bundles", str(published_root / QK), "--variants", "softmax,yat_b", "--out", str(out)),
                cwd=tmp_path,
                env=environment(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
        ]
        for proc, status in zip(procs, (1, 1)):
            _, err = proc.communicate(timeout=600)
            assert proc.returncode == status and not err, err
        assert_consistent_set(out)
    assert not stray_temporaries(tmp_path)


def test_figures_of_a_two_layer_bundle_write_nothing(published_root, tmp_path):
    """Case: five GIFs were written, then an IndexError at the census head, and no figures.json."""
    root = copy_published(published_root, tmp_path / "b")
    from helpers.bundles import hostile

    hostile(root, "2 layers")
    proc = cli("figures", "--bundles", str(root), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert_one_error_line(proc, 2, "error: ")
    assert "census head is layer 4" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_verify_of_a_two_layer_bundle_is_one_line(published_root, tmp_path):
    root = copy_published(published_root, tmp_path / "b")
    from helpers.bundles import hostile

    hostile(root, "2 layers")
    proc = cli("--bundles", str(root), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert_one_error_line(proc, 2, "error: ")
    assert not (tmp_path / "out").exists()


def test_hostile_run_json_through_the_command_line(published_root, tmp_path):
    """Case: 1e400, a string STEPS, deep nesting, a 5,000-digit integer: tracebacks with exit 1."""
    from helpers.bundles import hostile

    for how in ("best_val 1e400", "STEPS a string", "nested 200,000 deep", "a 5,000-digit integer"):
        root = copy_published(published_root, tmp_path / how)
        hostile(root, how)
        proc = cli("--bundles", str(root), "--out", str(tmp_path / "out"), cwd=tmp_path)
        assert_one_error_line(proc, 2, "error: ")
        assert "yat_attention.json" in proc.stderr


def test_two_verifies_in_the_worst_interleaving_leave_the_last_set(published_root, tmp_path, monkeypatch):
    """Case 6 made deterministic: one verify stops just before its page while another writes a whole report."""
    from attngeom.jobs import verify
    from attngeom.report import page

    real, paused, other_done = page.write_html, threading.Event(), threading.Event()

    def write_html(out_dir, report, results, figures):
        if report["bundles"] == str(published_root):
            paused.set()
            assert other_done.wait(600)
        return real(out_dir, report, results, figures)

    monkeypatch.setattr(page, "write_html", write_html)
    out = tmp_path / "out"
    first = threading.Thread(target=verify.run_verify, args=(published_root, out))
    first.start()
    assert paused.wait(600)
    verify.run_verify(published_root / QK, out, variants=("softmax", "yat_b"))
    other_done.set()
    first.join(600)
    assert assert_consistent_set(out)["bundles"] == str(published_root)
    assert not stray_temporaries(tmp_path)
