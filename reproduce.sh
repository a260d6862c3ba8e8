#!/usr/bin/env bash
# Verify the claims of "The Geometry of Attention Is a Choice of Kernel" and its companion.
#
#   ./reproduce.sh [verify] [--bundles DIR] [--out DIR]   judge every quoted number (default)
#   ./reproduce.sh rerun --preset smoke                   retrain the seed-0 runs, then judge them
#   ./reproduce.sh test [pytest args]                     run the test suite
#   ./reproduce.sh bench verify|train [--quick]           time the verify stage or the training
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

python_in() {  # python_in CMD LOWEST: CMD runs and is a Python from LOWEST to 3.13
  command -v "$1" >/dev/null 2>&1 && "$1" -c "import sys; sys.exit(not ($2 <= sys.version_info[:2] <= (3, 13)))" 2>/dev/null
}

pick_python() {
  # Python 3.11 to 3.13 runs everything; 3.10 runs the verification only (jax 0.10.2 needs 3.11).
  if [ -n "${ATTNGEOM_PYTHON:-}" ]; then
    python_in "$ATTNGEOM_PYTHON" "(3, 10)" && echo "$ATTNGEOM_PYTHON"
    return
  fi
  local lowest cand
  for lowest in "(3, 11)" "(3, 10)"; do
    for cand in python3 python3.13 python3.12 python3.11 python3.10; do
      python_in "$cand" "$lowest" && { echo "$cand"; return 0; }
    done
  done
  return 1
}

ensure_venv() {
  local want have=""
  want="$(sha256sum "$lock" | cut -d' ' -f1)"
  [ -f "$venv/.lock-sha256" ] && have="$(cat "$venv/.lock-sha256")"
  [ "$want" = "$have" ] && [ -x "$venv/bin/python" ] && return 0
  local py log
  py="$(pick_python)" || die "needs Python 3.10 to 3.13 on PATH (or ATTNGEOM_PYTHON=/path/to/python)"
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
  bench)
    case "${2:-}" in
      verify|train) exec "$venv/bin/python" "$here/bench/bench_$2.py" "${@:3}" ;;
      *) die "bench: which benchmark, verify or train? usage: reproduce.sh bench verify|train [--quick] (see bench/)" ;;
    esac ;;
  *) exec "$venv/bin/python" -m attngeom "$@" ;;
esac
