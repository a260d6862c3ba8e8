"""The exit contract in a hostile environment: closed and broken streams, signals, full disks,
odd `--out` targets, odd files in bundle folders and caches, and a run's environment."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import mounts
import pytest
from bundle_tools import QK, copy_published, npz_array, rewrite_npz
from report_tools import (
    REPO,
    assert_consistent_set,
    assert_one_error_line,
    cli,
    command,
    environment,
    run,
    stray_temporaries,
)
from signals import as_in_a_terminal, held

from attngeom import fetch
from attngeom.errors import InputError

tmpfs = mounts.tmpfs  # the fixture
fill = mounts.fill


def _shell(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`script` in bash with the command line as "$@" (to close descriptors before it runs)."""
    return run(["bash", "-c", script, "bash", *command(*args)], cwd)


# 1. Streams: a closed or broken stream never changes the status.


def test_a_refused_input_with_stdout_closed_is_2(tmp_path):
    proc = _shell(
        'exec >&-; exec "$@"', "--bundles", str(tmp_path / "none"), "--out", str(tmp_path / "o"), cwd=tmp_path
    )
    assert_one_error_line(proc, 2)


def test_a_refused_input_with_stderr_closed_is_2(tmp_path):
    proc = _shell(
        'exec 2>&-; exec "$@"', "--bundles", str(tmp_path / "none"), "--out", str(tmp_path / "o"), cwd=tmp_path
    )
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout)


