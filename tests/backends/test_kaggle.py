"""The Kaggle backend driven end to end: the real `kaggle` client against a fake server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import MIRROR, REPO
from helpers.kaggle import PROXY_VARS, FakeKaggle, settings_of, synthetic_output
from helpers.kaggle import kaggle_command as kaggle
from helpers.runs import restore_device_settings

from attngeom import cli
from attngeom.backends import kaggle as kaggle_backend
from attngeom.backends.kaggle_kernel import OUTPUT_DIR
from attngeom.jobs import ensemble
from attngeom.training.runs import require_complete

LOOPBACK = ("127.0.0.1", "::1", "localhost")


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Any connection to a host other than this machine fails the test."""
    connect = socket.socket.connect

    def guarded(sock, address):
        if isinstance(address, tuple):
            assert address[0] in LOOPBACK, f"connection to {address} leaves the machine"
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


def serve_synthetic(fake_kaggle: FakeKaggle, corrupt: str | None = None) -> None:
    """Each pushed kernel 'produces' a synthetic bundle for its variants and seed."""

    def produce(slug: str, request: dict) -> None:
        name, seed = slug.split("/")[1].rsplit("-s", 1)
        variants = kaggle_backend.definitions()[name].variants
        run_id = settings_of(request["text"])["RUN_ID"]
        fake_kaggle.kernel(slug).outputs = synthetic_output(name, variants, int(seed), corrupt=corrupt, run_id=run_id)
        fake_kaggle.kernel(slug).log = f"training {name}\nattngeom kernel: {name} seed {seed} done\n"

    fake_kaggle.on_push = produce


def test_run_pushes_polls_pulls_and_judges(fake_kaggle, monkeypatch, capsys):
    serve_synthetic(fake_kaggle)
    judged = {}

    def judge(run, state):
        judged.update(run=run, state=state)
        return 0

    monkeypatch.setattr(kaggle_backend, "judge", judge)
    status, error = kaggle("run", "--run", "r", "--poll", "0.001", "--seeds", "0,1")
    assert (status, error) == (0, "")
    out = capsys.readouterr().out
    for state in ("QUEUED", "RUNNING", "COMPLETE"):
        assert f"attngeom-qk-s0 {state}" in out
    assert set(fake_kaggle.kernels) == {f"reviewer/attngeom-{b}-s{s}" for b in ("qk", "goat") for s in (0, 1)}
    request = fake_kaggle.kernels["reviewer/attngeom-qk-s0"].pushes[0]
    assert request["enableGpu"] and request["enableInternet"] and request["isPrivate"]
    assert request["machineShape"] == "NvidiaTeslaT4" and request["sessionTimeoutSeconds"] == 6 * 3600
    state = json.loads((judged["run"] / kaggle_backend.STATE_FILE).read_text())
    assert [k["state"] for k in state["kernels"]] == ["PULLED"] * 4
    for k in state["kernels"]:
        root = judged["run"] / "outputs" / f"{k['bundle']}-s{k['seed']}" / OUTPUT_DIR
        assert require_complete(root)["completed"]
    assert all(
        host == "127.0.0.1" and target.startswith(("/api/v1/", "/files/")) for host, target in fake_kaggle.requests
    )


def test_concurrency_limit_holds_back_pushes(fake_kaggle, monkeypatch):
    serve_synthetic(fake_kaggle)
    monkeypatch.setattr(kaggle_backend, "judge", lambda run, state: 0)
    synthetic, waiting_at_push = fake_kaggle.on_push, []

    def push_and_count(slug, request):
        synthetic(slug, request)
        # pushed and not yet reported COMPLETE to the client (the new one included)
        waiting_at_push.append(sum(bool(k.pushes) and k.polls < len(k.states) for k in fake_kaggle.kernels.values()))

    fake_kaggle.on_push = push_and_count
    assert kaggle("run", "--run", "r", "--poll", "0.001", "--seeds", "0,1,2", "--concurrency", "2") == (0, "")
    assert len(waiting_at_push) == 6 and max(waiting_at_push) == 2


