#!/usr/bin/env bash
# The project's set-up step: installs, once and one after another, every
# tool the tests use beyond Rust and Go. scripts/test.sh runs it first; no
# test installs anything (parallel tests would race on apt's lock, and a
# machine that already has a tool would hide it). Idempotent: a part that is
# already there is left as it is.
#
#   bash scripts/setup.sh            # everything
#   bash scripts/setup.sh PART...    # some of: jaeger browser semver aarch64
#
# Parts:
#   jaeger   Jaeger v2, built from its Go module into target/jaeger-v2/bin
#            (scripts/jaeger.sh install; 4 to 8 minutes the first time)
#   browser  Debian's chromium (apt) and playwright-core, pinned in
#            scripts/browser/package-lock.json, into scripts/browser/node_modules
#   semver   cargo-semver-checks, pinned, for scripts/api-check.sh
#   aarch64  what scripts/aarch64-test.sh needs to build minstant's and
#            minitrace's tests for aarch64 Linux and run them under qemu:
#            Debian's Rust with the arm64 standard library, the cross
#            linker and libc, qemu-user-static (apt, about 300 MB), and
#            qemu registered with binfmt_misc so that a test that starts its
#            own binary again runs too (../shared/facts/aarch64.md)
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

# The aarch64 cross toolchain and emulator. rustup's toolchain has only the
# x86-64 standard library; Debian's rustc-web (1.96) builds for aarch64 once
# its arm64 standard library is beside it.
AARCH64_PACKAGES=(rustc-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static)

aarch64() {
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        log "dpkg --add-architecture arm64"
        as_root dpkg --add-architecture arm64
        # apt_install updates its lists only when something is missing,
        # which the arm64 package is now.
    fi
    apt_install "${AARCH64_PACKAGES[@]}"
    # binfmt_misc: the kernel hands aarch64 programs to qemu, so that a
    # test's child process (its own binary started again) runs as well.
    # Not mounted by itself on this kind of machine; registered once per boot.
    if ! mountpoint -q /proc/sys/fs/binfmt_misc; then
        as_root mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    fi
    if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
        log "registering qemu-aarch64 with binfmt_misc"
        as_root sh -c 'cat /usr/lib/binfmt.d/qemu-aarch64.conf > /proc/sys/fs/binfmt_misc/register'
    fi
    bash scripts/aarch64-test.sh ready
}

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(jaeger browser semver aarch64)
status=0
for part in "${parts[@]}"; do
    case $part in
    jaeger | browser | semver | aarch64)
        if ! "$part"; then
            log "could not set up: $part"
            status=1
        fi
        ;;
    *)
        log "unknown part: $part (parts: jaeger browser semver aarch64)"
        exit 2
        ;;
    esac
done
exit $status
