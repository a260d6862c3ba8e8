#!/usr/bin/env bash
# The Debian packages the tests drive: headless Chromium and its WebDriver (the browser tests) and strace
# (the tests that kill a run at an exact write); silent when present.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v strace >/dev/null 2>&1 || missing+=(strace)
[ "${#missing[@]}" -eq 0 ] && exit 0
log="$(mktemp -t attngeom-tools.XXXXXX.log)"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
  echo ".ci/tools.sh: could not install ${missing[*]}; see $log" >&2
  exit 2
fi
rm -f "$log"