def test_status_and_pull_resume_from_the_state_file(fake_kaggle, monkeypatch, tmp_path):
    serve_synthetic(fake_kaggle)
    monkeypatch.setattr(kaggle_backend, "judge", lambda run, state: 0)
    assert kaggle("build", "--run", "r", "--bundles", "attngeom-goat") == (0, "")
    assert kaggle("push", "--run", "r") == (0, "")
    # Each call knows only what the state file says, as a new shell or a restart after a crash would.
    status, error = kaggle("pull", "--run", "r")  # the kernel is still QUEUED
    assert status == 2 and "not finished yet" in error
    assert kaggle("status", "--run", "r") == (0, "")  # RUNNING
    assert kaggle("pull", "--run", "r") == (0, "")  # COMPLETE: pulled, checked, judged
    pulled = tmp_path / "r" / "outputs" / "attngeom-goat-s0"
    first = {p: p.read_bytes() for p in pulled.rglob("*") if p.is_file()}
    # The server now serves other (valid) bytes; pulling again keeps the good bundle as it was.
    run_id = json.loads((tmp_path / "r" / kaggle_backend.STATE_FILE).read_text())["run_id"]
    fake_kaggle.kernel("reviewer/attngeom-goat-s0").outputs = synthetic_output(
        "attngeom-goat", ("goat_v",), 0, salt=1, run_id=run_id
    )
    assert kaggle("pull", "--run", "r") == (0, "")
    assert {p: p.read_bytes() for p in pulled.rglob("*") if p.is_file()} == first
    # A damaged local copy is set aside (not deleted) and replaced by a fresh, checked download.
    json_path = pulled / OUTPUT_DIR / "attngeom-goat" / "yat_attention.json"
    json_path.write_text("damaged")
    assert kaggle("pull", "--run", "r") == (0, "")
    assert require_complete(pulled / OUTPUT_DIR)["completed"]
    assert json_path.read_text() != "damaged"
    (rejected,) = (tmp_path / "r" / "rejected").iterdir()
    assert (rejected / OUTPUT_DIR / "attngeom-goat" / "yat_attention.json").read_text() == "damaged"


def test_latest_run_is_the_default(fake_kaggle):
    assert kaggle("build", "--bundles", "attngeom-goat") == (0, "")
    assert kaggle("status") == (0, "")
    (run,) = kaggle_backend.RUNS_DIR.glob("*-kaggle")
    assert json.loads((run / kaggle_backend.STATE_FILE).read_text())["kernels"][0]["state"] == "BUILT"


def test_push_error_in_the_reply_fails_and_keeps_the_build(fake_kaggle, tmp_path):
    fake_kaggle.push_error = "Phone verification is required to use accelerators."
    status, error = kaggle("run", "--run", "r", "--poll", "0.001")
    assert status == 2
    assert "Phone verification is required" in error and "phone-verified" in error
    state = json.loads((tmp_path / "r" / kaggle_backend.STATE_FILE).read_text())
    assert {k["state"] for k in state["kernels"]} == {"BUILT"}


def test_no_gpu_quota_is_refused_before_pushing(fake_kaggle):
    fake_kaggle.gpu_hours_left = 0
    status, error = kaggle("run", "--run", "r", "--poll", "0.001")
    assert status == 2 and "no GPU quota left" in error
    assert not fake_kaggle.kernels


def estimates_here(monkeypatch) -> None:
    """The estimate compiles a step under the device settings, set for this process: give them back after."""
    restore_device_settings(monkeypatch)
    monkeypatch.setenv("JAX_PLATFORMS", os.environ.get("JAX_PLATFORMS", ""))


def test_an_ensemble_that_cannot_fit_its_session_or_the_quota_left_is_refused(
    fake_kaggle, tmp_path, capsys, monkeypatch
):
    """The estimate (smoke preset: the install's 10 minutes and the compilation make most of it) against
    a session of 10 minutes, then against a GPU quota of 6 minutes left."""
    estimates_here(monkeypatch)
    argv = ("--preset", "smoke", "--bundles", "attngeom-goat", "--members", "2", "--poll", "0.001")
    status, error = kaggle("build", "--run", "b", "--username", "someone", "--timeout", "600", *argv[:-2])
    assert status == 2 and error.startswith("someone/attngeom-goat-s0: estimated at 0.2 h, more than the session's")
    assert "fewer --members, or a longer --time-limit up to 43200" in error
    assert not (tmp_path / "b" / kaggle_backend.STATE_FILE).exists()  # no run is started that cannot end
    fake_kaggle.gpu_hours_left = 0.1
    status, error = kaggle("run", "--run", "r", *argv)
    assert status == 2 and "estimated at 0.2 GPU hours, more than the 0.1 h of GPU quota left this week" in error
    assert "GPU quota: 29.9 h used of 30.0 h" in capsys.readouterr().out
    assert not fake_kaggle.kernels  # nothing pushed


