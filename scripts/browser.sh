#!/usr/bin/env bash
# Headless-browser checks of minitrace-view's pages, as a person would see
# them. Installs what they need when missing: Debian's chromium, and
# playwright-core (pinned in scripts/browser/package.json) into
# scripts/browser/node_modules. Nothing is downloaded but these packages.
#
#   bash scripts/browser.sh install                 # exit 0 once both are there
#   bash scripts/browser.sh check PAGE.html OUTDIR  # one JSON line of results;
#                                                   # screenshots into OUTDIR
set -euo pipefail
cd "$(dirname "$0")/.."

CHROMIUM=/usr/bin/chromium

install() {
    if [ ! -x "$CHROMIUM" ]; then
        local sudo=""
        if [ "$(id -u)" != 0 ]; then
            command -v sudo >/dev/null || { echo "browser.sh: need root to apt-get install chromium" >&2; return 1; }
            sudo=sudo
        fi
        echo "browser.sh: installing Debian's chromium" >&2
        $sudo apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >&2
    fi
    if [ ! -f scripts/browser/node_modules/playwright-core/package.json ]; then
        command -v npm >/dev/null || { echo "browser.sh: npm is missing" >&2; return 1; }
        echo "browser.sh: installing playwright-core into scripts/browser/node_modules" >&2
        npm install --prefix scripts/browser --no-audit --no-fund --loglevel=error >&2
    fi
    [ -x "$CHROMIUM" ] && [ -f scripts/browser/node_modules/playwright-core/package.json ]
}

case "${1:-}" in
    install)
        install
        ;;
    check)
        [ $# -eq 3 ] || { echo "usage: browser.sh check PAGE.html OUTDIR" >&2; exit 2; }
        install
        CHROMIUM="$CHROMIUM" node scripts/browser/check.mjs "$2" "$3"
        ;;
    *)
        echo "usage: browser.sh install | check PAGE.html OUTDIR" >&2
        exit 2
        ;;
esac
