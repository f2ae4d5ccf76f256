#!/usr/bin/env bash
# The project's set-up step: installs, once and one after another, every
# tool the tests use beyond Rust and Go. scripts/test.sh runs it first; no
# test installs anything (parallel tests would race on apt's lock, and a
# machine that already has a tool would hide it). Idempotent: a part that is
# already there is left as it is.
#
#   bash scripts/setup.sh            # everything
#   bash scripts/setup.sh PART...    # some of: jaeger browser semver
#
# Parts:
#   jaeger   Jaeger v2, built from its Go module into target/jaeger-v2/bin
#            (scripts/jaeger.sh install; 4 to 8 minutes the first time)
#   browser  Debian's chromium (apt) and playwright-core, pinned in
#            scripts/browser/package-lock.json, into scripts/browser/node_modules
#   semver   cargo-semver-checks, pinned, for scripts/api-check.sh
#
# Exits non-zero if a part could not be installed. Under CI=true
# scripts/test.sh then fails; elsewhere the tests that need the part say
# SKIPPED.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "setup.sh: $*" >&2; }

# As root, or through sudo.
as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        log "needs root for: $*"
        return 1
    fi
}

# `apt_install PACKAGE...`: the packages not yet installed, with one update.
apt_install() {
    local missing=() package
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "apt-get install ${missing[*]}"
    as_root apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >&2
}

jaeger() {
    bash scripts/jaeger.sh install
}

browser() {
    apt_install chromium
    if [ ! -f scripts/browser/node_modules/playwright-core/package.json ]; then
        command -v npm >/dev/null || { log "npm is missing"; return 1; }
        log "installing playwright-core into scripts/browser/node_modules"
        npm ci --prefix scripts/browser --no-audit --no-fund --loglevel=error >&2
    fi
    bash scripts/browser.sh ready
}

semver() {
    local version
    version=$(sed -n 's/^SEMVER_CHECKS_VERSION=//p' scripts/api-check.sh)
    if [[ "$(cargo semver-checks --version 2>/dev/null)" != "cargo-semver-checks $version" ]]; then
        log "installing cargo-semver-checks $version (a few minutes the first time)"
        cargo install --locked --quiet "cargo-semver-checks@$version"
    fi
}

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(jaeger browser semver)
status=0
for part in "${parts[@]}"; do
    case $part in
    jaeger | browser | semver)
        if ! "$part"; then
            log "could not set up: $part"
            status=1
        fi
        ;;
    *)
        log "unknown part: $part (parts: jaeger browser semver)"
        exit 2
        ;;
    esac
done
exit $status