def test_kernel_in_error_shows_failure_message_and_log(fake_kaggle, monkeypatch, tmp_path):
    fake_kaggle.kernel("reviewer/attngeom-goat-s0").states = ["QUEUED", "RUNNING", "ERROR"]
    fake_kaggle.kernel(
        "reviewer/attngeom-goat-s0"
    ).failure_message = "Your notebook tried to allocate more memory than is available."
    events = [
        {"stream_name": "stderr", "time": 1.0 + i, "data": line + "\n"}
        for i, line in enumerate(["step 100", "Traceback (most recent call last):", "MemoryError"])
    ]
    fake_kaggle.kernel("reviewer/attngeom-goat-s0").log = json.dumps(events)  # Kaggle's log format
    status, error = kaggle("run", "--run", "r", "--poll", "0.001", "--bundles", "attngeom-goat")
    assert status == 2
    assert "ended in ERROR" in error and "allocate more memory" in error and "MemoryError" in error
    assert (tmp_path / "r" / "logs" / "attngeom-goat-s0.log").read_text().splitlines()[-1] == "MemoryError"
    # Once the cause is fixed, continuing the run pushes the failed kernel again.
    serve_synthetic(fake_kaggle)
    fake_kaggle.kernel("reviewer/attngeom-goat-s0").states = ["RUNNING", "COMPLETE"]
    monkeypatch.setattr(kaggle_backend, "judge", lambda run, state: 0)
    assert kaggle("run", "--run", "r", "--poll", "0.001") == (0, "")
    assert len(fake_kaggle.kernels["reviewer/attngeom-goat-s0"].pushes) == 2


def test_output_whose_sha256_mismatches_the_manifest_is_rejected(fake_kaggle, tmp_path):
    serve_synthetic(fake_kaggle, corrupt="geom_goat_v_s0.npz")
    status, error = kaggle("run", "--run", "r", "--poll", "0.001", "--bundles", "attngeom-goat")
    assert status == 2 and "geom_goat_v_s0.npz: changed since the run finished (sha256 differs" in error
    assert not (tmp_path / "r" / "outputs" / "attngeom-goat-s0").exists()
    assert (tmp_path / "r" / ".incoming" / "attngeom-goat-s0").is_dir()  # kept for inspection


def test_missing_output_file_is_named(fake_kaggle):
    serve_synthetic(fake_kaggle)
    produce = fake_kaggle.on_push
    fake_kaggle.on_push = lambda slug, req: (
        produce(slug, req),
        fake_kaggle.kernel(slug).outputs.pop(f"{OUTPUT_DIR}/attngeom-goat/attn_goat_v_s0.npz"),
    )
    status, error = kaggle("run", "--run", "r", "--poll", "0.001", "--bundles", "attngeom-goat")
    assert status == 2 and "attn_goat_v_s0.npz: listed in the run manifest but missing" in error


def test_timeout_leaves_state_for_later(fake_kaggle, tmp_path):
    fake_kaggle.kernel("reviewer/attngeom-goat-s0").states = ["QUEUED", "RUNNING"]
    status, error = kaggle("run", "--run", "r", "--poll", "0.001", "--timeout", "1", "--bundles", "attngeom-goat")
    assert status == 2 and "timed out" in error and "kaggle pull --out r" in error
    assert kaggle("status", "--run", "r") == (0, "")
    state = json.loads((tmp_path / "r" / kaggle_backend.STATE_FILE).read_text())
    assert state["kernels"][0]["state"] == "RUNNING"


def test_credentials_absent(fake_kaggle, monkeypatch, tmp_path):
    monkeypatch.delenv("KAGGLE_USERNAME")
    monkeypatch.delenv("KAGGLE_KEY")
    status, error = kaggle("run", "--run", "r")
    assert status == 2 and "no usable Kaggle credentials" in error and "kaggle.json" in error
    assert not fake_kaggle.requests and not (tmp_path / "r" / kaggle_backend.STATE_FILE).exists()
    # Building needs no account when the user name is given; pushing does.
    assert kaggle("build", "--run", "b", "--username", "someone") == (0, "")
    assert (tmp_path / "b" / "kernels" / "attngeom-qk-s0" / "kernel-metadata.json").is_file()
    status, error = kaggle("push", "--run", "b")
    assert status == 2 and "no usable Kaggle credentials" in error


