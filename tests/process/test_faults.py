"""Faults at random moments and malformed files: the previous report set or run folder survives intact,
every ending keeps the exit contract, and every reader answers bad bytes with InputError alone.

The signals land at moments drawn with a fixed seed, a bounded number of times; the fuzzing draws a
bounded number of examples. `pytest -m faults` runs this module (a few minutes on 2 cores).
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
import subprocess
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers.bundles import QK
from helpers.reports import assert_consistent_set, command, environment, stray_temporaries
from helpers.signals import held, in_a_terminal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from attngeom.base import json_rules
from attngeom.base.errors import InputError
from attngeom.bundles import arrays, layout
from attngeom.cli import GRACE_S
from attngeom.judgement import expected
from attngeom.report import figures_toy

RNG = random.Random(20261130)
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def _until_python_catches_sigint(pid: int, limit_s: float = 60.0) -> None:
    """Wait until the interpreter has installed its SIGINT handler (bit 2 of SigCgt in /proc): a
    signal before that moment ends any program, Python or not, before it runs a line of its own."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return  # it has ended
        caught = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
        if caught & (1 << (signal.SIGINT - 1)):
            return
        time.sleep(0.01)


def signalled(args: list, cwd: Path, delay: float, sig: int, **extra: str) -> tuple[int | None, str, float]:
    """Run the command (`extra`: more environment) and send `sig` to its process group after `delay` s, as a
    terminal's Ctrl-C does.

    Returns the exit status (None: it ended before the signal reached it, or the signal caught it in its
    interpreter's exit, its work done, where no handler runs: its own status and no line), stderr, and
    the seconds from the signal to the end.
    """
    proc = subprocess.Popen(
        in_a_terminal(command(*args)),
        cwd=cwd,
        env=environment(**extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    _until_python_catches_sigint(proc.pid)
    try:
        proc.wait(timeout=delay)
        return None, proc.stderr.read(), 0.0
    except subprocess.TimeoutExpired:
        pass
    with held(proc.pid) as live:
        if live:
            os.killpg(proc.pid, sig)
    sent = time.monotonic()
    _, err = proc.communicate(timeout=120)
    exiting = sig != signal.SIGKILL and proc.returncode in (0, 1) and "interrupted" not in err
    return (proc.returncode if live and not exiting else None), err, time.monotonic() - sent


def _earlier(delay: float) -> float:
    """The delay of the next try after a command ended before its signal: half, down to 0.5 s, by when every
    command here is still starting; so every try ends with a signal that reached a live process."""
    assert delay > 0.5, "the command ended within 0.5 s, before a signal could test it"
    return max(0.5, delay / 2)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def before(published_root, tmp_path_factory) -> tuple[Path, dict[str, bytes], float]:
    """A report folder of a full verification with its figures, its bytes, and how long a verify of two models takes."""
    tmp = tmp_path_factory.mktemp("before")
    out = tmp / "out"
    env = environment()
    for args in (["--out", str(out)], ["figures", "--out", str(out)]):
        proc = subprocess.run(
            command(*args, "--bundles", str(published_root)), cwd=tmp, env=env, capture_output=True, check=False
        )
        assert proc.returncode in (0, 1), proc.stderr
    started = time.monotonic()
    other = tmp / "other"
    proc = subprocess.run(
        command("--bundles", str(published_root / QK), "--variants", "softmax,yat_b", "--out", str(other)),
        cwd=tmp,
        env=env,
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    return out, snapshot(out), time.monotonic() - started


def _fresh(before, tmp_path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(before[0], out)
    return out


@pytest.mark.faults
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_signals_during_verify_leave_the_old_set_or_the_new_one(sig, before, published_root, tmp_path):
    args = ["--bundles", str(published_root / QK), "--variants", "softmax,yat_b"]
    outcomes = []
    for i in range(5):
        delay, status = RNG.uniform(0.5, before[2] * 1.1), None
        while status is None:  # a try counts once its signal reached a live process
            out = _fresh(before, tmp_path / f"{i}-{delay:.3f}")
            status, err, took = signalled([*args, "--out", str(out)], tmp_path, delay, sig)
            report = assert_consistent_set(out)
            old = snapshot(out) == before[1]
            assert old or report["bundles"] == str(published_root / QK)
            outcomes.append((round(delay, 2), status, old))
            delay = _earlier(delay) if status is None else delay
        if sig == signal.SIGINT:
            assert (status, err) == (130, "interrupted\n") and took < GRACE_S + 2
    print("verify", signal.Signals(sig).name, outcomes)


@pytest.mark.faults
def test_ctrl_c_at_random_moments_of_a_smoke_rerun_is_one_line_and_130(tmp_path):
    """During imports, jax's start, XLA compilation (each try with a compilation cache of its own, empty at
    the start, which it fills as it goes) and training (a KeyboardInterrupt once went astray in jax's GC
    callback)."""
    delays = [0.5, *sorted(RNG.uniform(1.0, 25.0) for _ in range(4))]
    for i, delay in enumerate(delays):
        status = None
        while status is None:  # a try counts once its signal reached a live process
            out = tmp_path / f"run{i}-{delay:.3f}"
            args = ["rerun", "--preset", "smoke", "--out", str(out), "--quiet"]
            xla = str(tmp_path / f"xla{i}-{delay:.3f}")
            status, err, took = signalled(args, tmp_path, delay, signal.SIGINT, JAX_COMPILATION_CACHE_DIR=xla)
            delay = _earlier(delay) if status is None else delay
        assert (status, err) == (130, "interrupted\n"), (delay, err[-3000:])
        assert took < GRACE_S + 2, (delay, took)
        if (out / "manifest.json").exists():
            assert json.loads((out / "manifest.json").read_text())["completed"] is False


@pytest.mark.faults
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_signals_during_figures_leave_every_gif_whole(sig, before, published_root, tmp_path):
    """Case: a kill while a GIF was written turned a good GIF into a 0-byte file."""
    delay, status = RNG.uniform(3.0, 30.0), None
    while status is None:  # a try counts once its signal reached a live process
        out = _fresh(before, tmp_path / f"{delay:.3f}")
        status, err, _ = signalled(
            ["figures", "--bundles", str(published_root), "--out", str(out)], tmp_path, delay, sig
        )
        assert_consistent_set(out)
        assert set(snapshot(out)) == set(before[1])  # every GIF still there, and whole (checked above)
        delay = _earlier(delay) if status is None else delay
    if sig == signal.SIGINT:
        assert (status, err) == (130, "interrupted\n")
        assert not stray_temporaries(tmp_path)


def test_a_gif_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    """Case: figures were written in place, so a stop in the middle left a broken file."""
    fig = figures_toy.new_figure((2, 2))
    (dot,) = fig.add_subplot().plot([0.5], [0.5], "o")
    path = tmp_path / "a.gif"
    figures_toy.save_gif(fig, path, 3, 5, lambda i: dot.set_xdata([0.5 + i]), [dot])
    good = path.read_bytes()
    real_save = Image.Image.save

    def stopped(self, fp, *args, **kwargs):
        real_save(self, fp, *args, **kwargs)
        raise KeyboardInterrupt  # after the bytes went out, before the file was complete for a reader

    monkeypatch.setattr(Image.Image, "save", stopped)
    with pytest.raises(KeyboardInterrupt):
        figures_toy.save_gif(fig, path, 4, 5, lambda i: dot.set_xdata([0.2 * i]), [dot])
    assert path.read_bytes() == good and os.listdir(tmp_path) == ["a.gif"]


# --- fuzzing every reader -----------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**25), 10**25) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


def mutated(data: bytes, draw_edits) -> bytes:
    """`data` with bytes flipped, cut or inserted at drawn places."""
    out = bytearray(data)
    for kind, where, value in draw_edits:
        at = where % (len(out) + 1)
        if kind == "flip" and out:
            out[at % len(out)] ^= value or 1
        elif kind == "cut":
            del out[at:]
        else:
            out[at:at] = bytes([value])
    return bytes(out)


EDITS = st.lists(
    st.tuples(st.sampled_from(["flip", "cut", "insert"]), st.integers(0, 2**31), st.integers(0, 255)),
    min_size=1,
    max_size=6,
)


@pytest.mark.faults
@given(text=st.text(max_size=200) | st.builds(json.dumps, JSON_VALUES))
@FUZZ
def test_fuzzed_json_text_is_parsed_or_refused(text):
    try:
        json_rules.parse_json(text, "x.json")
    except InputError:
        pass


@pytest.mark.faults
@given(
    doc=JSON_VALUES,
    runs=st.lists(
        st.dictionaries(st.sampled_from(["variant", "seed", "best_val", "b_learned"]), JSON_VALUES, max_size=4),
        max_size=3,
    ),
)
@FUZZ
def test_fuzzed_run_json_is_read_or_refused(tmp_path_factory, doc, runs):
    path = tmp_path_factory.mktemp("j") / layout.RUN_JSON
    for document in (doc, {"runs": runs, "cfg": doc}):
        path.write_text(json.dumps(document))
        try:
            data = layout.read_run_json(path)
        except InputError:
            continue
        assert isinstance(data["runs"], list) and isinstance(data["cfg"], dict)


@pytest.mark.faults
@given(doc=JSON_VALUES, edits=EDITS)
@FUZZ
def test_fuzzed_expected_files_are_read_or_refused(tmp_path_factory, doc, edits):
    folder = tmp_path_factory.mktemp("e")
    claims = (expected.EXPECTED_DIR / "claims.json").read_bytes()
    for text in (mutated(claims, edits), json.dumps({"claims": [doc]}).encode()):
        (folder / "claims.json").write_bytes(text)
        shutil.copy(expected.EXPECTED_DIR / "rerun.json", folder / "rerun.json")
        try:
            expected.load_rerun(folder)
        except InputError:
            pass


@pytest.fixture(scope="module")
def small_bundle(tmp_path_factory) -> Path:
    """A valid bundle folder of one small yat_b model."""
    folder = tmp_path_factory.mktemp("small")
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 5, 2, 6, 3)).astype(np.float16)
    w = np.tril(rng.uniform(size=(5, 2, 6, 6)))
    attn = (w / w.sum(-1, keepdims=True)).astype(np.float16)
    layout.write_attn_npz(folder / "attn_yat_b_s0.npz", np.arange(6), {0: attn, 5: attn})
    layout.write_geom_npz(folder / "geom_yat_b_s0.npz", np.arange(6), q, k, attn)
    run = {
        "variant": "yat_b",
        "seed": 0,
        "best_val": 1.5,
        "b_learned": [[1.0, 2.0]] * 5,
        "eps_learned": [[0.1] * 2] * 5,
    }
    (folder / layout.RUN_JSON).write_text(json.dumps({"runs": [run], "cfg": {"STEPS": 6}}))
    layout.load_model(folder, "yat_b")
    return folder


@pytest.mark.faults
@given(which=st.sampled_from(["attn_yat_b_s0.npz", "geom_yat_b_s0.npz", layout.RUN_JSON]), edits=EDITS)
@FUZZ
def test_fuzzed_bundle_files_are_loaded_or_refused(small_bundle, tmp_path_factory, which, edits):
    folder = tmp_path_factory.mktemp("fz")
    for name in os.listdir(small_bundle):
        shutil.copy(small_bundle / name, folder / name)
    (folder / which).write_bytes(mutated((small_bundle / which).read_bytes(), edits))
    try:
        model = layout.load_model(folder, "yat_b")
    except InputError:
        return
    assert np.isfinite(model.q_LHTD).all() and model.attn_LHTT.shape[-1] == model.q_LHTD.shape[2]


@pytest.mark.faults
@given(
    shape=st.lists(st.integers(0, 2**62), min_size=0, max_size=4),
    descr=st.sampled_from(["<f2", "<i4", "|b1", "<c8", "|O"]),
    payload=st.binary(max_size=64),
)
@FUZZ
def test_fuzzed_npy_headers_are_refused_before_allocating(tmp_path_factory, shape, descr, payload):
    header = io.BytesIO()
    np.lib.format.write_array_header_2_0(header, {"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    path = tmp_path_factory.mktemp("h") / "a.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("q.npy", header.getvalue() + payload)
    try:
        loaded = arrays.load_npz(path)
    except InputError:
        return
    assert loaded["q"].nbytes == len(payload)
