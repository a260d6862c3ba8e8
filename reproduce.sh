#!/usr/bin/env bash
# Verify the claims of "The Geometry of Attention Is a Choice of Kernel" and its companion.
#
#   ./reproduce.sh [verify] [--bundles DIR] [--out DIR]   judge every quoted number (default)
#   ./reproduce.sh rerun --preset smoke                   retrain the seed-0 runs, then judge them
#   ./reproduce.sh test [pytest args]                     run the test suite
#   ./reproduce.sh bench verify|train|profile [--quick]   time the verify stage or the training; where a step's time goes
#   ./reproduce.sh --help                                 every subcommand
#
# The first run builds a virtual environment from the hash-pinned requirements.lock, in .venv or
# ATTNGEOM_VENV=DIR, with the Python on PATH or ATTNGEOM_PYTHON=/path/to/python (the one that builds it).
# ATTNGEOM_LOCK=FILE picks another lock (the Docker image uses requirements-cuda.lock).
# ATTNGEOM_SYSTEM_PYTHON=/path/to/python instead runs every command on that interpreter, which already
# holds the packages (a GPU image, a shared server): nothing is built or installed, ATTNGEOM_VENV and
# ATTNGEOM_PYTHON are not used, each command first looks for the modules it needs (a missing one is
# one `error:` line and 2), and reports and manifests say where the versions differ from the lock.
# ATTNGEOM_MIRROR=DIR replaces the network with a local copy laid out as DIR/<host>/<path>.
# Its own failures end like the program's: one `error:` line and 2 (unusable input or setting),
# 3 (internal error), or one line and 128 + the signal (Ctrl-C 130, SIGTERM 143, SIGHUP 129).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${ATTNGEOM_VENV:-$here/.venv}"
lock="${ATTNGEOM_LOCK:-$here/requirements.lock}"
DONE=.lock-sha256           # written last: the environment is complete, built from the lock of this sha256
BUILDING=.attngeom-building # written first: the folder is an environment this script is building

say() { echo "$*" >&2 || true; }  # stderr may be closed
die() { say "error: $*"; exit 2; }
set -E  # the ERR trap holds inside functions too
trap 'say "error: internal error: reproduce.sh line $LINENO: a command failed (status $?)"; exit 3' ERR
trap 'say interrupted; exit 130' INT
trap 'say "interrupted (SIGTERM)"; exit 143' TERM
trap 'say "interrupted (SIGHUP)"; exit 129' HUP

# Python without the caller's working folder on sys.path (`python -m` puts it first, so a
# `random.py` there would run): `-c` puts '' there instead, removed before anything is imported.
# PYTHONSAFEPATH does the same for every Python the command starts from 3.11 on.
export PYTHONSAFEPATH=1
run_module=(-c 'import sys
if sys.path and sys.path[0] == "":
    del sys.path[0]
import runpy
del sys.argv[0]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)')

said_by() {  # what a Python prints when asked its version (its exit status alone proves nothing)
  "$1" -I -c 'import sys; print("attngeom-python-version %d.%d" % sys.version_info[:2])' 2>/dev/null | head -c 2000 || true
}

reported_version() {  # the major.minor said on a line of its own behind the marker; nothing else counts: a
  # sitecustomize that prints is passed over, a stand-in that answers anything says no version
  local said
  said="$(said_by "$1")"
  [[ "$said" =~ (^|$'\n')attngeom-python-version\ ([0-9]+\.[0-9]+)($'\n'|$) ]] && echo "${BASH_REMATCH[2]}"
  return 0
}

python_in() {  # python_in CMD LOWEST: CMD runs and prints a version from 3.LOWEST to 3.13
  local v
  v="$(reported_version "$1")"
  [[ "$v" =~ ^3\.(1[0-3])$ ]] && [ "${BASH_REMATCH[1]}" -ge "$2" ]
}

pick_python() {  # sets py: Python 3.11 to 3.13 runs everything; 3.10 the verification only (jax needs 3.11)
  if [ -n "${ATTNGEOM_PYTHON:-}" ]; then
    command -v "$ATTNGEOM_PYTHON" >/dev/null 2>&1 || die "ATTNGEOM_PYTHON=$ATTNGEOM_PYTHON: no such interpreter"
    python_in "$ATTNGEOM_PYTHON" 10 ||
      die "ATTNGEOM_PYTHON=$ATTNGEOM_PYTHON: not a Python 3.10 to 3.13 (it reports '$(said_by "$ATTNGEOM_PYTHON" | head -n1 | head -c 200)')"
    py="$ATTNGEOM_PYTHON"
    return
  fi
  local lowest cand
  for lowest in 11 10; do
    for cand in python3 python3.13 python3.12 python3.11 python3.10; do
      python_in "$cand" "$lowest" && { py="$cand"; return; }
    done
  done
  die "needs Python 3.10 to 3.13 on PATH (or ATTNGEOM_PYTHON=/path/to/python)"
}