def test_command_line_through_a_proxy_to_the_default_endpoint(fake_kaggle, tmp_path):
    """A fresh process, the client's own endpoint choice (http://localhost) and http_proxy to the fake."""
    serve_synthetic(fake_kaggle)
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    env.update(http_proxy=fake_kaggle.url, no_proxy="", PYTHONPATH=str(REPO / "src"))
    cmd = [
        sys.executable,
        "-m",
        "attngeom",
        "kaggle",
        "run",
        "--run",
        "r",
        "--poll",
        "0.01",
        "--bundles",
        "attngeom-goat",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: synthetic maps miss the claims
    assert "Traceback" not in done.stderr
    assert (tmp_path / "r" / "report" / "REPORT.md").is_file()
    assert json.loads((tmp_path / "r" / "report" / "report.json").read_text())["tier"] == "rerun"
    targets = [target for _, target in fake_kaggle.requests]
    assert "http://localhost/api/v1/kernels.KernelsApiService/SaveKernel" in targets
    assert all(t.startswith(("http://localhost/api/v1/", f"{fake_kaggle.url}/files/")) for t in targets)

    fake_kaggle.push_error = "Your account is not allowed to use accelerators."
    done = subprocess.run(cmd[:6] + ["r2"] + cmd[7:], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.startswith("error: push reviewer/attngeom-goat-s0: Kaggle refused it")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def run_kernels_here(fake_kaggle: FakeKaggle, tmp_path: Path, **env_vars: str) -> None:
    """The fake runs each pushed script as Kaggle would, on this machine, and serves its real output."""

    def execute(slug: str, request: dict) -> None:
        working = tmp_path / "kaggle" / slug.split("/")[1] / "working"
        working.mkdir(parents=True)
        script = working.parent / "script.py"
        script.write_text(request["text"])
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | env_vars
        env["ATTNGEOM_KERNEL_PYTHON"] = sys.executable  # this checkout's environment already has the lock
        (working.parent / "input").mkdir()
        (working.parent / "input" / "mirror").symlink_to(MIRROR)  # as a dataset attached to the kernel
        env["ATTNGEOM_MIRROR"] = "../input/mirror"  # relative to where the kernel starts
        done = subprocess.run([sys.executable, str(script)], cwd=working, env=env, capture_output=True, text=True)
        kernel = fake_kaggle.kernel(slug)
        kernel.log = done.stdout + done.stderr
        if done.returncode != 0:
            kernel.states, kernel.failure_message = ["RUNNING", "ERROR"], f"exit status {done.returncode}"
        kernel.outputs = {p.relative_to(working).as_posix(): p.read_bytes() for p in working.rglob("*") if p.is_file()}

    fake_kaggle.on_push = execute


@pytest.mark.slow
def test_run_end_to_end_with_the_real_kernel_script_training_an_ensemble_of_two(
    fake_kaggle, tmp_path, capsys, monkeypatch
):
    """The fake runs each pushed script as Kaggle would (smoke preset, `--members 2`): the kernel trains
    each member in a process of its own (the two GPUs of the T4 x2 machine, named by
    CUDA_VISIBLE_DEVICES; here both train on the CPU); the pull checks every member and writes
    ensemble.json, which `summary` and `bands` then take as a local ensemble's. (The script of one run
    trains for real in test_kaggle_kernel.py, and its pull is checked here with synthetic outputs.)"""
    estimates_here(monkeypatch)
    run_kernels_here(fake_kaggle, tmp_path, CUDA_VISIBLE_DEVICES="0,1")
    argv = ("run", "--run", "r", "--poll", "0.01", "--preset", "smoke", "--bundles", "attngeom-goat", "--members", "2")
    status, error = kaggle(*argv)
    out = capsys.readouterr().out
    log = fake_kaggle.kernels["reviewer/attngeom-goat-s0"].log
    assert status in (0, 1), f"{error}\n{log[-3000:]}"  # 0 or 1: the verdict on the smoke-trained members
    assert "members 0 on GPU 0" in log and "members 1 on GPU 1" in log and "--member-ids 1" in log
    assert "GPU quota: 0.0 h used of 30.0 h this week" in out
    assert "estimate: " in out and "GPU hours on T4 x2 (attngeom-goat-s0 " in out and "1 vmapped per GPU" in out
    folder = tmp_path / "r" / "outputs" / "attngeom-goat-s0"
    doc = ensemble.read(folder)
    assert doc["members"] == 2 and [r["state"] for r in doc["member_runs"].values()] == ["complete"] * 2
    spread = doc["statistics"]["goat_v_s0"]["distinct_winners"]
    assert all(one["member_ids"] == [0, 1] for one in spread.values())
    for m in (0, 1):
        stamp = require_complete(folder / f"member-{m}")["kaggle"]
        assert stamp == {
            "run_id": kaggle_backend.load_state(tmp_path / "r")["run_id"],
            "bundle": "attngeom-goat",
            "seed": 0,
        }
    assert "member 1: complete" in out and "./reproduce.sh summary" in out
    summary_file = tmp_path / "kaggle-ensemble.json"
    assert cli.main(["summary", str(folder), "--out", str(summary_file)]) == 0
    kept = json.loads(summary_file.read_text())["runs"]["attngeom-goat-s0"]
    assert kept["ensemble"]["statistics"] == doc["statistics"] and set(kept["members"]) == {"member-0", "member-1"}
    assert cli.main(["bands", str(summary_file), "--step", "1200"]) == 0  # no smoke band to derive: all kept
