"""`docker build|run`: build the CUDA image and run any subcommand inside it.

`run` mounts an output folder at /out (the container's working directory, so results land there,
owned by the calling user) and, when `ATTNGEOM_MIRROR` is set, the mirror read-only; it passes
`--gpus all` when an NVIDIA GPU and Docker's NVIDIA runtime are both there, and says so when not
(everything still runs on the CPU). Remaining arguments go to the image's entrypoint, reproduce.sh.
`ATTNGEOM_DOCKER` names the docker client (default `docker`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from attngeom.base.errors import InputError
from attngeom.base.files import REPO

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
CA_VARS = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


def docker_client() -> str:
    """The docker client to call: `ATTNGEOM_DOCKER`, else `docker`, which must exist."""
    name = os.environ.get("ATTNGEOM_DOCKER") or "docker"
    path = shutil.which(name)
    if path is None:
        raise InputError(
            f"no docker client '{name}': install Docker (https://docs.docker.com/engine/install/) "
            "or set ATTNGEOM_DOCKER to its client"
        )
    return path


def _ok(cmd: list[str]) -> subprocess.CompletedProcess | None:
    """Run a probe quietly; None when it cannot run or fails."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done if done.returncode == 0 else None


def has_buildkit(docker: str) -> bool:
    """Whether `docker build` can use BuildKit: the buildx plugin, or a client older than 23 (built in)."""
    if _ok([docker, "buildx", "version"]):
        return True
    version = _ok([docker, "version", "--format", "{{.Client.Version}}"])
    major = version.stdout.strip().split(".")[0] if version else ""
    return major.isdigit() and int(major) < 23


def gpu_flags(docker: str) -> tuple[list[str], str]:
    """`--gpus all` when a GPU and Docker's NVIDIA support are both there, with a line saying what was found."""
    smi = shutil.which("nvidia-smi")
    listed = _ok([smi, "-L"]) if smi else None
    gpus = [line for line in (listed.stdout.splitlines() if listed else []) if line.startswith("GPU ")]
    if not gpus:
        return [], "no NVIDIA GPU found (nvidia-smi); running on the CPU: verify is unaffected, training is slow"
    runtimes = _ok([docker, "info", "--format", "{{json .Runtimes}}"])
    toolkit = any(shutil.which(hook) for hook in ("nvidia-container-runtime-hook", "nvidia-ctk"))
    if not toolkit and not (runtimes and "nvidia" in runtimes.stdout):
        return [], (
            "an NVIDIA GPU is here but Docker has no NVIDIA runtime: install the NVIDIA Container "
            "Toolkit to use it; running on the CPU"
        )
    return ["--gpus", "all"], f"using {len(gpus)} GPU(s): {gpus[0].split(' (UUID')[0]}"


def default_ca_bundle() -> Path | None:
    """The CA bundle this machine's Python tools are told to trust, if one is set."""
    for var in CA_VARS:
        value = os.environ.get(var)
        if value and Path(value).is_file():
            return Path(value)
    return None


def build_command(docker: str, image: str, base: str | None, ca_bundle: Path | None, context: Path = REPO) -> list[str]:
    """The `docker build` command line (run with DOCKER_BUILDKIT=1)."""
    cmd = [docker, "build", "--tag", image]
    if base:
        cmd += ["--build-arg", f"BASE_IMAGE={base}"]
    if ca_bundle:
        cmd += ["--secret", f"id=ca,src={ca_bundle}"]
    cmd += [arg for var in PROXY_VARS if os.environ.get(var) for arg in ("--build-arg", var)]
    return [*cmd, str(context)]


def run_command(
    docker: str, image: str, output: Path, mirror: Path | None, gpus: list[str], forwarded: list[str], tty: bool = False
) -> list[str]:
    """The `docker run` command line: caller's uid:gid, /out mounted as the working directory."""
    cmd = [
        docker,
        "run",
        "--rm",
        "--init",
        "--user",
        f"{os.getuid()}:{os.getgid()}",
        "--volume",
        f"{output}:/out",
        "--workdir",
        "/out",
        "--env",
        "HOME=/tmp",
        "--env",
        "ATTNGEOM_CACHE=/out/.cache",
    ]
    if tty:
        cmd += ["--interactive", "--tty"]
    if mirror:
        cmd += ["--volume", f"{mirror}:/mirror:ro", "--env", "ATTNGEOM_MIRROR=/mirror"]
    if not gpus:
        cmd += ["--env", "JAX_PLATFORMS=cpu"]  # jax's CUDA plugin would fail loudly without a GPU
    if forwarded[:1] == ["--"]:
        forwarded = forwarded[1:]
    return [*cmd, *gpus, image, *forwarded]


@dataclass(frozen=True)
class BuildOptions:
    """What `docker build` was asked (`commands/docker.py`)."""

    image: str
    base: str | None = None
    ca_bundle: Path | None = None


@dataclass(frozen=True)
class RunOptions:
    """What `docker run` was asked (`commands/docker.py`): the container's options, then reproduce.sh's."""

    image: str
    output: Path
    gpus: str = "auto"
    args: tuple[str, ...] = ()


def cmd_build(args: BuildOptions) -> int:
    """Build the image from this checkout."""
    if not (REPO / "Dockerfile").is_file():
        raise InputError(f"no Dockerfile in {REPO}: docker build needs the source checkout")
    docker = docker_client()
    if not has_buildkit(docker):
        raise InputError(
            "this docker client cannot use BuildKit, which the Dockerfile needs: install the "
            "buildx plugin, or set ATTNGEOM_DOCKER to a client that has it"
        )
    ca = args.ca_bundle if args.ca_bundle is not None else default_ca_bundle()
    if ca is not None and not ca.is_file():
        raise InputError(f"no CA bundle at {ca}")
    cmd = build_command(docker, args.image, args.base, ca)
    print("docker:", " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, env={**os.environ, "DOCKER_BUILDKIT": "1"}, check=False).returncode


def cmd_run(args: RunOptions) -> int:
    """Run reproduce.sh ARGS in the image, GPUs and mirror mounted when there."""
    docker = docker_client()
    if not _ok([docker, "image", "inspect", args.image]):
        raise InputError(
            f"no Docker image '{args.image}' (or no Docker engine running): build it with ./reproduce.sh docker build"
        )
    mirror = os.environ.get("ATTNGEOM_MIRROR")
    if mirror and not Path(mirror).is_dir():
        raise InputError(f"ATTNGEOM_MIRROR={mirror} is not a folder")
    output = args.output.resolve()
    output.mkdir(parents=True, exist_ok=True)
    if args.gpus == "auto":
        gpus, note = gpu_flags(docker)
    elif args.gpus == "all":
        gpus, note = ["--gpus", "all"], "using all GPUs (--gpus all)"
    else:
        gpus, note = [], "running on the CPU (--gpus none)"
    print(f"docker: {note}; results in {output}", file=sys.stderr)
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    cmd = run_command(
        docker, args.image, output, Path(mirror).resolve() if mirror else None, gpus, list(args.args), tty
    )
    return subprocess.run(cmd, check=False).returncode