ensure_venv() {
  # The environment is complete when $DONE holds the lock's sha256; $DONE is removed before any
  # change and written last, so a build that stopped half-way (Ctrl-C, a full disk) is never
  # trusted: it is built again from scratch.
  local want have="" log
  [ -f "$lock" ] || die "$lock: no such lock file${ATTNGEOM_LOCK:+ (ATTNGEOM_LOCK)}"
  want="$(sha256sum <"$lock" 2>/dev/null | cut -d' ' -f1)" && [ -n "$want" ] || die "$lock: cannot read the lock file"
  if [ -e "$venv" ] && [ ! -d "$venv" ]; then
    die "$venv: the environment's place exists and is not a folder (set ATTNGEOM_VENV to a folder)"
  fi
  [ -f "$venv/$DONE" ] && have="$(cat "$venv/$DONE" 2>/dev/null || true)"
  [ "$want" = "$have" ] && [ -x "$venv/bin/python" ] && return 0
  pick_python
  if [ -d "$venv" ] && [ -z "$have" ]; then
    # A build of ours that stopped, or the checkout's own .venv left without pip (earlier versions
    # marked nothing), is built again; a .venv that works is installed into; anything else is left alone.
    if [ -e "$venv/$BUILDING" ] || [ -z "$(ls -A "$venv" 2>/dev/null)" ] ||
       { [ -z "${ATTNGEOM_VENV:-}" ] && ! "$venv/bin/python" -I -m pip --version >/dev/null 2>&1; }; then
      say "reproduce.sh: $venv is an unfinished build; building it again"
      rm -rf "$venv" 2>/dev/null || die "$venv: cannot remove the unfinished environment"
    elif [ -n "${ATTNGEOM_VENV:-}" ]; then
      die "$venv: exists and is not an environment built by reproduce.sh (no $DONE); delete it or set ATTNGEOM_VENV"
    fi
  fi
  { mkdir -p "$venv" && : >"$venv/$BUILDING" && rm -f "$venv/$DONE"; } 2>/dev/null ||
    die "$venv: cannot build the environment there (not writable); set ATTNGEOM_VENV to a writable folder"
  log="$(mktemp -t attngeom-venv.XXXXXX.log 2>/dev/null)" || die "cannot create a log file in ${TMPDIR:-/tmp}"
  say "reproduce.sh: building the environment in $venv from $(basename "$lock") (first run only; log: $log)"
  # a subshell: a trap (Ctrl-C) runs here, after it, and its line reaches the terminal, not the log
  if ! ( { [ -x "$venv/bin/python" ] || "$py" -I -m venv "$venv"; } && "$venv/bin/python" -I -m pip install \
          --disable-pip-version-check --require-hashes -r "$lock" ) >"$log" 2>&1; then
    die "could not install the locked dependencies; see $log"
  fi
  rm -f "$log"  # kept only for a build that failed (named above) or was interrupted (named as it began)
  { echo "$want" >"$venv/$DONE" && rm -f "$venv/$BUILDING"; } 2>/dev/null || die "$venv: cannot mark the environment complete"
}

use_system_python() {  # sets python to ATTNGEOM_SYSTEM_PYTHON, once it runs and has what command $1 needs
  local status=0
  command -v "$ATTNGEOM_SYSTEM_PYTHON" >/dev/null 2>&1 || die "ATTNGEOM_SYSTEM_PYTHON=$ATTNGEOM_SYSTEM_PYTHON: no such interpreter"
  python_in "$ATTNGEOM_SYSTEM_PYTHON" 10 ||
    die "ATTNGEOM_SYSTEM_PYTHON=$ATTNGEOM_SYSTEM_PYTHON: not a Python 3.10 to 3.13 (it reports '$(said_by "$ATTNGEOM_SYSTEM_PYTHON" | head -n1 | head -c 200)')"
  python="$ATTNGEOM_SYSTEM_PYTHON"
  "$python" -c 'import sys
if sys.path and sys.path[0] == "":
    del sys.path[0]
from attngeom.base.environment import require
require(sys.argv[1])' "$1" || status=$?
  [ "$status" = 0 ] || { [ "$status" = 2 ] && exit 2; die "ATTNGEOM_SYSTEM_PYTHON=$python: the check of its modules failed (status $status)"; }
}

export PYTHONPATH="$here/src${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "${ATTNGEOM_SYSTEM_PYTHON:-}" ]; then
  case "${1:-}" in  # the command's name as attngeom.base.environment.NEEDS has it
    bench) command="bench-${2:-}" ;;
    ""|-*) command=verify ;;
    *) command="$1" ;;
  esac
  export ATTNGEOM_SYSTEM_PYTHON
  use_system_python "$command"
else
  ensure_venv
  python="$venv/bin/python"
fi
case "${1:-}" in
  test)
    # pytest's statuses: 0 passed, 1 a test failed, 2 interrupted or a file not collected, 3 internal
    # error; its 4 (bad option) and 5 (no test selected) are unusable input here.
    shift
    cd "$here"
    # The whole suite (no arguments) is spread over the machine's cores, a test file to a worker, so each
    # file's fixtures are made once (pytest-xdist); with arguments, pytest runs as they say (add -n N).
    [ "$#" -gt 0 ] || set -- -n auto --dist loadfile
    status=0
    "$python" "${run_module[@]}" pytest "$@" || status=$?
    case "$status" in
      4) die "test: pytest refused its arguments (see above)" ;;
      5) die "test: no test matches the arguments given" ;;
    esac
    exit "$status" ;;
  bench)
    case "${2:-}" in
      verify|train|profile|mutation) exec "$python" "$here/bench/bench_$2.py" "${@:3}" ;;  # each puts src/ and bench/ on sys.path itself
      -h|--help)
        echo "usage: reproduce.sh bench verify|train|profile [--quick] | bench mutation [MODULE...]"
        echo
        echo "Benchmarks, each a ratio against a baseline measured in the same process (docs/speed.md):"
        echo "  verify    the verify stage, with extra windows, and the hull census against one LP per key"
        echo "  train     the training harness against a per-step loop, and the step against its matmuls' rate"
        echo "  profile   where a training step's time goes"
        echo "  mutation  the mutation check of the modules that decide a verdict (docs/development.md)"
        echo
        echo "Each takes --help for its own options."
        exit 0 ;;
      *) die "bench: which benchmark, verify, train, profile or mutation? usage: reproduce.sh bench verify|train|profile [--quick] or bench mutation [MODULE...] (see bench/)" ;;
    esac ;;
  *) exec "$python" "${run_module[@]}" attngeom "$@" ;;
esac
