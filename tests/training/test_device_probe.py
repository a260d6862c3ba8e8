"""The device probe: jax's backend started in a child, its platform or one line saying why not, and the
address space a rerun needs."""

from __future__ import annotations

import resource
import subprocess

import pytest

from attngeom.base.errors import InputError
from attngeom.training import device_probe


def child(monkeypatch, returncode: int = 0, stdout: str = "", stderr: str = "") -> list:
    """The probe's child replaced by one that ends as given: the command lines it was started with."""
    started = []

    def run(cmd, **kwargs):
        started.append(cmd)
        return subprocess.CompletedProcess(cmd, returncode, stdout, stderr)

    monkeypatch.setattr(device_probe.subprocess, "run", run)
    monkeypatch.setattr(device_probe, "check_memory", lambda: None)
    return started


def test_the_platform_is_the_childs_last_line(monkeypatch):
    started = child(monkeypatch, stdout="a warning\ngpu\n")
    assert device_probe.check_device() == "gpu"
    assert started[0][1:3] == ["-I", "-c"] and "jax.devices()" in started[0][3]  # isolated: no working-folder code


def test_a_failed_start_is_one_line_without_the_log_prefix_and_naming_the_settings(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    child(monkeypatch, 1, stderr="noise\nE1201 13:41:20.470000 17238 client.cc:234] no CUDA device found\n")
    with pytest.raises(InputError, match=r"^the device cannot start \(JAX_PLATFORMS='cuda'\): no CUDA device found$"):
        device_probe.check_device()


def test_a_start_out_of_memory_says_so(monkeypatch):
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    child(monkeypatch, -6, stderr="terminate called after throwing an instance of 'std::bad_alloc'\nAborted\n")
    with pytest.raises(InputError, match=r"^out of memory: the device cannot start: terminate called .*bad_alloc'$"):
        device_probe.check_device()


def test_a_child_that_says_nothing_is_named_by_its_status(monkeypatch):
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    child(monkeypatch, 0)
    with pytest.raises(InputError, match="^the device cannot start: exit status 0$"):
        device_probe.check_device()


def test_a_child_that_hangs_is_one_line(monkeypatch):
    monkeypatch.setattr(device_probe, "check_memory", lambda: None)

    def run(cmd, **kwargs):
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

    monkeypatch.setattr(device_probe.subprocess, "run", run)
    with pytest.raises(InputError, match=f"did not start within {device_probe.TIMEOUT_S} s"):
        device_probe.check_device()


@pytest.mark.parametrize(("limit", "refused"), [(1 << 30, True), (device_probe.MIN_ADDRESS_SPACE, False)])
def test_an_address_space_below_what_a_rerun_needs_is_refused(monkeypatch, limit, refused):
    real = resource.getrlimit
    monkeypatch.setattr(
        resource, "getrlimit", lambda which: (limit, limit) if which == resource.RLIMIT_AS else real(which)
    )
    if refused:
        with pytest.raises(InputError, match=r"out of memory: this process may map 1024 MiB \(ulimit -v\)"):
            device_probe.check_memory()
    else:
        device_probe.check_memory()


def test_no_limit_is_no_refusal(monkeypatch):
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    device_probe.check_memory()
