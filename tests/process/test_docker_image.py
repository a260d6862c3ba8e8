"""Build the CUDA image for real and run the default verify in it against the mirror.

Needs a Docker engine and an Ubuntu base of the CUDA image's release named by
`ATTNGEOM_DOCKER_BASE`, since no image registry may be reachable: `. .ci/docker.sh` prepares both.
The image and containers made here are removed afterwards.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
from pathlib import Path

import pytest
from helpers.docker import parse

from attngeom.backends import docker as docker_backend
from attngeom.jobs import ensemble
from attngeom.jobs.verify import run_verify

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def ca_bundle() -> Path | None:
    """The bundle this machine trusts, so pip in the build gets through a TLS-intercepting proxy."""
    found = docker_backend.default_ca_bundle()
    default = ssl.get_default_verify_paths().cafile
    return found or (Path(default) if default and Path(default).is_file() else None)


@pytest.fixture(scope="module")
def image():
    base = os.environ.get("ATTNGEOM_DOCKER_BASE")
    if not base:
        if os.environ.get("CI"):
            pytest.fail("no ATTNGEOM_DOCKER_BASE in CI: .ci/run must source .ci/docker.sh")
        pytest.skip("no ATTNGEOM_DOCKER_BASE: `. .ci/docker.sh` prepares a Docker engine and the base image")
    name = f"attngeom-test:{os.getpid()}"
    argv = ["docker", "build", "--image", name, "--base", base]
    ca = ca_bundle()
    if ca:
        argv += ["--ca-bundle", str(ca)]
    args = parse(argv)
    try:
        assert args.func(args) == 0, "docker build failed (its log is above)"
        yield name
    finally:
        subprocess.run([docker_backend.docker_client(), "rmi", "--force", name], capture_output=True, check=False)


def run(image: str, out: Path, *forwarded: str) -> int:
    args = parse(["docker", "run", "--image", image, "--output", str(out), *forwarded])
    return args.func(args)


def verdicts(report: Path) -> tuple[dict[str, str], dict]:
    data = json.loads(report.read_text())
    return {claim["id"]: claim["verdict"] for claim in data["claims"]}, data["summary"]


def test_default_verify_in_the_image_judges_as_the_checkout_does(image, tmp_path, capfd):
    assert os.environ.get("ATTNGEOM_MIRROR"), "the container reaches no network: it needs the mirror"
    out = tmp_path / "out"
    status = run(image, out)
    printed = capfd.readouterr()
    reports = list(out.rglob("report.json"))
    assert len(reports) == 1, f"no single report.json under {out}: {printed.out + printed.err}"
    assert (reports[0].parent / "REPORT.md").is_file()
    in_image, summary = verdicts(reports[0])
    assert in_image and status == (0 if summary["failed"] == 0 else 1), printed.out + printed.err
    assert f"{summary['passed']} passed, {summary['failed']} failed" in printed.out
    assert {p.stat().st_uid for p in out.rglob("*")} == {os.getuid()}, "results must belong to the caller"

    host_status = run_verify(None, tmp_path / "host")
    assert (status, in_image) == (host_status, verdicts(tmp_path / "host" / "report.json")[0])


def test_bad_input_in_the_image_exits_2(image, tmp_path, capfd):
    status = run(image, tmp_path / "out", "verify", "--bundles", "/no/such/folder")
    printed = capfd.readouterr()
    assert status == 2, printed.out + printed.err
    assert "error:" in printed.err and "Traceback" not in printed.err


def test_an_ensemble_trains_together_in_the_image(image, tmp_path, capfd):
    """`docker run rerun --members K` as on a GPU, its members stacked and vmapped (here on the CPU, smoke)."""
    out = tmp_path / "out"
    argv = ("rerun", "--preset", "smoke", "--variants", "goat_v", "--windows", "2", "--members", "2")
    status = run(image, out, *argv, "--members-mode", "together", "--out", "ENS")
    printed = capfd.readouterr()
    assert status in (0, 1), printed.out[-3000:] + printed.err[-3000:]  # the verdict on the smoke-trained members
    doc = ensemble.read(out / "ENS")
    assert doc["members_mode"] == "together" and [r["state"] for r in doc["member_runs"].values()] == ["complete"] * 2
    for m in (0, 1):
        assert (ensemble.member_dir(out / "ENS", m) / "report" / "report.json").is_file()
    assert {p.stat().st_uid for p in out.rglob("*")} == {os.getuid()}, "results must belong to the caller"
