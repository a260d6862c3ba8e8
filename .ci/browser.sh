#!/usr/bin/env bash
# Headless Chromium and its WebDriver for the browser tests (Debian packages); silent when present.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
log="$(mktemp -t attngeom-browser.XXXXXX.log)"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver; } >"$log" 2>&1; then
  echo ".ci/browser.sh: could not install chromium and chromium-driver; see $log" >&2
  exit 2
fi
rm -f "$log"
