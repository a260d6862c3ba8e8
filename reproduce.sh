#!/usr/bin/env bash
# Verify the claims of "The Geometry of Attention Is a Choice of Kernel" and its companion.
#
#   ./reproduce.sh [verify] [--bundles DIR] [--out DIR]   judge every quoted number (default)
#   ./reproduce.sh rerun --backend local --preset smoke   retrain the seed-0 runs, then judge them
#   ./reproduce.sh test [pytest args]                     run the test suite
#   ./reproduce.sh --help                                 every subcommand
#
# The first run builds a virtual environment from the hash-pinned requirements.lock.
# ATTNGEOM_LOCK=FILE picks another lock (the Docker image uses requirements-cuda.lock).
# ATTNGEOM_MIRROR=DIR replaces the network with a local copy laid out as DIR/<host>/<path>.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${ATTNGEOM_VENV:-$here/.venv}"
lock="${ATTNGEOM_LOCK:-$here/requirements.lock}"

die() { echo "reproduce.sh: $*" >&2; exit 2; }

pick_python() {
  local cand
  for cand in ${ATTNGEOM_PYTHON:-} python3 python3.12 python3.11 python3.10; do
    command -v "$cand" >/dev/null 2>&1 || continue
    if "$cand" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] <= (3, 12)))' 2>/dev/null; then
      echo "$cand"; return 0
    fi
  done
  return 1
}

ensure_venv() {
  local want have=""
  want="$(sha256sum "$lock" | cut -d' ' -f1)"
  [ -f "$venv/.lock-sha256" ] && have="$(cat "$venv/.lock-sha256")"
  [ "$want" = "$have" ] && [ -x "$venv/bin/python" ] && return 0
  local py log
  py="$(pick_python)" || die "needs Python 3.10, 3.11 or 3.12 on PATH (or ATTNGEOM_PYTHON=/path/to/python)"
  log="$(mktemp -t attngeom-venv.XXXXXX.log)"
  echo "reproduce.sh: building the environment in $venv from $(basename "$lock") (first run only; log: $log)" >&2
  if ! { { [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"; } && "$venv/bin/python" -m pip install \
          --disable-pip-version-check --require-hashes -r "$lock"; } >"$log" 2>&1; then
    rm -f "$venv/.lock-sha256"
    die "could not install the locked dependencies; see $log"
  fi
  echo "$want" >"$venv/.lock-sha256"
}

ensure_venv
export PYTHONPATH="$here/src${PYTHONPATH:+:$PYTHONPATH}"
case "${1:-}" in
  test) shift; cd "$here" && exec "$venv/bin/python" -m pytest "$@" ;;
  *) exec "$venv/bin/python" -m attngeom "$@" ;;
esac
