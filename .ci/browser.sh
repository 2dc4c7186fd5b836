#!/usr/bin/env bash
# Installs Debian's headless browser for the studio browser tests: the `chromium` and
# `chromium-driver` packages. Idempotent: when both binaries are present it does nothing.
# Runs as root, with no standard input. Prints the driver's path as
# STATEGRAPH_CHROMEDRIVER=<path> on its last line.
#
# The tests find the driver through that variable, or as `chromedriver` on the PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

have() {
    command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1
}

if have; then
    echo "browser: already installed ($(chromium --version 2>/dev/null || echo chromium))"
else
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "browser: apt-get is not available; install chromium and chromedriver" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q </dev/null >/dev/null
    apt-get install -y -q --no-install-recommends chromium chromium-driver </dev/null >/dev/null
    have || { echo "browser: the install left chromium or chromedriver missing" >&2; exit 1; }
    echo "browser: installed $(chromium --version 2>/dev/null || echo chromium)"
fi
echo "STATEGRAPH_CHROMEDRIVER=$(command -v chromedriver)"
