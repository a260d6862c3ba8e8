#!/usr/bin/env bash
# Time the kernel's two ways of installing a lock where ensurepip is missing, inside the
# Kaggle-like image, offline, from a wheel folder (the runtime test's, in /var/cache/attngeom):
#
#   docker run --rm --network none -v WHEELS:/wheels:ro -v "$PWD":/src:ro \
#     IMAGE bash /src/tests/kaggle-runtime/bench_install.sh [/src/requirements.lock]
#
# uv: the kernel's way (pip installs uv from the lock, `uv venv`, `uv pip install --require-hashes`);
# pip: `python -m venv --without-pip` plus `pip --python VENV/bin/python install --require-hashes`.
set -euo pipefail
lock="${1:-/src/requirements.lock}"
export PIP_FIND_LINKS=/wheels PIP_NO_INDEX=1 UV_FIND_LINKS=/wheels UV_OFFLINE=1 UV_NO_CACHE=1
scratch="$(mktemp -d)"
sed -n '/^uv==/,/^    #/p' "$lock" | grep -v '^    #' >"$scratch/uv.txt"
ms() { echo $(($(date +%s%N) / 1000000)); }

start=$(ms)
python3 -m pip install -q --no-cache-dir --root-user-action ignore --require-hashes --no-deps \
  --target "$scratch/uv" -r "$scratch/uv.txt"
"$scratch/uv/bin/uv" venv -q --python "$(command -v python3)" "$scratch/v-uv"
"$scratch/uv/bin/uv" pip install -q --python "$scratch/v-uv/bin/python" --require-hashes -r "$lock"
echo "uv:  $(($(ms) - start)) ms"

start=$(ms)
python3 -m venv --without-pip "$scratch/v-pip"
python3 -m pip --python "$scratch/v-pip/bin/python" install -q --no-cache-dir --root-user-action ignore \
  --require-hashes -r "$lock"
echo "pip: $(($(ms) - start)) ms"
rm -rf "$scratch"
