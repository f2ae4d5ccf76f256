#!/usr/bin/env bash
# Headless-browser checks of minitrace-view's pages, as a person would see
# them, with Debian's chromium driven by playwright-core. Both are
# installed by the project's set-up step (`bash scripts/setup.sh browser`),
# never here: tests run in parallel and must not install.
#
#   bash scripts/browser.sh ready                   # exit 0 when both are installed
#   bash scripts/browser.sh check PAGE.html OUTDIR  # one JSON line of results;
#                                                   # screenshots into OUTDIR
#   bash scripts/browser.sh explain PAGE.html OUTDIR MIN_US
#                                                   # the same, of a brush over
#                                                   # latencies above MIN_US
set -euo pipefail
cd "$(dirname "$0")/.."

CHROMIUM=/usr/bin/chromium

ready() {
    if [ ! -x "$CHROMIUM" ]; then
        echo "browser.sh: $CHROMIUM is missing: run bash scripts/setup.sh browser" >&2
        return 1
    fi
    if [ ! -f scripts/browser/node_modules/playwright-core/package.json ]; then
        echo "browser.sh: playwright-core is missing: run bash scripts/setup.sh browser" >&2
        return 1
    fi
}

case "${1:-}" in
    ready)
        ready
        ;;
    check)
        [ $# -eq 3 ] || { echo "usage: browser.sh check PAGE.html OUTDIR" >&2; exit 2; }
        ready
        CHROMIUM="$CHROMIUM" node scripts/browser/check.mjs "$2" "$3"
        ;;
    explain)
        [ $# -eq 4 ] || { echo "usage: browser.sh explain PAGE.html OUTDIR MIN_US" >&2; exit 2; }
        ready
        CHROMIUM="$CHROMIUM" node scripts/browser/explain.mjs "$2" "$3" "$4"
        ;;
    *)
        echo "usage: browser.sh ready | check PAGE.html OUTDIR | explain PAGE.html OUTDIR MIN_US" >&2
        exit 2
        ;;
esac