def test_a_verdict_with_stdout_closed_keeps_its_status(published_root, tmp_path):
    proc = _shell('exec >&-; exec "$@"', "--bundles", str(published_root), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr[-2000:]
    assert_consistent_set(tmp_path / "o")


def _verify_at_work(published_root: Path, out: Path, act) -> tuple[int, str]:
    """Verify into `out`; once it has printed its first line, `act(proc)`; its status and stderr."""
    with subprocess.Popen(
        command("--bundles", str(published_root), "--out", str(out)),
        cwd=out.parent,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, which `frozen` stops
        preexec_fn=as_in_a_terminal,
    ) as proc:
        assert proc.stdout.readline().startswith(b"evidence:")  # at work
        act(proc)
        err = proc.stderr.read().decode()
        return proc.wait(timeout=600), err


def test_a_reader_that_goes_away_leaves_the_verdict(published_root, tmp_path):
    status, err = _verify_at_work(published_root, tmp_path / "o", lambda proc: proc.stdout.close())  # `| head -1`
    assert status == 1 and "error" not in err, err
    assert_consistent_set(tmp_path / "o")


def _on_null(fd: int) -> bool:
    return os.path.samestat(os.fstat(fd), os.stat(os.devnull))


def _open_fds() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


def test_a_descriptor_moved_to_null_leaves_no_other_open():
    """streams._to_null, in this process: an open descriptor (a pipe's end) now writes to /dev/null, a
    closed one is reopened there under its own number, and the descriptor /dev/null came on is closed."""
    from attngeom import streams

    read, write = os.pipe()
    try:
        before = _open_fds()
        streams._to_null(write)
        assert _on_null(write) and _open_fds() == before
        os.write(write, b"gone")
        os.close(write)
        streams._to_null(write)  # closed: /dev/null opens on the lowest free number, this one
        assert _on_null(write) and _open_fds() == before
        assert os.read(read, 16) == b""  # the end: nothing reached the pipe, and no writer holds it
    finally:
        os.close(read)
        os.close(write)


class _Reader:
    """A text stream on a pipe whose reader goes away after `lasting` calls: then each call is a broken pipe."""

    def __init__(self, fd: int, lasting: int, returns=None) -> None:
        self.fd, self.lasting, self.returns, self.calls, self.encoding = fd, lasting, returns, [], "utf-8"

    def fileno(self) -> int:
        return self.fd

    def _call(self, *args):
        self.calls.append(args)
        if not _on_null(self.fd) and len(self.calls) > self.lasting:
            raise BrokenPipeError(32, "Broken pipe")
        return self.returns

    def write(self, text: str):
        return self._call(text)

    def flush(self) -> None:
        self._call()


def test_a_stream_whose_reader_goes_away_writes_on_into_null():
    from attngeom import streams

    read, write = os.pipe()
    try:
        stream = streams.Forgiving(_Reader(write, lasting=1, returns=3))
        assert stream.write("abc") == 3 and not _on_null(write)  # the stream's own count
        assert stream.write("de") == 3 and _on_null(write)  # broken: moved to /dev/null, written again
        assert stream.encoding == "utf-8"  # everything else is the stream's
        stream.flush()
        assert stream._stream.calls == [("abc",), ("de",), ("de",), ()]
        counting = streams.Forgiving(_Reader(write, lasting=5))
        assert counting.write("abcd") == 4  # a stream that counts nothing: the text's length
    finally:
        os.close(read)
        os.close(write)


def test_a_stream_still_broken_on_null_discards_what_was_left():
    from attngeom import streams

    class Broken(_Reader):
        def _call(self, *args):
            self.calls.append(args)
            raise BrokenPipeError(32, "Broken pipe")

    read, write = os.pipe()
    try:
        stream = streams.Forgiving(Broken(write, lasting=0))
        assert stream.write("abc") == 3 and _on_null(write)
        stream.flush()
        assert stream._stream.calls == [("abc",), ("abc",), (), ()]
    finally:
        os.close(read)
        os.close(write)


def test_the_guard_opens_closed_descriptors_on_null_and_wraps_the_output_streams(monkeypatch):
    """streams.guard, in this process, with descriptors 0 and 2 closed: only those go to /dev/null; stdout
    is wrapped (once: a wrapped stream is kept as it is), stdin never; a stream Python started without
    (closed then) is opened on its descriptor, UTF-8 with escapes, never closing the descriptor."""
    import io

    from attngeom import streams

    closed, moved = {0, 2}, []

    def fstat(fd):
        if fd in closed:
            raise OSError(9, "Bad file descriptor")
        return os.stat(os.devnull)

    monkeypatch.setattr(streams.os, "fstat", fstat)
    monkeypatch.setattr(streams, "_to_null", moved.append)
    stdin, stdout, stderr = io.StringIO(), io.StringIO(), io.StringIO()
    for name, stream in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr)):
        monkeypatch.setattr(sys, name, stream)
    streams.guard()
    assert moved == [0, 2] and sys.stdin is stdin
    assert isinstance(sys.stdout, streams.Forgiving) and sys.stdout._stream is stdout
    assert isinstance(sys.stderr, streams.Forgiving) and sys.stderr._stream is stderr
    wrapped = sys.stdout
    streams.guard()
    assert sys.stdout is wrapped and sys.stdout._stream is stdout
    for name in ("stdin", "stdout", "stderr"):
        monkeypatch.setattr(sys, name, None)
    streams.guard()
    opened = {name: getattr(sys, name) for name in ("stdin", "stdout", "stderr")}
    opened = {name: getattr(s, "_stream", s) for name, s in opened.items()}
    assert not isinstance(sys.stdin, streams.Forgiving) and isinstance(sys.stderr, streams.Forgiving)
    assert {name: (s.fileno(), s.mode) for name, s in opened.items()} == {
        "stdin": (0, "r"),
        "stdout": (1, "w"),
        "stderr": (2, "w"),
    }
    for s in opened.values():
        assert (s.encoding, s.errors, s.buffer.raw.closefd) == ("utf-8", "backslashreplace", False)


# 2. No code from the working folder.


def test_a_subprocess_started_as_the_tests_do_ignores_the_working_folder(tmp_path):
    (tmp_path / "random.py").write_text('print("my dice script")\n')
    proc = cli("--help", cwd=tmp_path)
    assert proc.returncode == 0 and "dice" not in proc.stdout + proc.stderr, proc.stderr[-2000:]


