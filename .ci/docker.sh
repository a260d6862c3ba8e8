#!/usr/bin/env bash
# Prepare the Docker image tests without any image registry: a running Docker engine, a client
# that can use BuildKit, and Ubuntu base images built with debootstrap (cached between runs): one
# of the CUDA image's release (Dockerfile) and one of the Kaggle-like runtime's
# (tests/kaggle-runtime/Dockerfile), each named by its Dockerfile's BASE_IMAGE default.
# Idempotent; needs root.
#
#   .ci/docker.sh        print the CUDA image's base image name
#   . .ci/docker.sh      export ATTNGEOM_DOCKER_BASE (that name), ATTNGEOM_KAGGLE_BASE (the Kaggle-like
#                        runtime's) and ATTNGEOM_DOCKER (the client), and ATTNGEOM_DOCKERD_PID when
#                        it started the engine (empty when one was running)
#
# ATTNGEOM_DOCKER_CACHE (default /var/cache/attngeom) keeps the debootstrapped root file systems;
# ATTNGEOM_UBUNTU_MIRROR (default http://archive.ubuntu.com/ubuntu) is where it comes from.

_attngeom_docker_release() { # the Ubuntu release a Dockerfile's BASE_IMAGE default names
  local version
  version="$(sed -n 's/^ARG BASE_IMAGE=.*ubuntu:\{0,1\}\([0-9][0-9]\.[0-9][0-9]\).*/\1/p' "$1")"
  case "$version" in
    24.04) echo noble ;;
    22.04) echo jammy ;;
    *) echo ".ci/docker.sh: cannot tell the Ubuntu release of BASE_IMAGE in $1" >&2; return 2 ;;
  esac
}

_attngeom_docker_prepare() {
  local repo cache mirror release image tarball keyring root cuda_release kaggle_release
  repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  cache="${ATTNGEOM_DOCKER_CACHE:-/var/cache/attngeom}"
  mirror="${ATTNGEOM_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}"
  # Debian has no Ubuntu archive keyring; this is noble's, pinned by hash. It holds the 2018 archive
  # key that signs every release since 18.04, jammy's included.
  local keyring_deb="pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb"
  local keyring_sha256="36de43b15853ccae0028e9a767613770c704833f82586f28eb262f0311adb8a8"

  cuda_release="$(_attngeom_docker_release "$repo/Dockerfile")" || return 2
  kaggle_release="$(_attngeom_docker_release "$repo/tests/kaggle-runtime/Dockerfile")" || return 2

  local missing=()
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  command -v zstd >/dev/null 2>&1 || missing+=(zstd) # Ubuntu's packages are zstd-compressed
  if [ "${#missing[@]}" -gt 0 ]; then
    echo ".ci/docker.sh: installing ${missing[*]}" >&2
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
  fi

  # The engine's own client first: a newer client on PATH may lack the buildx plugin.
  local client
  for client in ${ATTNGEOM_DOCKER:-} /usr/bin/docker docker; do
    command -v "$client" >/dev/null 2>&1 && break
  done
  ATTNGEOM_DOCKERD_PID=""
  if ! "$client" info >/dev/null 2>&1; then
    echo ".ci/docker.sh: starting dockerd (log: /var/log/attngeom-dockerd.log)" >&2
    nohup dockerd >/var/log/attngeom-dockerd.log 2>&1 &
    ATTNGEOM_DOCKERD_PID=$!
    local waited=0
    until "$client" info >/dev/null 2>&1; do
      sleep 1
      waited=$((waited + 1))
      [ "$waited" -lt 60 ] || { echo ".ci/docker.sh: dockerd did not start" >&2; return 2; }
    done
  fi

  # Bound the build cache that the image test leaves behind to about one image's worth.
  "$client" builder prune --force --keep-storage 8GB >/dev/null

  for release in $(printf '%s\n' "$cuda_release" "$kaggle_release" | sort -u); do
    image="attngeom-ubuntu-base:$release"
    tarball="$cache/ubuntu-$release-minbase.tar"
    if ! "$client" image inspect "$image" >/dev/null 2>&1; then
      if [ ! -s "$tarball" ]; then
        echo ".ci/docker.sh: debootstrapping Ubuntu $release into $cache (first run only)" >&2
        mkdir -p "$cache"
        rm -rf "$cache"/rootfs.* # left by an interrupted run
        keyring="$cache/ubuntu-archive-keyring.gpg"
        root="$(mktemp -d "$cache/rootfs.XXXXXX")"
        local deb="$root.deb"
        curl -fsS -o "$deb" "$mirror/$keyring_deb"
        echo "$keyring_sha256  $deb" | sha256sum -c --quiet - >&2
        dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/keyrings/ubuntu-archive-keyring.gpg >"$keyring"
        rm -f "$deb"
        local script="/usr/share/debootstrap/scripts/$release"
        [ -e "$script" ] || script=/usr/share/debootstrap/scripts/gutsy # every Ubuntu since 7.10
        debootstrap --variant=minbase --keyring="$keyring" "$release" "$root" "$mirror" "$script" >&2
        # The apt sources of Ubuntu's own image, so the Dockerfile's apt-get sees the updates.
        rm -f "$root/etc/apt/sources.list"
        printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates %s-security\nComponents: main restricted universe multiverse\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n' \
          "$mirror" "$release" "$release" "$release" >"$root/etc/apt/sources.list.d/ubuntu.sources"
        chroot "$root" apt-get clean
        rm -rf "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
        tar -C "$root" --numeric-owner -cf "$tarball.part" .
        mv "$tarball.part" "$tarball"
        rm -rf "$root"
      fi
      "$client" import "$tarball" "$image" >&2
    fi
  done
  ATTNGEOM_DOCKER_BASE="attngeom-ubuntu-base:$cuda_release"
  ATTNGEOM_KAGGLE_BASE="attngeom-ubuntu-base:$kaggle_release"
  ATTNGEOM_DOCKER="$client"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  _attngeom_docker_prepare
  echo "$ATTNGEOM_DOCKER_BASE"
else
  _attngeom_docker_prepare
  export ATTNGEOM_DOCKER_BASE ATTNGEOM_KAGGLE_BASE ATTNGEOM_DOCKER ATTNGEOM_DOCKERD_PID
fi
