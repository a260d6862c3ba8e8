"""`reproduce.sh docker build|run`: the CUDA image built from this checkout, or reproduce.sh run inside it.

`docker build` builds the image (BuildKit; a CA bundle for a TLS-intercepting proxy is passed as a build
secret, never kept in the image). `docker run [OPTIONS] ARGS` runs `reproduce.sh ARGS` in it with the
GPUs passed when there are any, the output folder mounted as its working folder and ATTNGEOM_MIRROR
mounted when set.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attngeom.commands.options import subcommand, typed

IMAGE = "attngeom"  # --image
OUTPUT = Path("docker-out")  # docker run --out


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `docker build` and `docker run`."""
    parser = subcommand(subparsers, "docker", "build the CUDA Docker image, or run a subcommand in it", __doc__)
    actions = parser.add_subparsers(dest="docker_action", metavar="ACTION", required=True)

    build = actions.add_parser("build", help="build the image from this checkout", description="Build the image.")
    build.add_argument("--image", default=IMAGE, help="image name (default: %(default)s)")
    build.add_argument("--base", help="replace the CUDA base image (build argument BASE_IMAGE)")
    build.add_argument(
        "--ca-bundle",
        type=Path,
        help="extra CA bundle for a TLS-intercepting proxy, passed as a build secret "
        "(default: the one PIP_CERT, REQUESTS_CA_BUNDLE or SSL_CERT_FILE names)",
    )
    build.set_defaults(func=run_build)

    run = actions.add_parser(
        "run",
        help="run reproduce.sh ARGS in the image (default: verify)",
        description="Options for the container come first; everything from the "
        "first other word on goes to reproduce.sh (put `--` before "
        "arguments that start with a dash).",
    )
    run.add_argument("--image", default=IMAGE, help="image name (default: %(default)s)")
    run.add_argument(
        "--out",
        "--output",  # the spelling of earlier versions
        dest="output",
        type=Path,
        default=OUTPUT,
        help="host folder mounted as the working directory (default: %(default)s)",
    )
    run.add_argument(
        "--gpus",
        choices=("auto", "all", "none"),
        default="auto",
        help="pass the GPUs: when found (auto, the default), always, or never",
    )
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments for reproduce.sh in the image")
    run.set_defaults(func=run_in_image)


def run_build(args: argparse.Namespace) -> int:
    """`docker build` (`backends.docker.cmd_build`)."""
    from attngeom.backends.docker import BuildOptions, cmd_build

    return cmd_build(typed(BuildOptions, args))


def run_in_image(args: argparse.Namespace) -> int:
    """`docker run` (`backends.docker.cmd_run`)."""
    from attngeom.backends.docker import RunOptions, cmd_run

    return cmd_run(typed(RunOptions, args, args=tuple(args.args)))
