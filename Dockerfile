# Reruns the seed-0 training runs on an NVIDIA GPU and verifies every claim; the entrypoint is
# reproduce.sh, so every subcommand works: `docker run ... IMAGE rerun --preset paper`.
#
#   ./reproduce.sh docker build      (or: DOCKER_BUILDKIT=1 docker build -t attngeom .)
#   ./reproduce.sh docker run [ARGS] (mounts an output folder, the mirror, and the GPUs)
#
# Behind a TLS-intercepting proxy, give pip the proxy's CA bundle as a BuildKit secret; it is
# mounted for the install step only and never stored in the image:
#   DOCKER_BUILDKIT=1 docker build --secret id=ca,src=/path/to/ca-bundle.crt -t attngeom .
#
# The `base` flavour carries no CUDA libraries of its own: jax's CUDA wheels bring theirs.
# Index digest of the multi-arch tag (its linux/amd64 manifest is sha256:5d2e5377...cd1df).
ARG BASE_IMAGE=nvidia/cuda:12.9.1-base-ubuntu24.04@sha256:29e5e3425e2e0f5a4e97c9fb4695ba4887cd78210a43cf94c3bcafc6ab01c5e6
FROM ${BASE_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Ubuntu 24.04's own Python 3.12 (jax 0.10.2 needs 3.11 or newer). Versions come with the release
# pinned above; exact Debian revisions would break whenever the archive publishes an update.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*

# reproduce.sh uses the venv built below; XLA takes memory as needed (not 75% up front) and only
# deterministic GPU kernels, so a rerun gives the same numbers every time.
ENV ATTNGEOM_VENV=/opt/venv \
    ATTNGEOM_LOCK=/opt/attngeom/requirements-cuda.lock \
    PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONSAFEPATH=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    XLA_PYTHON_CLIENT_PREALLOCATE=false \
    XLA_FLAGS=--xla_gpu_deterministic_ops=true \
    MPLCONFIGDIR=/tmp/matplotlib

# The locked dependencies with jax's CUDA 12 wheels, then the stamp that tells reproduce.sh the
# environment matches the lock, so it never reinstalls.
COPY requirements.lock requirements-cuda.lock /opt/attngeom/
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca REQUESTS_CA_BUNDLE=/run/secrets/ca; fi \
    && python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes -r "$ATTNGEOM_LOCK" \
    && sha256sum "$ATTNGEOM_LOCK" | cut -d' ' -f1 >/opt/venv/.lock-sha256

COPY . /opt/attngeom/
RUN /opt/venv/bin/pip install --no-deps --no-build-isolation --no-index /opt/attngeom \
    && rm -rf /opt/attngeom/build /opt/attngeom/src/*.egg-info \
    && useradd --create-home --uid 10001 --user-group attngeom \
    && mkdir -p /out && chown attngeom:attngeom /out

USER 10001:10001
WORKDIR /out
ENTRYPOINT ["/opt/attngeom/reproduce.sh"]