def test_the_image_runs_python_without_the_working_folder():
    env = (REPO / "Dockerfile").read_text()
    assert "PYTHONSAFEPATH=1" in env and 'ENTRYPOINT ["/opt/attngeom/reproduce.sh"]' in env


# 5. Disks and names.


def test_verify_on_a_full_disk_is_2_naming_the_folder(published_root, tmp_path, tmpfs):
    disk = tmpfs(tmp_path / "disk", size="256k")
    fill(disk)
    proc = cli("--bundles", str(published_root), "--out", str(disk / "report"), cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert str(disk / "report") in proc.stderr and "No space left" in proc.stderr


def test_a_full_disk_while_writing_a_file_is_2_naming_the_folder(tmp_path, tmpfs, monkeypatch, capsys):
    from attngeom import cli as cli_module
    from attngeom.files import shown, write_atomic

    disk = tmpfs(tmp_path / "disk", size="64k")
    monkeypatch.setattr(cli_module, "_run", lambda argv: write_atomic(disk / "checkpoint.npz", b"\0" * 200_000))
    assert cli_module.main([]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"error: {shown(disk)}: cannot write there (No space left on device); free some space or write elsewhere\n"
    )
    assert sorted(p.name for p in disk.iterdir()) == [], "no temporary file is left behind"


@pytest.mark.slow
def test_a_rerun_whose_disk_fills_up_is_2_naming_the_folder(tmp_path, tmpfs):
    disk = tmpfs(tmp_path / "disk", size="512k")  # the manifest and the log fit, the first checkpoint does not
    run = ("rerun", "--preset", "smoke", "--steps", "4", "--variants", "softmax", "--quiet")
    proc = cli(*run, "--out", str(disk / "run"), cwd=tmp_path)
    assert proc.returncode == 2 and "No space left" in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {disk / 'run' / 'checkpoints'}: cannot write")
    assert "Traceback" not in proc.stderr


def _read_only(tmpfs, folder: Path, files: dict[str, str]) -> Path:
    """A read-only file system at `folder` holding `files` (name -> text)."""
    disk = tmpfs(folder)
    for name, text in files.items():
        (disk / name).parent.mkdir(parents=True, exist_ok=True)
        (disk / name).write_text(text)
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    return disk


def test_bands_and_summary_outputs_on_a_read_only_file_system_are_2_naming_the_file(tmp_path, tmpfs):
    kept = (REPO / "expected" / "measured" / "paper-step1200.json").read_text()
    disk = _read_only(tmpfs, tmp_path / "ro", {"kept.json": kept})
    ensemble = REPO / "expected" / "measured" / "ensemble-step1200.json"
    for args, target in (
        (("bands", str(ensemble), "--write", str(disk / "rerun.json")), disk / "rerun.json"),
        (("summary", str(tmp_path / "no-run"), "--out", str(disk / "kept.json")), None),  # its input is named first
    ):
        proc = cli(*args, cwd=tmp_path)
        assert_one_error_line(proc, 2)
        if target is not None:
            assert proc.stderr.startswith(f"error: {target}: cannot be written (Read-only file system)"), proc.stderr


def test_an_output_in_an_immutable_folder_is_2_naming_the_file(tmp_path, tmpfs):
    folder = tmpfs(tmp_path / "disk") / "kept"
    folder.mkdir()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    try:
        ensemble = REPO / "expected" / "measured" / "ensemble-step1200.json"
        proc = cli("bands", str(ensemble), "--write", str(folder / "rerun.json"), cwd=tmp_path)
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    assert_one_error_line(proc, 2)
    assert proc.stderr.startswith(f"error: {folder / 'rerun.json'}: cannot be written (Operation not permitted)")


@pytest.mark.slow
def test_a_resume_of_a_run_folder_on_a_read_only_file_system_is_2_and_a_file_size_limit_too(tmp_path, tmpfs):
    manifest = {
        "completed": False,
        "config": {"preset": "smoke", "variants": ["softmax"], "seeds": [0], "train": {"steps": 60}},
    }
    disk = _read_only(tmpfs, tmp_path / "ro", {"run/manifest.json": json.dumps(manifest)})
    proc = cli("rerun", "--resume", str(disk / "run"), "--quiet", cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert "Read-only file system" in proc.stderr
    fetch.fetch_corpus()  # in the download cache already: the first write past the limit is the run's
    out = tmp_path / "run"
    cmd = command("rerun", "--preset", "smoke", "--variants", "softmax", "--steps", "4", "--out", str(out), "--quiet")
    proc = run(["bash", "-c", 'ulimit -f 1000; exec "$@"', "bash", *cmd], tmp_path)  # 1000 KiB: no checkpoint fits
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: {out / 'checkpoints'}/softmax_s0.npz: cannot be written (File too large)")
    )


def test_an_out_name_of_255_bytes_is_written(published_root, tmp_path):
    out = tmp_path / ("r" * 255)
    proc = cli("--bundles", str(published_root), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert_consistent_set(out)
    assert not stray_temporaries(tmp_path)


def test_an_out_that_is_a_mount_point_is_refused_before_the_work(published_root, tmp_path, tmpfs):
    disk = tmpfs(tmp_path / "disk")
    proc = cli("--bundles", str(published_root), "--out", str(disk), cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert "mount point" in proc.stderr and proc.stdout == ""


def test_an_out_holding_a_mount_point_is_refused_and_the_disk_keeps_its_files(published_root, tmp_path, tmpfs):
    out = tmp_path / "out"
    assert cli("--bundles", str(published_root), "--out", str(out), cwd=tmp_path).returncode == 1
    disk = tmpfs(out / "sub" / "disk")
    (disk / "precious.txt").write_text("mine")
    proc = cli("--bundles", str(published_root), "--out", str(out), cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert (disk / "precious.txt").read_text() == "mine" and "mount point" in proc.stderr


def test_an_out_that_is_a_symlink_is_written_where_it_points(published_root, tmp_path):
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    (real / "mine.txt").write_text("kept")
    link.symlink_to(real)
    proc = cli("--bundles", str(published_root), "--out", str(link), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert link.is_symlink() and link.resolve() == real
    assert_consistent_set(real)
    assert (real / "mine.txt").read_text() == "kept"
    assert not stray_temporaries(tmp_path)


def test_out_dot_keeps_the_working_folder(published_root, tmp_path):
    here = tmp_path / "here"
    here.mkdir()
    (here / "mine.txt").write_text("kept")
    inode = here.stat().st_ino
    for _ in range(2):  # the second renews a set already there
        proc = cli("--bundles", str(published_root), "--out", ".", cwd=here)
        assert proc.returncode == 1, proc.stderr[-2000:]
    assert here.stat().st_ino == inode and (here / "mine.txt").read_text() == "kept"
    assert_consistent_set(here)
    assert not stray_temporaries(tmp_path)


# 6. Inputs and caches.


def test_a_zero_padded_seed_file_is_refused(published_root, tmp_path):
    root = copy_published(published_root, tmp_path / "b")
    shutil.copyfile(root / QK / "geom_softmax_s0.npz", root / QK / "geom_softmax_s01.npz")
    proc = cli("--bundles", str(root), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert "geom_softmax_s01.npz" in proc.stderr


@pytest.mark.parametrize("recorded", [True, False], ids=["schedule", "no-schedule"])
def test_a_step_key_beyond_the_schedule_is_refused(recorded, published_root, tmp_path):
    root = copy_published(published_root, tmp_path / "b")
    if not recorded:  # then the bound is the largest step any file may name
        run_json = root / QK / "yat_attention.json"
        doc = json.loads(run_json.read_text())
        doc["cfg"].pop("STEPS", None)
        run_json.write_text(json.dumps(doc))
    path = root / QK / "attn_softmax_s0.npz"
    rewrite_npz(path, **{"step" + "9" * 30: npz_array(path, "step0")})
    proc = cli("--bundles", str(root), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert_one_error_line(proc, 2)
    assert "beyond the schedule" in proc.stderr


@pytest.fixture
def private_cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNGEOM_CACHE", str(cache))
    return cache


def _refused_by_the_cache(where: Path, cause: str) -> None:
    with pytest.raises(InputError) as caught:
        fetch.fetch(fetch.CORPUS_URL)
    text = str(caught.value)
    assert str(where) in text and cause in text and "download failed" not in text, text


def test_a_cache_entry_record_that_is_a_folder_is_named(private_cache):
    entry = private_cache / fetch.url_path(fetch.CORPUS_URL)
    (entry.parent / (entry.name + fetch.SIDECAR)).mkdir(parents=True)
    _refused_by_the_cache(private_cache, "(is a folder, not a file to write")


def test_a_cache_that_is_a_file_is_named(private_cache):
    private_cache.write_text("not a folder")
    _refused_by_the_cache(private_cache, "Not a directory")


def test_a_read_only_cache_is_named(private_cache, tmpfs):
    tmpfs(private_cache, read_only=True)
    _refused_by_the_cache(private_cache, "Read-only file system")


def test_a_full_cache_is_named(private_cache, tmpfs):
    fill(tmpfs(private_cache, size="256k"))
    _refused_by_the_cache(private_cache, "No space left")


# 7. The environment of the run: checked before the run folder is claimed.


@pytest.mark.parametrize(
    "setting, shown",
    [({"XLA_FLAGS": "--xla_no_such_flag"}, "Unknown flag in XLA_FLAGS"), ({"JAX_PLATFORMS": "cuda"}, "cuda")],
    ids=["xla-flags", "jax-platforms"],
)
def test_a_run_environment_that_cannot_start_leaves_no_folder(setting, shown, tmp_path):
    pytest.importorskip("jax")
    if "JAX_PLATFORMS" in setting and shutil.which("nvidia-smi"):
        pytest.skip("this machine may have a GPU")
    out = tmp_path / "run"
    proc = cli("rerun", "--preset", "smoke", "--out", str(out), "--quiet", cwd=tmp_path, **setting)
    assert_one_error_line(proc, 2)
    assert shown in proc.stderr and not out.exists()


@pytest.mark.parametrize("limit_kib", [1_000_000, 2_000_000])
def test_a_rerun_under_too_small_an_address_space_is_one_out_of_memory_line_and_no_folder(limit_kib, tmp_path):
    """Under `ulimit -v 1000000` XLA's compiler aborts (134, no line); under 2000000 the first loss is NaN."""
    out = tmp_path / "run"
    cmd = command("rerun", "--preset", "smoke", "--variants", "softmax", "--steps", "4", "--out", str(out))
    proc = run(["bash", "-c", f'ulimit -v {limit_kib}; exec "$@"', "bash", *cmd], tmp_path)
    assert_one_error_line(proc, 2, starts="error: out of memory: this process may map ")
    assert "(ulimit -v)" in proc.stderr and not out.exists()


def test_a_device_that_cannot_start_for_want_of_memory_says_so(monkeypatch):
    """The probe's child under an address space too small for jax's backend (the parent's limit is not lowered)."""
    pytest.importorskip("jax")
    import resource

    from attngeom.training import device_probe

    real = subprocess.run

    def limited(*args, **kwargs):
        small = 200 << 20  # jaxlib's libraries cannot all be mapped
        return real(*args, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (small, small)), **kwargs)

    monkeypatch.setattr(device_probe.subprocess, "run", limited)
    with pytest.raises(
        InputError,
        match=r"^out of memory: the device cannot start( \(.*\))?: .*(failed to map segment|pthread_create|allocate)",
    ):
        device_probe.check_device()


# 8. SIGTERM and SIGHUP end like Ctrl-C, with their own statuses.


def _signalled_at_work(published_root: Path, out: Path, sig: int, tries: int = 5) -> tuple[int, str]:
    """`sig` sent to a verify at work (it has printed its first line), frozen first so that the signal reaches
    it alive; a verify that ended before it was frozen (a loaded machine can starve the test that long) does
    not count, and another try starts. Its status and stderr."""
    live: list[bool] = []

    def act(proc):
        with held(proc.pid) as alive:
            live.append(alive)
            if alive:
                proc.send_signal(sig)

    for _ in range(tries):
        status, err = _verify_at_work(published_root, out, act)
        if live[-1]:
            return status, err
    raise AssertionError(f"verify ended before the signal {tries} times in a row")


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["SIGTERM", "SIGHUP"])
def test_a_terminating_signal_is_one_line_and_its_status(sig, status, published_root, tmp_path):
    out = tmp_path / "o"
    assert cli("--bundles", str(published_root), "--out", str(out), cwd=tmp_path).returncode == 1
    assert _signalled_at_work(published_root, out, sig) == (status, f"interrupted ({sig.name})\n")
    assert_consistent_set(out)
    assert not stray_temporaries(tmp_path)


def _python(script: str, cwd: Path) -> subprocess.CompletedProcess:
    """`script` run by Python as a command started from a terminal."""
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=as_in_a_terminal,
    )


_WAITS_FOR_A_POOL = """
import signal, sys, threading, time
from attngeom.cli import entry

def work():
    poke = lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # taken by this thread
    threading.Thread(target=lambda: (time.sleep(0.5), poke())).start()
    try:
        threading.Event().wait()  # the main thread asleep, as it is waiting on a pool's result
    finally:
        print("cleaned up", flush=True)
    return 0

entry(work)
"""


def test_a_signal_taken_by_another_thread_unwinds_the_main_one(tmp_path):
    """Case: a Ctrl-C that reached a stopped `figures` was taken, once it went on, by one of the pool's threads;
    the main thread slept on in its wait until the grace period ended the process with its report's
    temporary folder left behind."""
    proc = _python(_WAITS_FOR_A_POOL, tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "cleaned up\n", "interrupted\n")


_TEARS_DOWN_XLA = """
import jax, jax.numpy as jnp
from jax._src import api
from attngeom.cli import entry

api.clear_backends = lambda **kw: print("backends torn down", flush=True)  # what jax's exit handler calls
entry(lambda: int(jnp.ones(3).sum()) - 3)
"""


def test_the_exit_leaves_jax_backends_alone(tmp_path):
    """Case: a smoke rerun interrupted during training printed its line, then ended by SIGSEGV: jax's exit
    handler tore down the backends while one of its threads was still at work."""
    proc = _python(_TEARS_DOWN_XLA, tmp_path)
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr[-2000:]


def test_the_kaggle_kernel_starts_its_pythons_without_the_working_folder(monkeypatch, tmp_path):
    from attngeom.backends import kernel_main

    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)  # restored afterwards, as main sets it
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(kernel_main.tempfile, "mkdtemp", lambda prefix: str(tmp_path / "scratch"))
    monkeypatch.setattr(kernel_main, "unpack", lambda source, sha, repo: None)
    monkeypatch.setattr(kernel_main, "interpreter", lambda scratch, repo: sys.executable)
    started = []

    def training(cmd, **kwargs):  # the rerun, as the kernel starts it: here it fails at once
        started.append(kwargs["env"])
        return subprocess.CompletedProcess(cmd, 2)

    monkeypatch.setattr(kernel_main.subprocess, "run", training)
    settings = {"PRESET": "smoke", "OUTPUT_DIR": "out", "VARIANTS": "softmax", "SEED": "0", "BUNDLE": "b"}
    with pytest.raises(SystemExit, match="failed"):
        kernel_main.main({**settings, "SOURCE_SHA256": "0" * 64, "RUN_ID": "r"}, "")
    assert [env.get("PYTHONSAFEPATH") for env in started] == ["1"]
    assert os.environ["PYTHONSAFEPATH"] == "1"  # and so every Python those start
